"""The key declarations: the shipped ``conf/wwwproxy.yaml`` follows them, and what they say
about secrets and restarts is what the rest of the proxy does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from wwwproxy.config import Config, ConfigError, parse_config, settings
from wwwproxy.recording.services import _AT_START

SHIPPED = Path(__file__).resolve().parents[2] / "conf" / "wwwproxy.yaml"

#: a commented-out key, ``#  name: value`` (deeper lines are the items of an example above)
_COMMENTED_KEY = re.compile(r"#( {1,3})([a-z][a-z0-9_]*):(.*)")


def _example(line: str) -> bool:
    """Is an uncommented ``name: ...`` line a key with one YAML value (an example), or with
    none (a block follows), rather than prose (``max_size: what the cache files may take``)?"""
    try:
        value = YAML(typ="safe").load(line)
    except YAMLError:
        return False
    if not isinstance(value, dict) or len(value) != 1:
        return False
    (example,) = value.values()
    return not (isinstance(example, str) and " " in example.strip())


def keys_in_file(text: str) -> list[str]:
    """The keys a commented configuration file names, in order: the keys set, and the
    commented-out examples."""
    named = []
    for line in text.splitlines():
        if line[:1].isalpha():
            named.append(line.split(":", 1)[0])
            continue
        match = _COMMENTED_KEY.fullmatch(line)
        if match and _example(f"{match.group(2)}:{match.group(3)}"):
            named.append(match.group(2))
    return named


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("mode: online\n", ["mode"]),
        ("# upstream_proxy: http://u:p@proxy.lan:3128\n", ["upstream_proxy"]),
        ("#   censor_request_headers:\n#     Referer: ''\n", ["censor_request_headers"]),
        ("freshness: []\n#  - pattern: 'x'\n#    max_age: 86400\n", ["freshness"]),
        ("# max_size: what the cache files may take, e.g. 2 GiB\n", []),
        ("# rule: a pattern (regex searched in the canonical URL; the first\n", []),
        ("# dont_get: never fetched, answered at once: an empty image\n", []),
    ],
)
def test_keys_in_file_reads_set_and_commented_out_keys_not_prose(text, named):
    assert keys_in_file(text) == named


def test_the_shipped_file_parses_and_names_every_key_in_the_declared_order():
    text = SHIPPED.read_text(encoding="utf-8")
    parse_config(text, str(SHIPPED))
    named = keys_in_file(text)
    assert sorted(set(named) - set(settings())) == []  # commented-out ones too
    assert list(dict.fromkeys(named)) == list(settings())


def test_every_config_attribute_is_set_by_a_declared_key():
    declared = {field for key in settings().values() for field in key.fields}
    assert declared == set(Config.__dataclass_fields__) - {"source"}


def test_the_keys_needing_a_restart_are_those_a_reload_keeps():
    restart = {field for key in settings().values() if key.restart for field in key.fields}
    assert restart == set(_AT_START)


@pytest.mark.parametrize(
    ("key", "written", "hidden"),
    [
        ("password", "hunter2", True),
        ("password", None, True),
        ("upstream_proxy", "http://alice:s3cret@127.0.0.1:3128", True),
        ("upstream_proxy", "ftp://alice:s3cret@127.0.0.1:3128", True),  # refused, still hidden
        ("upstream_proxy", "http://127.0.0.1:3128", False),
        ("upstream_proxy", "direct", False),
        ("mode", "online", False),
    ],
)
def test_secret_values_are_never_sent_back(key, written, hidden):
    assert settings()[key].hides(written) is hidden


def test_values_shown_hold_no_secret():
    config = parse_config("password: hunter2\nupstream_proxy: http://alice:s3cret@h.lan:3128\n")
    shown = {name: key.shown(config) for name, key in settings().items()}
    assert shown["password"] == "(set)"
    assert shown["upstream_proxy"] == "http://***@h.lan:3128"
    assert "hunter2" not in str(shown) and "s3cret" not in str(shown)
    assert "hunter2" not in repr(config) and "s3cret" not in repr(config)


def test_listen_sets_host_and_port():
    assert settings()["listen"].value("[::1]:3128", "x.yaml") == {
        "listen_host": "::1",
        "listen_port": 3128,
    }


@pytest.mark.parametrize(
    ("text", "shared"),
    [
        ("", False),  # only this machine: a private cache
        ("allowed_clients: [127.0.0.1, '::1']\n", False),
        ("allowed_clients: [127.0.0.0/8, 192.168.1.0/24]\n", True),  # the household's too
        ("allowed_clients: [0.0.0.0/0]\n", True),
        ("shared_cache: true\n", True),
        ("shared_cache: false\nallowed_clients: [10.0.0.0/8]\n", False),
        ("shared_cache: auto\nallowed_clients: [10.0.0.0/8]\n", True),
    ],
)
def test_a_cache_is_shared_when_others_may_use_it(text, shared):
    assert parse_config(text).shared is shared


def test_shared_cache_takes_true_false_or_auto():
    with pytest.raises(ConfigError, match="expected true, false or auto"):
        parse_config("shared_cache: sometimes\n")


@pytest.mark.parametrize(
    ("text", "sync"),
    [
        ("", "write"),
        ("sync: write\n", "write"),
        ("sync: group\n", "group"),
        ("sync: flush\n", "flush"),
    ],
)
def test_sync_names_when_a_recorded_page_is_safe(text, sync):
    assert parse_config(text).sync == sync


def test_an_unknown_sync_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="write, group, flush"):
        parse_config("sync: fsync\n", "x.yaml")
