"""``/config/``: the effective configuration; POST ``key=K&value=YAML`` edits the file.

An edit loads the YAML file with ruamel.yaml's round-trip loader, replaces one top-level value
(comments, order and indentation are kept: a comment that followed the old value follows the new
one), validates the whole result with :func:`wwwproxy.config.parse_config`, and only then writes
the file (atomically) and reloads it, as SIGHUP does.  ``listen``, ``cache`` and
``upstream_ca`` are saved but take effect at the next start.  The running mode is state, not
configuration: an edit (even of ``mode``, the mode to start in) never changes it;
``/control/`` does.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

from aiohttp import web
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent

from ..config import Config, ConfigError, parse_config
from ..fsutil import atomic_write
from ..recording.upstream import tls_context
from ..url.proxy import UpstreamProxy, shown_proxy
from .context import Context, PageError
from .template import esc, hidden
from .worker import in_worker

__all__ = ["KEYS", "edit_config_text", "effective", "page"]

#: The configuration keys, in the order of conf/wwwproxy.yaml, with what they do.
KEYS: dict[str, str] = {
    "listen": "the proxy's address, HOST:PORT (takes effect at the next start)",
    "cache": "the cache directory (takes effect at the next start)",
    "mode": "online, offline or autodial at start (switch the running mode on /control/)",
    "names": "other host names of this proxy (a list)",
    "allowed_clients": "client networks served (a list of networks)",
    "connect_ports": "ports CONNECT tunnels may go to (a list)",
    "password": "the password for control actions (empty: none)",
    "connect_timeout": "seconds to wait for a server's connection",
    "read_timeout": "seconds to wait for a server's data",
    "finish_on_disconnect": "finish a download when the browser goes away (true/false)",
    "finish_on_disconnect_max_kb": "... but only one of at most this many KiB, or (next key) "
    "already that far along (empty: no size rule)",
    "finish_on_disconnect_percent": "... or one of which at least this percentage has come "
    "(empty: no percentage rule)",
    "censor_request_headers": "request headers replaced on the way to servers, or removed "
    'with "" (a mapping: {User-Agent: "...", Referer: ""})',
    "record_credentials": "write Cookie and Authorization into the archive's request records "
    "(false: only their digests)",
    "replay_set_cookie": "send a copy's recorded Set-Cookie when serving it from the cache "
    "(true/false)",
    "request_changed": "online, serve a cached copy without asking for at least this many "
    "seconds unless the server said no-cache (0: always ask)",
    "keep_good_copy": "a 4xx/5xx answer is recorded but the good cached copy stays the one "
    "served (true/false)",
    "fetch_on_online": "switching online fetches the queued requests at once (true/false)",
    "memory_cache_mb": "MiB of recently served pages (each up to 1 MiB) answered from memory "
    "(0: off)",
    "max_connections": "open browser connections in all; more are answered 503 (0: no cap)",
    "max_client_connections": "open connections from one client address; more are answered "
    "503 (0: no cap)",
    "freshness": "serve a cached copy without asking while it is younger than max_age seconds "
    "(a list of {pattern, max_age})",
    "max_size": "bytes the cache files may take, e.g. 2 GiB; over it the least recently used "
    "pages are purged down to 90% (0: no limit)",
    "keep_captures": "captures kept per URL; older ones are purged (0: keep all)",
    "purge_after_days": "pages not fetched or served for that many days are purged (a list of "
    "{pattern, days}; the first match wins)",
    "modify_html": "offline reading: HTML served from the cache changed on the way out (a list "
    "of {pattern, mark_links, disable_scripts, disable_meta_refresh, disable_popups})",
    "dont_get": "URL patterns never fetched: answered at once with an empty image, script or "
    "stylesheet, or a short page (a list: example.com, *.example.com, */track.gif, "
    "example.com/ads/*)",
    "dont_get_status": "the status of the answer to a dont_get URL (200 to 599)",
    "blocklist": "hosts-file or AdBlock-domain files whose hosts are added to dont_get (a file "
    "or a list of files; read again on each reload)",
    "dont_cache": "URL patterns fetched online but never recorded nor served from the cache "
    "(a list)",
    "dont_queue": "URL patterns whose offline misses are not queued (a list)",
    "local_net": "URL patterns of the local network: fetched directly, offline too, never "
    "recorded (a list)",
    "urldb": "the URL database directory",
    "https_intercept": "hosts whose HTTPS is decrypted, recorded and served offline (a list of "
    "patterns: *, example.com, *.example.com)",
    "https_bypass": "hosts never decrypted, even when https_intercept matches (a list)",
    "upstream_ca": "a PEM file of extra certificate authorities trusted for upstream TLS",
    "upstream_proxy": "the proxy origins are reached through, http://[user:password@]host:port "
    "(unset: the http_proxy/https_proxy environment variables; direct: none; a password is "
    "never shown: type the whole URL to change it)",
    "no_proxy": "hosts reached directly, not through the upstream proxy (a list of patterns; "
    "unset: the no_proxy environment variable)",
}
#: Keys saved now that take effect only when the proxy is restarted.
RESTART_KEYS = ("listen", "cache")


def effective(config: Config) -> dict[str, Any]:
    """The configuration in force, as plain data (the password is never shown)."""
    return {
        "listen": config.listen,
        "cache": str(config.cache),
        "mode": config.mode,
        "names": list(config.names),
        "allowed_clients": [str(n) for n in config.allowed_clients],
        "connect_ports": list(config.connect_ports),
        "password": "(set)" if config.password else None,
        "connect_timeout": config.connect_timeout,
        "read_timeout": config.read_timeout,
        "finish_on_disconnect": config.finish_on_disconnect,
        "finish_on_disconnect_max_kb": config.finish_on_disconnect_max_kb,
        "finish_on_disconnect_percent": config.finish_on_disconnect_percent,
        "censor_request_headers": [
            f"{name}: {value}" if value else f"{name}: (removed)"
            for name, value in config.censor_request_headers
        ],
        "record_credentials": config.record_credentials,
        "replay_set_cookie": config.replay_set_cookie,
        "request_changed": config.request_changed,
        "keep_good_copy": config.keep_good_copy,
        "fetch_on_online": config.fetch_on_online,
        "memory_cache_mb": config.memory_cache_mb,
        "max_connections": config.max_connections,
        "max_client_connections": config.max_client_connections,
        "freshness": [{"pattern": r.pattern, "max_age": r.max_age} for r in config.freshness],
        "max_size": config.max_size,
        "keep_captures": config.keep_captures,
        "purge_after_days": [
            {"pattern": r.pattern, "days": r.days} for r in config.purge_after_days
        ],
        "modify_html": [
            {
                "pattern": r.pattern,
                "mark_links": r.mark_links,
                "disable_scripts": r.disable_scripts,
                "disable_meta_refresh": r.disable_meta_refresh,
                "disable_popups": r.disable_popups,
            }
            for r in config.modify_html
        ],
        "dont_get": list(config.dont_get),
        "dont_get_status": config.dont_get_status,
        "blocklist": [str(p) for p in config.blocklist],
        "dont_cache": list(config.dont_cache),
        "dont_queue": list(config.dont_queue),
        "local_net": list(config.local_net),
        "urldb": str(config.urldb),
        "https_intercept": list(config.https_intercept),
        "https_bypass": list(config.https_bypass),
        "upstream_ca": str(config.upstream_ca) if config.upstream_ca is not None else None,
        "upstream_proxy": (
            shown_proxy(config.upstream_proxy) if config.upstream_proxy is not None else None
        ),
        "no_proxy": list(config.no_proxy) if config.no_proxy is not None else None,
    }


def _yaml(text: str) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True  # a line not edited is written back as it was, quotes too
    try:
        _, indent, offset = load_yaml_guess_indent(text)
    except YAMLError:
        indent, offset = None, None
    if indent is not None:
        yaml.indent(mapping=indent, sequence=indent, offset=offset or 0)
    return yaml


def _block(node: object) -> bool:
    return (
        isinstance(node, CommentedMap | CommentedSeq)
        and len(node) > 0
        and not (node.fa.flow_style())
    )


def _pop_trailing(node: object) -> Any:
    """Detach the comment that follows a block collection's last item (ruamel keeps it there,
    so replacing the collection would lose it)."""
    if not _block(node):
        return None
    assert isinstance(node, CommentedMap | CommentedSeq)
    last = len(node) - 1 if isinstance(node, CommentedSeq) else list(node)[-1]
    inner = _pop_trailing(node[last])
    if inner is not None:
        return inner
    entry = node.ca.items.get(last)
    slot = 0 if isinstance(node, CommentedSeq) else 2
    if entry and len(entry) > slot and entry[slot] is not None:
        token, entry[slot] = entry[slot], None
        return token
    return None


def _push_trailing(parent: CommentedMap, key: str, node: object, token: Any) -> None:
    if token is None:
        return
    if _block(node):
        assert isinstance(node, CommentedMap | CommentedSeq)
        last = len(node) - 1 if isinstance(node, CommentedSeq) else list(node)[-1]
        if _block(node[last]):
            _push_trailing(node, last, node[last], token)  # type: ignore[arg-type]
            return
        slot = 0 if isinstance(node, CommentedSeq) else 2
        node.ca.items.setdefault(last, [None, None, None, None])[slot] = token
        return
    entry = parent.ca.items.setdefault(key, [None, None, None, None])
    entry[2] = token


def _block_style_like(value: object, old: object) -> None:
    """A list or mapping written back in block style, one item a line, as the commented file
    writes them (what a form field holds is usually typed as ``[a, b]``), unless the file had
    this key as a non-empty flow collection (``connect_ports: [443]``).  Empty ones stay
    ``[]``/``{}`` (the only way to write them)."""
    if not isinstance(value, CommentedMap | CommentedSeq) or not value:
        return
    if isinstance(old, CommentedMap | CommentedSeq) and old and old.fa.flow_style():
        return
    value.fa.set_block_style()


def _yaml_problem(exc: YAMLError) -> str:
    """A parser's complaint on one line: what is wrong and where (ruamel's own text spans
    several lines and names an internal "<unicode string>")."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if not problem:
        return " ".join(str(exc).split())
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{' '.join(str(problem).split())}{where}"


def _comment_lines(text: str) -> list[str]:
    return sorted(line.strip() for line in text.splitlines() if line.strip().startswith("#"))


def edit_config_text(text: str, key: str, value_text: str, source: str) -> tuple[str, Config]:
    """``text`` with top-level ``key`` set to the YAML ``value_text``, comments and order kept,
    and the configuration it makes.  Raises ConfigError (saying what is wrong) and changes
    nothing when the result would not be a valid configuration."""
    if key not in KEYS:
        raise ConfigError(f"unknown key {key!r} (known keys: {', '.join(KEYS)})")
    yaml = _yaml(text)
    try:
        data = yaml.load(text)
    except YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        data = CommentedMap()
    if not isinstance(data, CommentedMap):
        raise ConfigError(f"{source}: the configuration must be a mapping of keys to values")
    try:
        value = YAML(typ="rt").load(value_text) if value_text.strip() else None
    except YAMLError as exc:
        raise ConfigError(
            f"the new value of {key!r} is not valid YAML: {_yaml_problem(exc)}"
        ) from None
    old = data.get(key)
    token = _pop_trailing(old) if key in data else None
    _block_style_like(value, old)
    data[key] = value
    _push_trailing(data, key, value, token)
    out = io.StringIO()
    yaml.dump(data, out)
    new_text = out.getvalue()
    config = parse_config(new_text, source)  # ConfigError names the key and line
    old_comments, new_comments = _comment_lines(text), _comment_lines(new_text)
    missing = [c for c in old_comments if c not in new_comments]
    if missing or len(new_comments) < len(old_comments):
        raise ConfigError(
            f"{source}: this edit would lose comments ({missing[:1] or 'some'}); "
            "edit the file by hand instead"
        )
    return new_text, config


def _in_force(value: object) -> str:
    """A value in force as a person reads it (YAML's ``true``, not Python's ``True``)."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict) and set(value) == {"pattern", "max_age"}:
        return f"{value['pattern']} (max_age {value['max_age']} s)"
    if isinstance(value, list):
        return ", ".join(_in_force(v) for v in value) or "(none)"
    return str(value)


def _has_credentials(value: object) -> bool:
    """An upstream_proxy value with a password or user name in it (never shown)."""
    try:
        return isinstance(value, str) and UpstreamProxy.parse(value).authorization is not None
    except ValueError:
        return "@" in str(value)


def _secret(key: str, value: object) -> bool:
    """A value never sent back to a page: a password, or a proxy URL with credentials (a
    refused one too: its password may be right and the rest wrong)."""
    return key == "password" or (
        key == "upstream_proxy" and (_has_credentials(value) or "@" in str(value))
    )


def _file_values(path: Path | None) -> tuple[dict[str, str], str | None]:
    """Each top-level key's value in the file as YAML text, or the problem reading it."""
    if path is None:
        return {}, None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return {}, f"{path}: cannot read: {exc}"
    yaml = _yaml(text)
    try:
        data = yaml.load(text)
    except YAMLError as exc:
        return {}, f"{path}: not valid YAML: {_yaml_problem(exc)}"
    values = {}
    for key, value in (data or {}).items():
        if _secret(str(key), value):
            values[key] = ""
            continue
        if value is None:
            values[str(key)] = ""
            continue
        value = copy.deepcopy(value)
        _pop_trailing(value)  # the comment before the next key is not part of this value
        out = io.StringIO()
        YAML(typ="rt").dump(value, out)
        dumped = out.getvalue()
        values[str(key)] = dumped[: -len("...\n")] if dumped.endswith("...\n") else dumped
    return values, None


def _save(ctx: Context, path: Path, key: str, value: str) -> str:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    new_text, config = edit_config_text(text, key, value, str(path))
    try:
        tls_context(config.upstream_ca)  # a CA file that does not load is refused, not saved
    except ValueError as exc:
        raise PageError(400, str(exc), title="Not saved") from None
    atomic_write(path, new_text)
    ctx.services.reload(config)  # as SIGHUP does: the mode and the address stay
    if key in RESTART_KEYS:
        return f"Saved {key} in {path}; it takes effect when the proxy is restarted."
    if key == "mode":
        return (
            f"Saved mode in {path}: the mode the proxy starts in. It is "
            f"{ctx.services.mode.value} now (switch it on the control page)."
        )
    return f"Saved {key} in {path} and reloaded the configuration."


async def page(ctx: Context) -> web.StreamResponse:
    source = ctx.services.config.source
    path = Path(source) if source and not source.startswith("<") else None
    message = error = ""
    status = 200
    edited_key = edited_value = None
    if ctx.post:
        key = ctx.text("key")
        value = ctx.text("value", "")
        if not key:
            raise PageError(400, "Give key=NAME and value=YAML.")
        if path is None:
            raise PageError(
                409,
                "The proxy was started without a configuration file: there is none to edit "
                "(start it with -c FILE).",
                title="No configuration file",
            )
        edited_key, edited_value = key, value
        try:
            message = await in_worker(_save, ctx, path, key, value or "")
        except ConfigError as exc:
            error, status = str(exc), 400
        except OSError as exc:
            error, status = f"{path}: cannot write: {exc.strerror or exc}", 500
    values, problem = await in_worker(_file_values, path)
    config = ctx.services.config
    data: dict[str, object] = {
        "source": source,
        "editable": path is not None,
        "effective": effective(config),
        "running_mode": ctx.services.mode.value,
        "file": values,
    }
    if message:
        data["message"] = message
    if error:
        data["error"] = error
    if problem:
        data["file_problem"] = problem

    def render() -> str:
        eff = effective(config)
        note = f'<div class="msg">{esc(message)}</div>' if message else ""
        if error:
            note += f'<div class="msg error">{esc(error)}</div>'
        if problem:
            note += f'<div class="msg error">{esc(problem)}</div>'
        where = (
            f"<p>File: <code>{esc(source)}</code>. Editing a value saves the file (keeping its "
            "comments and order) and reloads it. Values are YAML.</p>"
            if path is not None
            else '<p class="muted">Started without a configuration file: the values below are '
            "the defaults and command-line options, and cannot be edited here.</p>"
        )
        rows = []
        for key, about in KEYS.items():
            shown = _in_force(eff[key])
            if key == "mode":
                shown = f"{shown} (running: {ctx.services.mode.value})"
            current = values.get(key, "")
            if key == edited_key and error and not _secret(key, edited_value):
                current = edited_value or ""  # the refused value, to correct
            in_file = key in values
            lines = max(1, min(8, current.count("\n") + 1))
            placeholder = "new password (empty: none)" if key == "password" else "(default)"
            if key == "password":  # typed unseen; the saved one is never shown
                field = (
                    '<input type="password" name="value" autocomplete="new-password" '
                    f'placeholder="{esc(placeholder)}" aria-label="{esc(key)}">'
                )
            else:
                field = (
                    f'<textarea name="value" rows="{lines}" placeholder="{esc(placeholder)}" '
                    f'aria-label="{esc(key)}">{esc(current)}</textarea>'
                )
            editor = (
                '<form method="post" action="/config/">'
                + hidden("token", ctx.token)
                + hidden("key", key)
                + field
                + "<button>Save</button></form>"
                if path is not None
                else ""
            )
            rows.append(
                f"<tr><td><b>{esc(key)}</b><div class=muted>{esc(about)}</div></td>"
                f"<td><code>{esc(shown)}</code>"
                f"{'' if in_file else ' <span class=muted>(default)</span>'}</td>"
                f"<td>{editor}</td></tr>"
            )
        return (
            note
            + where
            + "<table><thead><tr><th>Key</th><th>In force</th>"
            + '<th style="width:40%">In the file</th></tr></thead>'
            + f"<tbody>{''.join(rows)}</tbody></table>"
        )

    return ctx.respond(data, "Configuration", render, status, active="/config/")
