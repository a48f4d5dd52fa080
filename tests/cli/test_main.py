"""The ``wwwproxy`` console script, run as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = "HTTP://User:p%40ss@WWW.Example.COM:80/a/./b/../%7euser/x%20y;p=1?q=a%20b&amp;r=%2b#frag"


def wwwproxy(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    # the console script installed beside this interpreter, as a user runs it
    script = Path(sys.executable).with_name("wwwproxy")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "wwwproxy"]
    return subprocess.run(
        [*cmd, *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


def test_canon_prints_canonical_cache_name_and_surt() -> None:
    result = wwwproxy("canon", EXAMPLE)
    assert result.returncode == 0, result.stderr
    canonical, name, key = result.stdout.decode().rstrip("\n").split("\t")
    assert canonical == "http://www.example.com/a/~user/x%20y;p=1?q=a+b&r=%2B"
    assert name.startswith("http/www.example.com/") and len(name.split("/")[2]) == 22
    assert key == "(com,example,www,)/a/~user/x%20y;p=1?q=a+b&r=%2b"


def test_canon_invalid_url_reports_and_continues() -> None:
    result = wwwproxy("canon", "http://a b/", "example.com", "http://h:99999/")
    assert result.returncode == 1
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("http://example.com/\t")
    err = result.stderr.decode()
    assert "http://a b/" in err and "a space" in err
    assert "out of range" in err


def test_canon_json_in_input_order_with_errors() -> None:
    result = wwwproxy("canon", "--json", "http://u:p@Example.com/x", "http://[::1/", "/index/")
    assert result.returncode == 1
    rows = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [row["input"] for row in rows] == ["http://u:p@Example.com/x", "http://[::1/", "/index/"]
    first, bad, local = rows
    assert first["canonical"] == "http://example.com/x"
    assert first["file"] == "http://u:p@example.com/x"
    assert first["surt"] == "(com,example,)/x"
    assert first["cache_name"].startswith("http/example.com/")
    assert set(bad) == {"input", "error"} and "']'" in bad["error"]
    assert local["canonical"] == "http://localhost:8080/index/"


def test_canon_stdin_bytes() -> None:
    data = b"http://x/\xff\r\nhttp://b\xc3\xbccher.example/\n\nhttp://b\xfccher.example/\n"
    result = wwwproxy("canon", "--json", "-", stdin=data)
    assert result.returncode == 1
    rows = [json.loads(line) for line in result.stdout.decode("ascii").splitlines()]
    assert len(rows) == 4
    assert rows[0]["canonical"] == "http://x/%FF"
    assert rows[1]["canonical"] == "http://xn--bcher-kva.example/"
    assert rows[1]["surt"] == "(example,bücher,)/"
    # an empty input is the proxy's own root (issue 13, item 10; canonical-url-rules 0, 1, 4)
    assert rows[2]["input"] == "" and rows[2]["canonical"] == "http://localhost:8080/"
    assert "UTF-8" in rows[3]["error"]
    # the input is given back exactly: undecodable bytes as surrogate escapes
    assert rows[3]["input"].encode("utf-8", "surrogateescape") == b"http://b\xfccher.example/"


def test_canon_stdin_one_row_per_line_in_order() -> None:
    # blank and whitespace-only lines are inputs too, so rows zip with the input lines
    lines = [b"a.com", b"", b"  ", b"\t\x0b", b"b.com/x\r", b"c.com:99999", b"\x00", b"d.com"]
    result = wwwproxy("canon", "--json", "-", stdin=b"\n".join(lines) + b"\n")
    assert result.returncode == 1
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["input"] for row in rows] == [
        "a.com",
        "",
        "  ",
        "\t\x0b",
        "b.com/x",
        "c.com:99999",
        "\x00",
        "d.com",
    ]
    root = "http://localhost:8080/"  # empty once spaces and control bytes are stripped
    assert [row.get("canonical") for row in rows] == [
        "http://a.com/",
        root,
        root,
        root,
        "http://b.com/x",
        None,
        root,
        "http://d.com/",
    ]


def test_canon_output_is_utf8_whatever_the_locale() -> None:
    result = wwwproxy("canon", "http://Bücher.example/", env={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode("utf-8").endswith("\t(example,bücher,)/\n")


def test_canon_mixes_arguments_and_stdin_in_order() -> None:
    result = wwwproxy("canon", "a.com", "-", "c.com", stdin=b"b.com\n")
    assert result.returncode == 0
    hosts = [line.split("\t")[0] for line in result.stdout.decode().splitlines()]
    assert hosts == ["http://a.com/", "http://b.com/", "http://c.com/"]


@pytest.mark.parametrize("args", [[], ["canon"], ["nonsense"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = wwwproxy(*args)
    assert result.returncode == 2
    assert b"usage" in result.stderr


def test_canon_post_body_shows_archive_key(tmp_path: Path) -> None:
    body = tmp_path / "body"
    body.write_bytes(b"hello")
    result = wwwproxy("canon", "--method", "post", "--body", str(body), "http://Example.org/chat")
    assert result.returncode == 0, result.stderr
    key, name, surt_key = result.stdout.decode().rstrip("\n").split("\t")
    assert key == "http://example.org/chat?__wb_method=POST&__wb_post_data=aGVsbG8="
    assert surt_key == "(org,example,)/chat?__wb_method=post&__wb_post_data=agvsbg8="
    get = wwwproxy("canon", "http://Example.org/chat").stdout.decode().split("\t")
    assert name != get[1]  # another request, another cache file


def test_canon_json_body_from_stdin() -> None:
    result = wwwproxy(
        "canon",
        "--json",
        "--method",
        "PUT",
        "--content-type",
        "application/json; charset=utf-8",
        "--body",
        "-",
        "http://example.org/e?x",
        stdin=b'{"a": [1, "x y"], "b": null}',
    )
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)
    assert row["key"] == "http://example.org/e?x&__wb_method=PUT&a=1&a.2_=x+y&b=None"
    assert row["surt"] == "(org,example,)/e?x&__wb_method=put&a=1&a.2_=x+y&b=none"
    assert row["canonical"] == "http://example.org/e?x"


def test_canon_get_key_is_the_file_string() -> None:
    row = json.loads(wwwproxy("canon", "--json", "http://u@h/").stdout)
    assert row["key"] == row["file"] == "http://u@h/"


@pytest.mark.parametrize(
    "args",
    [
        ["--method", "P T", "x.com"],
        ["--body", "/nonexistent/body", "x.com"],
        ["--body", "-", "-"],
    ],
)
def test_canon_bad_request_options_exit_2(args: list[str]) -> None:
    result = wwwproxy("canon", *args, stdin=b"")
    assert result.returncode == 2
    assert result.stdout == b""
    assert b"wwwproxy canon:" in result.stderr


def _populate(root: Path) -> None:
    from wwwproxy.archive.store import Store
    from wwwproxy.url import canonicalize

    store = Store(root)
    for i in range(3):
        url = canonicalize(f"http://example.com/{i}")
        rec = store.recorder(url, url.file, method="GET", request_headers=[], request_body=b"")
        rec.write(b"body %d" % i)
        rec.finish(200, "OK", [("Content-Type", "text/plain")])


def test_index_rebuild_and_check(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _populate(cache)
    result = wwwproxy("index", "check", "--cache", str(cache))
    assert result.returncode == 0, result.stdout + result.stderr
    (cache / "index" / "journal.cdxj").unlink()
    result = wwwproxy("index", "check", "--cache", str(cache))
    assert result.returncode == 1
    assert result.stdout.decode().count("record not in the index") == 3
    result = wwwproxy("index", "rebuild", "--cache", str(cache))
    assert result.returncode == 0, result.stderr
    assert b"3 records" in result.stdout
    assert b"(3 files in " in result.stdout and b" files/s, 1 worker)" in result.stdout
    assert wwwproxy("index", "check", "--cache", str(cache)).returncode == 0


def test_index_check_names_file_and_line(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _populate(cache)
    journal = cache / "index" / "journal.cdxj"
    with open(journal, "ab") as f:
        f.write(b"garbage line\n")
    lines = journal.read_bytes().count(b"\n")
    result = wwwproxy("index", "check", "--cache", str(cache))
    assert result.returncode == 1
    assert f"{journal}:{lines}:".encode() in result.stdout


def test_index_uses_config_cache(tmp_path: Path) -> None:
    cache = tmp_path / "elsewhere"
    _populate(cache)
    conf = tmp_path / "w.yaml"
    conf.write_text(f"cache: {cache}\n")
    result = wwwproxy("index", "rebuild", "-c", str(conf))
    assert result.returncode == 0 and b"3 records" in result.stdout
    conf.write_text("cache: [1, 2]\nbogus: 1\n")
    result = wwwproxy("index", "rebuild", "-c", str(conf))
    assert result.returncode == 2
    assert f"{conf}:1: key 'cache'".encode() in result.stderr
    assert f"{conf}:2: unknown key 'bogus'".encode() in result.stderr


def test_index_on_an_unusable_cache_says_what_and_where(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _populate(cache)
    (cache / "http" / "example.com" / ("x" * 22 + ".warc.gz")).mkdir()  # not a file: skipped
    assert wwwproxy("index", "rebuild", "--cache", str(cache)).returncode == 0
    journal = cache / "index" / "journal.cdxj"
    journal.mkdir()
    for action in ("rebuild", "check"):
        result = wwwproxy("index", action, "--cache", str(cache))
        assert result.returncode in (1, 2) and b"Traceback" not in result.stderr
        assert str(journal).encode() in result.stdout + result.stderr
    journal.rmdir()
    shutil.rmtree(cache / "index")
    (cache / "index").write_text("not a directory")
    result = wwwproxy("index", "check", "--cache", str(cache))
    assert result.returncode == 2 and b"Traceback" not in result.stderr
    assert str(cache / "index").encode() in result.stderr


def test_nothing_in_the_package_imports_the_cli() -> None:
    """The command line sits above everything (the console script and ``python -m`` start
    it); a module that imported it would turn the layers upside down."""
    import ast

    import wwwproxy

    root = Path(wwwproxy.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] == "cli" or relative == Path("__main__.py"):
            continue
        package = ["wwwproxy", *relative.parent.parts]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                names = [module] + [f"{module}.{alias.name}" for alias in node.names]
            if any(n == "wwwproxy.cli" or n.startswith("wwwproxy.cli.") for n in names):
                offenders.append(f"{relative}:{node.lineno}")
    assert offenders == []


def test_ca_prints_the_certificate_authority_and_how_to_trust_it(tmp_path, capsys):
    from cryptography import x509

    from wwwproxy.cli import main

    cache = tmp_path / "cache"
    assert main(["ca", "--cache", str(cache)]) == 0
    pem = capsys.readouterr().out
    cert = x509.load_pem_x509_certificate(pem.encode())
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert "wwwproxy" in cert.subject.rfc4514_string()
    assert (cache / "certificates" / "ca.key.pem").stat().st_mode & 0o777 == 0o600
    # the same CA the next time: browsers that trust it keep trusting it
    assert main(["ca", "--cache", str(cache)]) == 0
    assert capsys.readouterr().out == pem
    assert main(["ca", "--cache", str(cache), "--install-help"]) == 0
    help_text = capsys.readouterr().out
    assert str((cache / "certificates" / "ca.cert.pem").resolve()) in help_text
    assert "certutil" in help_text and "Firefox" in help_text


def test_ca_with_a_broken_key_says_so_and_keeps_the_file(tmp_path, capsys):
    from wwwproxy.cli import main

    cache = tmp_path / "cache"
    assert main(["ca", "--cache", str(cache)]) == 0
    key = cache / "certificates" / "ca.key.pem"
    key.write_bytes(b"not a key")
    capsys.readouterr()
    assert main(["ca", "--cache", str(cache)]) == 2
    err = capsys.readouterr().err
    assert "ca.key.pem" in err
    assert key.read_bytes() == b"not a key"


def test_ca_test_cert_writes_a_certificate_and_key_and_says_how_to_use_them(
    tmp_path, capsys, monkeypatch
):
    from cryptography import x509

    from wwwproxy.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["ca", "--test-cert", "127.0.0.1", "--out", "certs"]) == 2  # no such directory
    assert "certs/127.0.0.1.cert.pem: No such file or directory" in capsys.readouterr().err
    (tmp_path / "certs").mkdir()
    assert main(["ca", "--test-cert", "127.0.0.1", "--out", "certs"]) == 0
    out = capsys.readouterr().out
    cert, key = tmp_path / "certs" / "127.0.0.1.cert.pem", tmp_path / "certs" / "127.0.0.1.key.pem"
    assert x509.load_pem_x509_certificate(cert.read_bytes()).subject.rfc4514_string() == (
        "O=wwwproxy test server,CN=127.0.0.1"
    )
    assert key.stat().st_mode & 0o777 == 0o600
    assert f"upstream_ca: {cert}" in out and "python3 -c" in out
    assert not (tmp_path / "cache").exists()  # the proxy's own CA is not touched
    # never over an existing file (a running test server may use it)
    before = cert.read_bytes()
    assert main(["ca", "--test-cert", "127.0.0.1", "--out", "certs"]) == 2
    assert "remove it first" in capsys.readouterr().err
    assert cert.read_bytes() == before
    assert main(["ca", "--test-cert", "no host"]) == 2


#: what only ``wwwproxy serve`` needs: the proxy's server and pages, and ``cryptography`` for
#: its HTTPS certificates (about 0.2 s of imports before a crawl's first fetch)
SERVE_ONLY = ("wwwproxy.app", "wwwproxy.commands", "wwwproxy.proxy.server", "cryptography")


def test_fetch_starts_without_what_only_serve_needs(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on: the fetch is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    program = (
        "import sys\n"
        "from wwwproxy.cli import main\n"
        f"code = main(['fetch', '--cache', {str(tmp_path / 'cache')!r}, "
        f"'http://127.0.0.1:{port}/'])\n"
        f"print(code, sorted(m for m in sys.modules if m.startswith({SERVE_ONLY!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert b"refused" in result.stderr  # it did try to fetch, through the whole engine
    assert result.stdout.decode().split(" ", 1) == ["1", "[]\n"]
