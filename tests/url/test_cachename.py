"""Cache file names: WWWOFFLE's MakeHash of the archive key under <proto>/<host[:port]>/."""

from __future__ import annotations

import base64
import hashlib

from wwwproxy.url import cache_name, canonicalize, url_hash


def test_spec_example() -> None:
    url = canonicalize("HTTP://WWW.Example.COM:80/#x")
    assert url.canonical == "http://www.example.com/"
    assert hashlib.md5(url.file.encode()).hexdigest() == "f1777111f5d0f1c81ffa04de751128fa"
    assert cache_name(url) == "http/www.example.com/8XdxEfXQ8cgf+gTedREo+g"


def test_hash_is_22_chars_without_slash_or_padding() -> None:
    for key in ("http://a/", "http://b/x?y", "https://[::1]:8443/ü"):
        h = url_hash(key)
        assert len(h) == 22
        assert "/" not in h and "=" not in h
        raw = base64.b64decode(h.replace("-", "/") + "==")
        assert raw == hashlib.md5(key.encode()).digest()


def test_userinfo_is_part_of_the_key() -> None:
    plain = canonicalize("http://example.com/a")
    with_user = canonicalize("http://me:pw@example.com/a")
    assert plain.canonical == with_user.canonical
    assert cache_name(plain) != cache_name(with_user)
    assert cache_name(with_user) == f"http/example.com/{url_hash('http://me:pw@example.com/a')}"


def test_folder_is_proto_and_hostport() -> None:
    assert cache_name(canonicalize("https://Example.com:8443/x")).startswith(
        "https/example.com:8443/"
    )
    assert cache_name(canonicalize("http://[0::1]:81/")).startswith("http/[::1]:81/")


def test_explicit_key_for_non_get() -> None:
    url = canonicalize("http://example.org/chat")
    key = url.file + "?__wb_method=POST&__wb_post_data=aGVsbG8="
    assert cache_name(url, key) == f"http/example.org/{url_hash(key)}"
    assert cache_name(url, key) != cache_name(url)
