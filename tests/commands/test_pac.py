"""``/proxy.pac``: the proxy auto-configuration file, run as browsers run it (node, with the
PAC functions browsers define), for a table of URLs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from wwwproxy.commands.pac import CONTENT_TYPE, proxy_pac

#: the functions a browser's PAC environment defines (the script uses none of them, but
#: runs beside them as it would there), then each case's answer as JSON lines
HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [script, cases] = [fs.readFileSync(process.argv[2], "utf8"), JSON.parse(process.argv[3])];
const sandbox = {
  isPlainHostName: (h) => h.indexOf(".") < 0,
  dnsDomainIs: (h, d) => h.length >= d.length && h.substring(h.length - d.length) == d,
  shExpMatch: (s, p) => new RegExp("^" + p.replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*").replace(/\?/g, ".") + "$").test(s),
  dnsResolve: () => null, myIpAddress: () => "127.0.0.1", isInNet: () => false,
};
vm.createContext(sandbox);
vm.runInContext(script, sandbox);
for (const [url, host] of cases) console.log(JSON.stringify(sandbox.FindProxyForURL(url, host)));
"""


def run_pac(tmp_path: Path, script: str, cases: list[tuple[str, str]]) -> list[str]:
    node = shutil.which("node")
    assert node is not None, "node (Debian package nodejs) runs the PAC tests"
    (tmp_path / "proxy.pac").write_text(script, encoding="utf-8")
    (tmp_path / "harness.js").write_text(HARNESS)
    done = subprocess.run(
        [node, str(tmp_path / "harness.js"), str(tmp_path / "proxy.pac"), json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.split("\n") if line]


PROXY = "PROXY 127.0.0.1:8080"
SETTINGS = {
    "local_net": (
        "*.lan",
        "intranet",
        "http://[fd00::1]:8000",
        "192.168.1.10",
        "wiki.example/private/*",
        "https://*.corp.example",
    ),
    "https_bypass": ("bank.example", "*.pay.example", "[::1]"),
    "connect_ports": (443, 8443),
}


#: (the URL a browser hands FindProxyForURL, its host, the answer)
CASES = [
    ("http://example.com/", "example.com", PROXY),
    ("https://example.com/", "example.com", PROXY),
    ("https://example.com:8443/", "example.com", PROXY),
    # HTTPS the proxy would refuse to tunnel
    ("https://example.com:9443/", "example.com", "DIRECT"),
    ("wss://example.com:9443/socket", "example.com", "DIRECT"),
    # local_net: host patterns, sub-domains, case, a trailing dot
    ("http://nas.lan/", "nas.lan", "DIRECT"),
    ("https://NAS.Home.LAN./", "NAS.Home.LAN.", "DIRECT"),
    ("http://lan/", "lan", PROXY),  # *.lan is the sub-domains only
    ("http://intranet/x", "intranet", "DIRECT"),
    ("http://intranet.example/", "intranet.example", PROXY),
    ("http://192.168.1.10/", "192.168.1.10", "DIRECT"),
    ("http://192.168.1.100/", "192.168.1.100", PROXY),
    # scheme and port of a pattern
    ("http://[fd00::1]:8000/", "[fd00::1]", "DIRECT"),
    ("http://[fd00::1]:8000/", "fd00::1", "DIRECT"),
    ("http://[fd00::1]/", "fd00::1", PROXY),
    ("https://x.corp.example/", "x.corp.example", "DIRECT"),
    ("http://x.corp.example/", "x.corp.example", PROXY),
    # a path pattern
    ("http://wiki.example/private/page?x=1", "wiki.example", "DIRECT"),
    ("http://wiki.example/public/page", "wiki.example", PROXY),
    # https_bypass: HTTPS only (its plain HTTP is cached as any other)
    ("https://bank.example/", "bank.example", "DIRECT"),
    ("http://bank.example/", "bank.example", PROXY),
    ("https://www.pay.example/", "www.pay.example", "DIRECT"),
    ("https://pay.example/", "pay.example", PROXY),
    ("https://[::1]/", "::1", "DIRECT"),
]


@pytest.fixture(scope="module")
def pac_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """Every case of the table, in one node run."""
    cases = [(url, host) for url, host, _ in CASES]
    script = proxy_pac("127.0.0.1:8080", **SETTINGS)  # type: ignore[arg-type]
    answers = run_pac(tmp_path_factory.mktemp("pac"), script, cases)
    return dict(zip(cases, answers, strict=True))


@pytest.mark.parametrize(("url", "host", "expected"), CASES)
def test_what_goes_direct(
    url: str, host: str, expected: str, pac_answers: dict[tuple[str, str], str]
) -> None:
    assert pac_answers[url, host] == expected


def test_with_an_upstream_proxy_only_local_net_goes_direct(tmp_path: Path) -> None:
    script = proxy_pac("proxy.lan:3128", **SETTINGS, upstream_proxy=True)  # type: ignore[arg-type]
    cases = [
        ("https://bank.example/", "bank.example"),
        ("https://example.com:9443/", "example.com"),
        ("http://nas.lan/", "nas.lan"),
    ]
    assert run_pac(tmp_path, script, cases) == ["PROXY proxy.lan:3128"] * 2 + ["DIRECT"]


def test_values_cannot_break_out_of_the_script(tmp_path: Path) -> None:
    """Whatever the strings hold, they stay strings: quotes, a script end, line separators."""
    evil = "x\";}function FindProxyForURL(){return 'DIRECT'}//\u2028</script>\n"
    script = proxy_pac(evil, (), (), (443,))
    assert script.isascii()
    assert run_pac(tmp_path, script, [("http://example.com/", "example.com")]) == [f"PROXY {evil}"]


async def test_the_page_names_the_address_the_browser_used(client, proxy) -> None:  # noqa: ANN001
    status, text, headers = await client.get("/proxy.pac")
    assert status == 200
    assert headers["Content-Type"] == CONTENT_TYPE
    assert f'var PROXY = "PROXY 127.0.0.1:{proxy.port}";' in text
    assert "function FindProxyForURL(url, host)" in text
    # asked for by another of its names: the proxy by that name
    status, text, _ = await client.get("/proxy.pac", headers={"Host": f"localhost:{proxy.port}"})
    if client.via == "direct":
        assert f'var PROXY = "PROXY localhost:{proxy.port}";' in text
