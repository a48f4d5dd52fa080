"""Configuration: defaults, validation with file:line:key errors, the shipped file."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

from wwwproxy.config import (
    Config,
    ConfigError,
    config_candidates,
    default_cache,
    load_config,
    parse_config,
    parse_hostport,
)

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_config_loads_and_is_safe() -> None:
    config = load_config(ROOT / "conf" / "wwwproxy.yaml")
    assert config.listen_host == "127.0.0.1"
    assert config.listen_port == 8080
    assert config.mode == "online"
    assert ipaddress.ip_address("10.0.0.1") not in config.allowed_clients[0]


def test_defaults_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a checkout and without a user configuration: the defaults, the cache in the
    user's cache directory (not in whatever directory the command was started in)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))
    config = load_config()
    assert config == Config(cache=tmp_path / "cache-home" / "wwwproxy")
    assert config.listen == "127.0.0.1:8080"


@pytest.mark.parametrize(
    ("environ", "config_file", "cache_outside"),
    [
        ({"HOME": "/home/u"}, "/home/u/.config/wwwproxy/wwwproxy.yaml", "/home/u/.cache/wwwproxy"),
        (
            {"HOME": "/home/u", "XDG_CONFIG_HOME": "/etc/x", "XDG_CACHE_HOME": "/var/c"},
            "/etc/x/wwwproxy/wwwproxy.yaml",
            "/var/c/wwwproxy",
        ),
        # the XDG rule: a relative (or empty) value is ignored
        (
            {"HOME": "/home/u", "XDG_CONFIG_HOME": "rel", "XDG_CACHE_HOME": ""},
            "/home/u/.config/wwwproxy/wwwproxy.yaml",
            "/home/u/.cache/wwwproxy",
        ),
    ],
)
def test_where_the_configuration_and_cache_are_looked_for(
    environ: dict[str, str], config_file: str, cache_outside: str
) -> None:
    assert config_candidates(environ) == [Path("conf/wwwproxy.yaml"), Path(config_file)]
    assert default_cache(False, environ) == Path(cache_outside)
    assert default_cache(True, environ) == Path("cache")


def test_the_checkout_configuration_comes_first_then_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))
    user = tmp_path / "config" / "wwwproxy" / "wwwproxy.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("mode: offline\n")
    config = load_config()
    # the user's file, and a cache it does not name in the user's cache directory
    assert (config.source, config.mode) == (str(user), "offline")
    assert config.cache == tmp_path / "cache-home" / "wwwproxy"
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "wwwproxy.yaml").write_text("mode: autodial\n")
    config = load_config()
    # a checkout: its file, its ./cache
    assert (config.source, config.mode, config.cache) == (
        "conf/wwwproxy.yaml",
        "autodial",
        Path("cache"),
    )
    user.write_text("cache: /srv/mine\n")
    assert load_config(user).cache == Path("/srv/mine")  # a named cache wins anywhere


def test_the_shipped_file_copied_for_a_user_keeps_the_cache_in_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped file names no cache: ./cache in the checkout, and the user's cache
    directory when copied to ~/.config (not ./cache wherever serve is started)."""
    monkeypatch.chdir(ROOT)
    assert load_config().cache == Path("cache")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))
    user = tmp_path / "config" / "wwwproxy" / "wwwproxy.yaml"
    user.parent.mkdir(parents=True)
    user.write_text((ROOT / "conf" / "wwwproxy.yaml").read_text())
    assert load_config().cache == tmp_path / "cache-home" / "wwwproxy"


def test_every_key_parses() -> None:
    config = parse_config(
        """
listen: "[::1]:3128"
cache: /var/cache/wwwproxy
mode: autodial
names: [Proxy.LAN]
allowed_clients: [127.0.0.0/8, 192.168.1.0/24]
connect_ports: [443, 8443]
password: secret
connect_timeout: 5
read_timeout: 30.5
finish_on_disconnect: false
freshness:
  - pattern: '\\.css$'
    max_age: 3600
urldb: /srv/urldb
"""
    )
    assert (config.listen_host, config.listen_port) == ("::1", 3128)
    assert config.listen == "[::1]:3128"
    assert config.cache == Path("/var/cache/wwwproxy")
    assert config.names == ("proxy.lan",)
    assert config.connect_ports == (443, 8443)
    assert config.read_timeout == 30.5
    assert config.finish_on_disconnect is False
    assert config.freshness[0].max_age == 3600
    assert config.freshness[0].regex.search("http://h/a.css")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mode: sleepy\n", "x.yaml:1: key 'mode': expected one of online, offline, autodial"),
        ("listen: 'h:99999'\n", "x.yaml:1: key 'listen'"),
        ("a: 1\nlistne: x\n", "x.yaml:2: unknown key 'listne'"),
        ("connect_ports: [443, 0]\n", "x.yaml:1: key 'connect_ports'"),
        ("allowed_clients: [300.1.1.1/8]\n", "bad network"),
        ("read_timeout: -1\n", "positive number of seconds"),
        ("finish_on_disconnect: maybe\n", "expected true or false"),
        (
            "freshness:\n  - pattern: '('\n    max_age: 1\n",
            "x.yaml:2: key 'freshness': bad pattern",
        ),
        ("freshness:\n  - max_age: 1\n", "exactly 'pattern' and 'max_age'"),
        ("listen: [\n", "x.yaml: not valid YAML: "),
        ("- a\n- b\n", "must be a mapping"),
    ],
)
def test_bad_config_is_refused_with_place(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "x.yaml")
    assert message in str(info.value)


def test_all_problems_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("mode: x\nport: 1\nread_timeout: no\n", "c.yaml")
    lines = str(info.value).splitlines()
    assert [line.split(":")[1] for line in lines] == ["1", "2", "3"]


def test_missing_named_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"mode: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        (":3128", ("127.0.0.1", 3128)),
        ("localhost", ("localhost", 8080)),
        ("[::1]:81", ("::1", 81)),
        ("::1", ("::1", 8080)),
    ],
)
def test_parse_hostport(text: str, expected: tuple[str, int]) -> None:
    assert parse_hostport(text) == expected


@pytest.mark.parametrize("text", ["h:0", "h:x", "[::1", "[::1]x", "h:１"])
def test_parse_hostport_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_hostport(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_size: 2 GiB\n", 2 * 2**30),
        ("max_size: 500MB\n", 500 * 10**6),
        ("max_size: 1.5G\n", 3 * 2**29),
        ("max_size: 4096\n", 4096),
        ("max_size: 0\n", 0),
        ("max_size: ''\n", 0),
        ("max_size:\n", 0),
    ],
)
def test_max_size_takes_units(text: str, expected: int) -> None:
    assert parse_config(text).max_size == expected


def test_purge_keys() -> None:
    assert (Config().max_size, Config().keep_captures, Config().purge_after_days) == (0, 5, ())
    config = parse_config(
        "keep_captures: 0\npurge_after_days:\n  - pattern: '\\.jpg$'\n    days: 30\n"
        "  - pattern: .\n    days: 0.5\n"
    )
    assert config.keep_captures == 0
    assert [(r.pattern, r.days) for r in config.purge_after_days] == [("\\.jpg$", 30), (".", 0.5)]
    assert config.purge_after_days[0].regex.search("http://h/a.jpg")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_size: lots\n", "x.yaml:1: key 'max_size': expected a size such as 2 GiB"),
        ("max_size: -1\n", "x.yaml:1: key 'max_size': expected a size"),
        ("\nkeep_captures: -2\n", "x.yaml:2: key 'keep_captures': expected a whole number"),
        ("keep_captures: 1.5\n", "x.yaml:1: key 'keep_captures'"),
        ("purge_after_days:\n  - pattern: '('\n    days: 1\n", "x.yaml:2: key 'purge_after_days'"),
        ("purge_after_days:\n  - pattern: x\n    days: 0\n", "days must be a number of days > 0"),
        ("purge_after_days:\n  - pattern: x\n", "exactly 'pattern' and 'days'"),
        ("purge_after_days: 30\n", "x.yaml:1: key 'purge_after_days': expected a list"),
    ],
)
def test_bad_purge_keys_are_refused_with_place(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_config(text, "x.yaml")


def test_errors_are_one_line_each_with_one_place() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("freshness:\n  - pattern: '('\n    max_age: 1\n", "x.yaml")
    assert str(info.value).count("x.yaml") == 1
    with pytest.raises(ConfigError) as info:
        parse_config("a: 1\nlisten: [\n", "y.yaml")
    message = str(info.value)
    assert "\n" not in message and "(line 3, column 1)" in message, message


def test_header_policy_and_abort_limit_keys() -> None:
    config = parse_config(
        """
censor_request_headers:
  User-Agent: "Mozilla/5.0 (X11; Linux x86_64)"
  Referer: ""
  From:
record_credentials: true
replay_set_cookie: true
finish_on_disconnect_max_kb: 1024
finish_on_disconnect_percent: 80
"""
    )
    assert config.censor_request_headers == (
        ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64)"),
        ("Referer", ""),
        ("From", ""),
    )
    assert config.record_credentials is True and config.replay_set_cookie is True
    assert (config.finish_on_disconnect_max_kb, config.finish_on_disconnect_percent) == (1024, 80)
    defaults = Config()
    assert defaults.censor_request_headers == ()
    assert defaults.record_credentials is False and defaults.replay_set_cookie is False
    assert defaults.finish_on_disconnect_max_kb is None
    assert defaults.finish_on_disconnect_percent is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("censor_request_headers: [User-Agent]\n", "x.yaml:1: key 'censor_request_headers'"),
        ("censor_request_headers:\n  'Bad Name': x\n", "is not a header name"),
        ("censor_request_headers:\n  Host: x\n", "frames the request"),
        ('censor_request_headers:\n  X-A: "a\\nb"\n', "control character"),
        ("record_credentials: yes please\n", "x.yaml:1: key 'record_credentials'"),
        ("replay_set_cookie: 1\n", "expected true or false"),
        ("finish_on_disconnect_max_kb: -1\n", "x.yaml:1: key 'finish_on_disconnect_max_kb'"),
        ("finish_on_disconnect_percent: 101\n", "percentage from 0 to 100"),
        ("finish_on_disconnect_percent: 50.5\n", "percentage from 0 to 100"),
    ],
)
def test_bad_header_policy_and_abort_limits_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "x.yaml")
    assert message in str(info.value)


def test_modify_html_rules() -> None:
    config = parse_config(
        "modify_html:\n"
        "  - pattern: '^http://news\\.example/'\n"
        "    disable_scripts: true\n"
        "    disable_meta_refresh: true\n"
        "    disable_popups: true\n"
        "  - pattern: '/private/'\n"
        "    mark_links: false\n"
        "  - pattern: '.*'\n",
        "x.yaml",
    )
    news, private, every = config.modify_html
    assert news.regex.search("http://news.example/a.html")
    assert (news.mark_links, news.disable_scripts, news.disable_meta_refresh) == (True, True, True)
    assert news.disable_popups is True
    assert private.mark_links is False and private.disable_scripts is False
    assert every.mark_links is True and every.disable_popups is False  # the defaults
    assert Config().modify_html == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("modify_html: yes\n", "x.yaml: key 'modify_html': expected a list"),
        ("modify_html:\n  - '.*'\n", "x.yaml:2: key 'modify_html': each rule is a mapping"),
        ("modify_html:\n  - mark_links: true\n", "with a 'pattern'"),
        ("modify_html:\n  - pattern: '['\n", "x.yaml:2: key 'modify_html': bad pattern '['"),
        (
            "modify_html:\n  - pattern: x\n  - pattern: y\n    disable_script: true\n",
            "x.yaml:3: key 'modify_html': unknown disable_script (known: pattern, mark_links,",
        ),
        (
            "modify_html:\n  - pattern: x\n    disable_popups: 1\n",
            "x.yaml:2: key 'modify_html': disable_popups: expected true or false, got 1",
        ),
    ],
)
def test_bad_modify_html_rules_are_refused_with_place(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "x.yaml")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("upstream_proxy: https://p:1\n", "1: key 'upstream_proxy': a https:// proxy"),
        ("upstream_proxy: http://p:1/x\n", "1: key 'upstream_proxy': a proxy URL is"),
        ("upstream_proxy: [a]\n", "1: key 'upstream_proxy': expected a string"),
        ("\nno_proxy: [bad/pattern]\n", "2: key 'no_proxy': bad host pattern"),
    ],
)
def test_bad_upstream_proxy_is_refused_with_place(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(text, "x.yaml")


def test_upstream_proxy_keys() -> None:
    config = parse_config(
        "upstream_proxy: http://u:p@proxy:3128\nno_proxy: ['*.lan', '10.1.2.3']\n"
    )
    assert config.upstream_proxy == "http://u:p@proxy:3128"
    assert config.no_proxy == ("*.lan", "10.1.2.3")
    assert parse_config("upstream_proxy: direct\n").upstream_proxy == "direct"
    assert parse_config("upstream_proxy:\n").upstream_proxy is None
    assert parse_config("").no_proxy is None


def test_filter_keys(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("0.0.0.0 ads.example\n")
    adblock = tmp_path / "adblock.txt"
    adblock.write_text("||tracker.example^\n")
    config = parse_config(
        f"""
dont_get: ['*.doubleclick.net', 'example.com/ads/*', '*/track.gif']
dont_get_status: 204
blocklist: [{hosts}, {adblock}]
dont_cache: ['https://bank.example']
dont_queue: ['*/*.iso']
local_net: ['*.lan', '192.168.1.1:8080']
"""
    )
    assert config.dont_get == ("*.doubleclick.net", "example.com/ads/*", "*/track.gif")
    assert config.dont_get_status == 204
    assert config.blocklist == (hosts, adblock)
    assert (config.dont_cache, config.dont_queue) == (("https://bank.example",), ("*/*.iso",))
    assert config.local_net == ("*.lan", "192.168.1.1:8080")
    assert parse_config(f"blocklist: {hosts}\n").blocklist == (hosts,)  # one file
    assert Config().dont_get_status == 200 and Config().blocklist == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("dont_get: ['ads*.example.com']\n", "1: key 'dont_get': bad pattern 'ads*.example.com'"),
        ("\ndont_cache: ['ftp://x']\n", "2: key 'dont_cache': bad pattern 'ftp://x'"),
        ("dont_queue: 'x.example'\n", "1: key 'dont_queue': expected a list"),
        ("local_net: ['a.lan:99999']\n", "1: key 'local_net': bad pattern"),
        ("dont_get_status: 304\n", "1: key 'dont_get_status': 304"),
        ("dont_get_status: 99\n", "1: key 'dont_get_status': expected an HTTP status"),
        ("blocklist: /no/such/list.txt\n", "1: key 'blocklist': '/no/such/list.txt' is not"),
        ("blocklist: [1]\n", "1: key 'blocklist': expected a string"),
    ],
)
def test_bad_filter_keys_are_refused_with_place(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_config(text, "x.yaml")


def test_allowed_clients_take_names_addresses_and_ranges() -> None:
    config = parse_config("allowed_clients: [localhost, 10.0.0.5, '::1', 192.168.0.0/16]\n")
    nets = config.allowed_clients
    assert ipaddress.ip_address("127.0.0.1") in nets[0]  # localhost, resolved at load
    assert ipaddress.ip_network("10.0.0.5/32") in nets
    assert ipaddress.ip_network("::1/128") in nets
    assert ipaddress.ip_network("192.168.0.0/16") in nets
    assert ipaddress.ip_address("10.0.0.6") not in ipaddress.ip_network("10.0.0.5/32")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # a label over 63 bytes: refused without asking any name server
        (f"allowed_clients: [{'a' * 64}.example]\n", "does not resolve"),
        ("allowed_clients: [10.0.0.0/33]\n", "bad network '10.0.0.0/33'"),
        ("allowed_clients: ['not a host']\n", "bad network 'not a host'"),
    ],
)
def test_bad_allowed_clients_are_refused_with_place(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape("x.yaml:1: key 'allowed_clients': ")):
        parse_config(text, "x.yaml")
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_config(text, "x.yaml")
