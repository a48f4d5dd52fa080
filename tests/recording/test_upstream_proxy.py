"""The upstream proxy's pure parts, by tables: its URL, the no_proxy variable, which requests
go through it, where the settings come from (config, environment, never ourselves), and the
CONNECT it is sent for a tunnel."""

from __future__ import annotations

import base64
import logging

import pytest

from wwwproxy.config import Config
from wwwproxy.proxy.tunnel import connect_request, parse_connect_reply
from wwwproxy.recording.upstream import (
    DIRECT,
    ProxySettings,
    UpstreamProxy,
    no_proxy_patterns,
    proxy_arguments,
    proxy_settings,
)
from wwwproxy.url import canonicalize
from wwwproxy.url.proxy import shown_proxy


def basic(credentials: bytes) -> str:
    return "Basic " + base64.b64encode(credentials).decode()


@pytest.mark.parametrize(
    ("text", "host", "port", "authorization"),
    [
        ("http://proxy.example:3128", "proxy.example", 3128, None),
        ("http://proxy.example:3128/", "proxy.example", 3128, None),
        ("proxy.example:3128", "proxy.example", 3128, None),  # as http_proxy is often set
        ("http://PROXY.Example", "proxy.example", 80, None),
        ("http://10.0.0.1:8080", "10.0.0.1", 8080, None),
        ("http://[::1]:8080", "[::1]", 8080, None),
        ("http://user:pw@proxy.example:3128", "proxy.example", 3128, basic(b"user:pw")),
        ("http://us%40er:p%3Aw@proxy:1", "proxy", 1, basic(b"us@er:p:w")),
        ("http://user@proxy:1", "proxy", 1, basic(b"user:")),
    ],
)
def test_proxy_url(text: str, host: str, port: int, authorization: str | None) -> None:
    proxy = UpstreamProxy.parse(text)
    assert (proxy.host, proxy.port, proxy.authorization) == (host, port, authorization)
    assert proxy.address == f"{host}:{port}"
    assert "pw" not in repr(proxy)  # credentials never in a log line made of it


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("https://proxy:3128", "https:// proxy is not supported"),
        ("socks5://proxy:1080", "socks5:// proxy is not supported"),
        ("http://proxy:3128/path", "without a path"),
        ("http://proxy:3128/?a=b", "without a path"),
        ("http://proxy:99999", "port"),
        ("http://", "host"),
    ],
)
def test_bad_proxy_url(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        UpstreamProxy.parse(text)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:secret@proxy:3128", "http://***@proxy:3128"),
        ("http://proxy:3128", "http://proxy:3128"),
        ("direct", "direct"),
        ("ftp://x", "(invalid)"),
    ],
)
def test_shown_proxy_masks_credentials(text: str, shown: str) -> None:
    assert shown_proxy(text) == shown


@pytest.mark.parametrize(
    ("value", "patterns", "skipped"),
    [
        ("", (), ()),
        ("*", ("*",), ()),
        ("example.com", ("example.com", "*.example.com"), ()),
        (".example.com", ("example.com", "*.example.com"), ()),
        (" a.org , b.org:8080 ", ("a.org", "*.a.org", "b.org", "*.b.org"), ()),
        ("localhost,127.0.0.1,[::1]", ("localhost", "*.localhost", "127.0.0.1", "[::1]"), ()),
        ("10.0.0.0/8,ok.example", ("ok.example", "*.ok.example"), ("10.0.0.0/8",)),
        ("*.wild.example", (), ("*.wild.example",)),
    ],
)
def test_no_proxy_variable(value: str, patterns: tuple, skipped: tuple) -> None:
    assert no_proxy_patterns(value) == (patterns, skipped)


HTTP = UpstreamProxy("http-proxy", 3128)
HTTPS = UpstreamProxy("https-proxy", 3129)


@pytest.mark.parametrize(
    ("proto", "host", "expected"),
    [
        ("http", "example.org", HTTP),
        ("https", "example.org", HTTPS),
        ("ftp", "example.org", None),
        ("http", "intranet.example", None),  # no_proxy: exactly that host
        ("https", "www.local.example", None),  # no_proxy: *.local.example
        ("http", "local.example", HTTP),  # ... but not local.example itself
        ("http", "127.0.0.1", None),
        ("http", "127.0.0.2", HTTP),
    ],
)
def test_which_requests_go_through_it(proto: str, host: str, expected) -> None:
    settings = ProxySettings(
        HTTP, HTTPS, ("intranet.example", "*.local.example", "127.0.0.1"), "upstream_proxy"
    )
    assert settings.for_host(proto, host) == expected
    assert settings.for_url(canonicalize(f"{proto}://{host}/")) == expected


def test_direct_never_proxies() -> None:
    assert DIRECT.for_host("http", "example.org") is None
    assert DIRECT.for_host("https", "example.org") is None


ENV = {"http": "http://env-proxy:8000", "https": "http://envs-proxy:8001", "no": "skip.example"}


@pytest.mark.parametrize(
    ("config", "environ", "http", "https", "no_proxy", "source"),
    [
        (Config(), {}, None, None, (), "none"),
        (
            Config(),
            ENV,
            "env-proxy:8000",
            "envs-proxy:8001",
            ("skip.example", "*.skip.example"),
            "environment",
        ),
        (Config(), {"https": "envs-proxy:8001"}, None, "envs-proxy:8001", (), "environment"),
        (
            Config(upstream_proxy="http://cfg:1"),
            ENV,
            "cfg:1",
            "cfg:1",
            ("skip.example", "*.skip.example"),  # no_proxy unset: the variable's
            "upstream_proxy",
        ),
        (
            Config(upstream_proxy="http://cfg:1", no_proxy=()),
            ENV,
            "cfg:1",
            "cfg:1",
            (),
            "upstream_proxy",
        ),
        (
            Config(no_proxy=("a.example",)),
            ENV,
            "env-proxy:8000",
            "envs-proxy:8001",
            ("a.example",),
            "environment",
        ),
        (Config(upstream_proxy="direct"), ENV, None, None, (), "none"),
        (Config(), {"http": "socks5://s:1"}, None, None, (), "none"),  # not usable: ignored
    ],
)
def test_settings_from_config_or_environment(config, environ, http, https, no_proxy, source):
    settings = proxy_settings(config, environ)
    assert (settings.http.address if settings.http else None) == http
    assert (settings.https.address if settings.https else None) == https
    assert settings.no_proxy == no_proxy
    assert settings.source == source


def test_a_proxy_that_is_ourselves_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    """``export http_proxy=http://127.0.0.1:8080`` for the tools, then ``wwwproxy serve`` in
    the same shell: forwarding to that would loop."""

    def own(url) -> bool:  # noqa: ANN001
        return url.hostport == "127.0.0.1:8080"

    caplog.set_level(logging.WARNING, "wwwproxy.recording")
    environ = {"http": "http://127.0.0.1:8080", "https": "http://127.0.0.1:8080"}
    assert proxy_settings(Config(), environ, own) == DIRECT
    assert "is this proxy itself" in caplog.text
    mixed = proxy_settings(Config(), {**environ, "https": "http://corp:3128"}, own)
    assert mixed.http is None and mixed.https is not None and mixed.https.address == "corp:3128"
    assert proxy_settings(Config(upstream_proxy="http://127.0.0.1:8080"), {}, own) == DIRECT


def test_config_repr_never_shows_the_proxy_password() -> None:
    assert "s3cret" not in repr(Config(upstream_proxy="http://u:s3cret@p:1"))


def test_credentials_go_to_the_proxy_only() -> None:
    proxy = UpstreamProxy("p", 1, basic(b"u:pw"))
    plain, via = proxy_arguments(proxy, False, [("Accept", "*/*")])
    assert plain == [("Accept", "*/*"), ("Proxy-Authorization", basic(b"u:pw"))]
    assert str(via["proxy"]) == "http://p:1" and "proxy_headers" not in via
    # https: on the CONNECT only, never on the request inside the tunnel
    inside, via = proxy_arguments(proxy, True, [("Accept", "*/*")])
    assert inside == [("Accept", "*/*")]
    assert via["proxy_headers"] == {"Proxy-Authorization": basic(b"u:pw")}
    assert proxy_arguments(None, False, [("A", "b")]) == ([("A", "b")], {})


@pytest.mark.parametrize(
    ("host", "port", "authorization", "wire"),
    [
        (
            "example.com",
            443,
            None,
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        ),
        ("::1", 8443, None, b"CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n"),
        (
            "example.com",
            443,
            "Basic dTpw",
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
            b"Proxy-Authorization: Basic dTpw\r\n\r\n",
        ),
    ],
)
def test_connect_request(host: str, port: int, authorization, wire: bytes) -> None:
    assert connect_request(host, port, UpstreamProxy("p", 1, authorization)) == wire


@pytest.mark.parametrize(
    ("head", "answer"),
    [
        (b"HTTP/1.1 200 Connection established\r\n\r\n", (200, "Connection established")),
        (b"HTTP/1.0 200\r\n\r\n", (200, "")),
        (
            b"HTTP/1.1 407 Proxy Authentication Required\r\nX: y\r\n\r\n",
            (407, "Proxy Authentication Required"),
        ),
        (b"HTTP/1.1 502 Bad Gateway\r\n\r\n", (502, "Bad Gateway")),
    ],
)
def test_connect_reply(head: bytes, answer: tuple[int, str]) -> None:
    assert parse_connect_reply(head) == answer


@pytest.mark.parametrize("head", [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/2 200\r\n\r\n", b"\r\n\r\n"])
def test_connect_reply_not_http(head: bytes) -> None:
    with pytest.raises(ValueError, match="did not answer in HTTP"):
        parse_connect_reply(head)
