"""``/config/``: the configuration in force; an edit keeps the file's comments and order,
is validated before it is saved, and is reloaded at once."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import aiohttp
import pytest

from wwwproxy.commands.config import edit_config_text
from wwwproxy.config import (
    Config,
    ConfigError,
    effective,
    load_config,
    parse_config,
    setting,
    settings,
)
from wwwproxy.config.reference import reference
from wwwproxy.config.values import as_bool
from wwwproxy.http.policy import Mode

from .conftest import TIMEOUT, Client, start_proxy, stop_proxy

CONF = Path(__file__).resolve().parents[2] / "conf" / "wwwproxy.yaml"


def comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("#")]


@pytest.fixture
async def configured(tmp_path):
    path = tmp_path / "wwwproxy.yaml"
    shutil.copy(CONF, path)
    config = dataclasses.replace(load_config(path), listen_port=0, cache=tmp_path / "cache")
    running = await start_proxy(config)
    async with aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=TIMEOUT
    ) as session:
        yield running, Client(running.port, "direct", session), path
    await stop_proxy(running)


async def test_shows_the_configuration_in_force(configured):
    running, client, path = configured
    status, text, _ = await client.get("/config/")
    assert status == 200 and str(path) in text
    for key in settings():
        assert f'name="key" value="{key}"' in text
    status, data = await client.get_json("/config/")
    assert data["effective"]["read_timeout"] == 60.0
    assert data["effective"]["allowed_clients"] == ["127.0.0.0/8", "::1/128"]
    assert data["file"]["allowed_clients"] == "- 127.0.0.0/8\n- ::1/128\n"


async def test_edit_saves_keeping_comments_and_reloads(configured):
    running, client, path = configured
    before = path.read_text()
    status, text, _ = await client.post("/config/", {"key": "read_timeout", "value": "25"})
    assert status == 200 and "Saved read_timeout" in text
    after = path.read_text()
    assert comments(after) == comments(before)
    assert after == before.replace("read_timeout: 60", "read_timeout: 25")
    assert running.services.config.read_timeout == 25.0
    status, _, _ = await client.post(
        "/config/", {"key": "allowed_clients", "value": "- 127.0.0.0/8\n- 10.0.0.0/8\n"}
    )
    assert status == 200
    assert comments(path.read_text()) == comments(before)
    assert [str(n) for n in running.services.config.allowed_clients] == [
        "127.0.0.0/8",
        "10.0.0.0/8",
    ]


async def test_invalid_value_is_refused_and_nothing_saved(configured):
    running, client, path = configured
    before = path.read_text()
    status, text, _ = await client.post("/config/", {"key": "read_timeout", "value": "soon"})
    assert status == 400 and "read_timeout" in text and "positive number" in text
    assert 'aria-label="read_timeout">soon</textarea>' in text  # the entry is kept to fix
    status, data = await client.post_api("/config/", {"key": "mode", "value": "[unclosed"})
    assert status == 400 and "YAML" in data["error"]
    status, data = await client.post_api("/config/", {"key": "colour", "value": "red"})
    assert status == 400 and "unknown key" in data["error"]
    assert path.read_text() == before
    assert running.services.config.read_timeout == 60.0


async def test_an_edit_reloads_and_keeps_the_running_mode(configured):
    """Mode is state, not configuration: an edit reloads the file as SIGHUP does, and the
    proxy stays in the mode it was switched to, even when ``mode`` itself is edited."""
    running, client, path = configured
    running.services.state.mode = Mode.OFFLINE
    status, _ = await client.post_api("/config/", {"key": "connect_timeout", "value": "5"})
    assert status == 200 and running.services.config.connect_timeout == 5.0
    assert running.services.mode is Mode.OFFLINE
    status, data = await client.post_api("/config/", {"key": "mode", "value": "autodial"})
    assert status == 200 and "mode: autodial" in path.read_text()
    assert running.services.config.mode == "autodial"  # the mode to start in
    assert running.services.mode is Mode.OFFLINE and data["running_mode"] == "offline"
    assert "offline now" in data["message"] and "control page" in data["message"]
    assert data["effective"]["mode"] == "autodial"


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("request_changed", "0", 0),
        ("keep_good_copy", "false", False),
        ("fetch_on_online", "false", False),
    ],
)
async def test_the_cache_policy_keys_are_editable(configured, key, value, expected):
    running, client, path = configured
    _, text, _ = await client.get("/config/")
    assert f'name="key" value="{key}"' in text
    status, data = await client.post_api("/config/", {"key": key, "value": value})
    assert status == 200, data
    assert getattr(running.services.config, key) == expected
    assert data["effective"][key] == expected
    assert f"{key}: {value}" in path.read_text()
    status, data = await client.post_api("/config/", {"key": key, "value": "[1]"})
    assert status == 400 and key in data["error"]


@dataclasses.dataclass(frozen=True)
class WithExampleKey(Config):
    """The configuration with one key more, declared here as a new key is declared in
    wwwproxy.config.keys: the one place a key is written."""

    example_switch: bool = setting(
        False, as_bool, "an example switch added by this test (true/false)"
    )


async def test_a_new_key_is_one_declaration_and_the_rest_follows(tmp_path):
    assert list(settings(WithExampleKey)) == [*settings(), "example_switch"]
    # parsed and validated, its problems named with file, line and key
    config = parse_config("mode: online\nexample_switch: true\n", "x.yaml", WithExampleKey)
    assert isinstance(config, WithExampleKey) and config.example_switch is True
    assert WithExampleKey().example_switch is False
    with pytest.raises(
        ConfigError, match="^x.yaml:2: key 'example_switch': expected true or false"
    ):
        parse_config("mode: online\nexample_switch: maybe\n", "x.yaml", WithExampleKey)
    assert effective(config)["example_switch"] is True
    # the reference
    assert (
        "\n## `example_switch`\n\nAn example switch added by this test (true/false).\n\n"
        "- default: `false`\n- takes effect: at a reload\n"
    ) in reference(WithExampleKey)
    # the /config/ page of a proxy running with it: shown with what it does, and editable
    path = tmp_path / "wwwproxy.yaml"
    path.write_text("mode: online\nexample_switch: false\n")
    config = parse_config(path.read_text(), str(path), WithExampleKey)
    running = await start_proxy(
        dataclasses.replace(config, listen_port=0, cache=tmp_path / "cache")
    )
    try:
        async with aiohttp.ClientSession(
            cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=TIMEOUT
        ) as session:
            client = Client(running.port, "direct", session)
            _, text, _ = await client.get("/config/")
            row = text.split("<tr><td><b>example_switch</b>", 1)[1].split("</tr>", 1)[0]
            assert "an example switch added by this test (true/false)</div>" in row
            assert "<td><code>false</code></td>" in row
            assert 'name="key" value="example_switch"' in row
            listen = text.split("<tr><td><b>listen</b>", 1)[1].split("</tr>", 1)[0]
            assert "(takes effect at the next start)" in listen  # a restart note, derived
            status, data = await client.post_api(
                "/config/", {"key": "example_switch", "value": "true"}
            )
            assert status == 200 and data["effective"]["example_switch"] is True, data
            assert data["message"].endswith("and reloaded the configuration.")
            assert running.services.config.example_switch is True
            assert path.read_text() == "mode: online\nexample_switch: true\n"
    finally:
        await stop_proxy(running)


def test_every_configuration_key_is_shown_and_editable():
    names = {f.name for f in dataclasses.fields(Config)} - {"listen_host", "listen_port", "source"}
    assert set(settings()) == names | {"listen"}
    assert set(effective(Config())) == set(settings())


async def test_password_is_never_shown(configured):
    running, client, path = configured
    status, data = await client.post_api("/config/", {"key": "password", "value": "hunter2"})
    assert status == 200 and running.services.config.password == "hunter2"
    async with client.session.get(client.url("/config/")) as resp:
        text = await resp.text()
    assert "hunter2" not in text and "(set)" in text
    status, data = await client.get_json("/config/")
    assert "hunter2" not in str(data)
    # from now on the password is needed
    status, _ = await client.post_api("/config/", {"key": "password", "value": ""})
    assert status == 401


@pytest.mark.parametrize(
    "value",
    [
        "http://alice:s3cr3t-word@127.0.0.1:3128/a/path",  # refused: a path
        "ftp://alice:s3cr3t-word@127.0.0.1:3128",  # refused: not http
        "http://alice:s3cr3t-word@",  # refused: no host
    ],
)
async def test_a_refused_proxy_url_is_not_sent_back_with_its_password(configured, value):
    running, client, path = configured
    before = path.read_text()
    status, text, _ = await client.post("/config/", {"key": "upstream_proxy", "value": value})
    assert status == 400 and "s3cr3t" not in text and "upstream_proxy" in text
    assert path.read_text() == before and running.services.config.upstream_proxy is None
    status, data = await client.post_api("/config/", {"key": "upstream_proxy", "value": value})
    assert status == 400 and "s3cr3t" not in str(data)


async def test_without_a_file_nothing_is_editable(client):
    status, text, _ = await client.get("/config/")
    assert status == 200 and "cannot be edited" in text
    status, data = await client.post_api("/config/", {"key": "mode", "value": "offline"})
    assert status == 409


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("allowed_clients", "[127.0.0.0/8]"),
        ("connect_ports", "- 443\n- 8443\n"),
        ("names", "- proxy.lan\n- cache.lan\n"),
        ("freshness", "- pattern: '\\.css$'\n  max_age: 60\n"),
        ("password", ""),
        ("urldb", "other"),
        ("request_changed", "0"),
        ("keep_good_copy", "false"),
        ("fetch_on_online", "false"),
        ("https_intercept", "- '*.example.com'\n"),
    ],
)
def test_every_kind_of_edit_keeps_all_comments(key, value):
    text = CONF.read_text()
    new_text, config = edit_config_text(text, key, value, "f.yaml")
    assert comments(new_text) == comments(text)
    assert parse_config(new_text, "f.yaml") == config
    order = [line.split(":")[0] for line in new_text.splitlines() if line[:1].isalpha()]
    assert order == [line.split(":")[0] for line in text.splitlines() if line[:1].isalpha()]


@pytest.mark.parametrize(
    ("before", "typed", "after"),
    [
        # a list typed in flow style is written back one item a line, as the file writes lists
        ("names: []\n", "[a.lan, 'b.lan']", "names:\n- a.lan\n- b.lan\n"),
        ("names:\n- x.lan\n", "['*.lan']", "names:\n- '*.lan'\n"),
        ("mode: online\n", "[a.lan]", "mode: online\nnames:\n- a.lan\n"),
        # a key the file writes as a non-empty flow list stays so; empty stays []
        ("connect_ports: [443]\n", "[443, 8443]", "connect_ports: [443, 8443]\n"),
        ("names:\n- x.lan\n", "[]", "names: []\n"),
    ],
)
def test_lists_are_written_back_in_the_files_style(before, typed, after):
    key = "connect_ports" if "connect_ports" in before else "names"
    new_text, _ = edit_config_text(before, key, typed, "f.yaml")
    assert new_text == after


def test_lines_not_edited_keep_their_quotes():
    text = (
        "# mine\nfreshness:\n  - pattern: '^http://a\\.example/'\n    max_age: 60\n"
        'censor_request_headers: {User-Agent: "Censored/1.0", Referer: ""}\n'
        "request_changed: 600\n"
    )
    new_text, config = edit_config_text(text, "request_changed", "300", "f.yaml")
    assert new_text == text.replace("600", "300")
    assert config.request_changed == 300


def test_edit_of_a_missing_key_appends_it():
    new_text, config = edit_config_text(
        "# just a comment\nmode: online\n", "read_timeout", "9", "f"
    )
    assert new_text == "# just a comment\nmode: online\nread_timeout: 9\n"
    assert config.read_timeout == 9.0
    with pytest.raises(ConfigError, match="f:.*expected a positive number"):
        edit_config_text("mode: online\n", "read_timeout", "-1", "f")


def test_a_yaml_error_is_one_clear_line():
    with pytest.raises(ConfigError) as info:
        edit_config_text("mode: online\n", "read_timeout", "[unclosed", "f")
    message = str(info.value)
    assert message == (
        "the new value of 'read_timeout' is not valid YAML: expected ',' or ']', but got "
        "'<stream end>' (line 1, column 10)"
    )
    with pytest.raises(ConfigError) as info:
        edit_config_text("mode: [online\n", "read_timeout", "5", "f.yaml")
    assert "\n" not in str(info.value) and str(info.value).startswith("f.yaml:")


async def test_the_password_is_typed_into_a_password_field(configured):
    running, client, path = configured
    _, text, _ = await client.get("/config/")
    row = text.split('value="password">', 1)[1].split("</form>", 1)[0]
    assert '<input type="password" name="value"' in row and "<textarea" not in row


async def test_values_in_force_are_shown_as_written_not_as_python(configured):
    running, client, path = configured
    status, _ = await client.post_api(
        "/config/", {"key": "freshness", "value": "- pattern: '\\.png$'\n  max_age: 60\n"}
    )
    assert status == 200
    _, text, _ = await client.get("/config/")
    shown = {
        m.group(1): m.group(2)
        for m in re.finditer(r"<tr><td><b>([a-z_]+)</b>.*?<td><code>(.*?)</code>", text)
    }
    assert shown["finish_on_disconnect"] == "true"
    assert shown["freshness"] == r"\.png$ (max_age 60 s)"
    assert shown["names"] == "(none)" and shown["password"] == "(none)"
