"""Property tests: idempotence, totality, equivalent spellings, safe cache file names."""

from __future__ import annotations

import dataclasses
import random
import re

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wwwproxy.url import InvalidURL, cache_name, canonicalize, surt

SETTINGS = settings()  # tests/conftest.py's profile sets the number of examples

# Characters that steer the parser, plus ordinary ones, so generated strings hit every rule.
TRICKY = list(":/?#@%&=;+.[]~ _-!$()*,'\"<>\\|^`{}\t\x00\x7f") + ["%2F", "%2e", "%25", "&amp;"]
ALNUM = list("aAzZ09xX")
UNICODE = ["é", "ü", "ß", "Ｅ", "。", "☃", "\u0301", "\ud800"]


def piece() -> st.SearchStrategy[str]:
    return st.sampled_from(TRICKY + ALNUM + UNICODE + ["%41", "%c3%a9", "%zz", "..", "."])


schemes = st.sampled_from(["http://", "HTTPS://", "ftp://", "http:/", "", "x+y://", "/", "//"])
userinfos = st.sampled_from(["", "u@", "u:p@", ":@", "a@b@", "%40:%3A@", "ü:é@"])
hosts = st.one_of(
    st.sampled_from(
        [
            "example.com",
            "WWW.Example.COM",
            "bücher.example",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "[::1]",
            "[0:0::1]",
            "[::ffff:192.168.1.1]",
            "ex_ample.com.",
            "xn--bcher-kva.example",
            "",
        ]
    ),
    st.lists(st.sampled_from(list("abc.-_19") + ["%41"]), min_size=1, max_size=12).map("".join),
)
ports = st.sampled_from(["", ":", ":80", ":080", ":8080", ":443", ":65535", ":0", ":x"])
paths = st.lists(piece(), max_size=12).map(lambda parts: "/" + "".join(parts))
queries = st.one_of(st.just(""), st.lists(piece(), max_size=10).map(lambda p: "?" + "".join(p)))
fragments = st.sampled_from(["", "#", "#frag", "#a?b"])

url_like = st.builds(
    lambda s, u, h, p, path, q, f: s + u + h + p + path + q + f,
    schemes,
    userinfos,
    hosts,
    ports,
    paths,
    queries,
    fragments,
)

# URLs most of which are valid, fetchable and without userinfo (for the respelling test)
web_url_like = st.builds(
    lambda s, h, p, path, q: s + h + p + path + q,
    st.sampled_from(["http://", "https://", "HTTP://", ""]),
    st.sampled_from(["example.com", "Example.ORG", "127.1", "[::1]", "bücher.example", "a-b_c.d"]),
    st.sampled_from(["", ":8080", ":80"]),
    paths,
    queries,
)


def try_canon(text: str | bytes):
    try:
        return canonicalize(text)
    except InvalidURL:
        return None


@SETTINGS
@given(url_like)
def test_canonicalizing_a_canonical_url_changes_nothing(text: str) -> None:
    url = try_canon(text)
    assume(url is not None)
    again = canonicalize(url.canonical)
    assert again.canonical == url.canonical
    assert canonicalize(url.file).file == url.file
    assert dataclasses.replace(canonicalize(url.file), local=url.local) == url


@SETTINGS
@given(st.one_of(url_like, st.text(max_size=60), st.binary(max_size=60)))
def test_every_input_canonicalizes_or_raises_invalid_url(text: str | bytes) -> None:
    try:
        url = canonicalize(text)
    except InvalidURL as exc:
        assert exc.reason
        return
    assert url.canonical.isascii()
    assert url.canonical.isprintable()
    assert " " not in url.file and "#" not in url.file
    surt(url.file)  # every canonical key has a SURT


@SETTINGS
@given(st.one_of(url_like, st.text(max_size=60), st.binary(max_size=60)))
def test_cache_name_never_escapes_its_folders(text: str | bytes) -> None:
    url = try_canon(text)
    assume(url is not None)
    name = cache_name(url)
    parts = name.split("/")
    assert len(parts) == 3
    assert ".." not in name
    assert all(part not in ("", ".", "..") for part in parts)
    assert "\\" not in name and "\x00" not in name


def respell(text: str, rng: random.Random) -> str:
    """Write a canonical URL another way that the rules equate with it."""
    proto, rest = text.split("://", 1)
    slash = rest.find("/")
    authority, tail = rest[:slash], rest[slash:]
    path, q, args = tail.partition("?")
    out_path = []
    for ch in re.findall(r"%[0-9A-F]{2}|.", path):
        if ch.isalnum() and rng.random() < 0.3:
            out_path.append(f"%{ord(ch):02{'x' if rng.random() < 0.5 else 'X'}}")
        else:
            out_path.append(ch)
    new_path = "".join(out_path)
    if rng.random() < 0.5 and new_path.endswith("/"):
        new_path += "."  # '/a/.' is '/a/'
    if rng.random() < 0.5:
        new_path = "/x/.." + new_path
    out_args = []
    for ch in re.findall(r"%[0-9A-F]{2}|.", args):
        if ch == "+" and rng.random() < 0.5:
            out_args.append("%20" if rng.random() < 0.5 else " ")
        elif ch == "&" and rng.random() < 0.5:
            out_args.append("&amp;")
        elif ch.isalnum() and rng.random() < 0.3:
            out_args.append(f"%{ord(ch):02x}")
        else:
            out_args.append(ch)
    if out_args and out_args[-1] == " ":
        out_args[-1] = "%20"  # a trailing raw space would be stripped (rule 0)
    port = ""
    if ":" not in authority.rsplit("]", 1)[-1] and rng.random() < 0.5:
        port = {"http": ":80", "https": ":443"}.get(proto, "")
    frag = "#" + "frag" if rng.random() < 0.5 else ""
    return (
        f"  {proto.upper()}://{authority.upper()}{port}{new_path}"
        f"{q if args else ('?' if rng.random() < 0.3 else '')}{''.join(out_args)}{frag}\n"
    )


@SETTINGS
@given(web_url_like, st.integers(0, 2**32))
def test_equivalent_spellings_share_one_cache_file(text: str, seed: int) -> None:
    url = try_canon(text)
    assume(url is not None and url.user is None and not url.local)
    assume(url.proto in ("http", "https"))
    assume(not url.host.startswith("xn--") or url.host.isascii())
    variant = respell(url.canonical, random.Random(seed))
    other = canonicalize(variant)
    assert other.canonical == url.canonical, variant
    assert cache_name(other) == cache_name(url)
