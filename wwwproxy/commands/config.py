"""``/config/``: the effective configuration; POST ``key=K&value=YAML`` edits the file.

An edit loads the YAML file with ruamel.yaml's round-trip loader, replaces one top-level value
(comments, order and indentation are kept: a comment that followed the old value follows the new
one), validates the whole result with :func:`wwwproxy.config.parse_config`, and only then writes
the file (atomically) and reloads it, as SIGHUP does; a key declared to need a restart
(``listen``, ``cache``) is saved but takes effect at the next start.  The keys, what they do and
how their values are shown all come from their declarations (:mod:`wwwproxy.config.keys`).  The
running mode is state, not configuration: an edit (even of ``mode``, the mode to start in) never
changes it; ``/control/`` does.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiohttp import web
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent

from ..config import (
    Config,
    ConfigError,
    Setting,
    effective,
    parse_config,
    settings,
    shown_text,
)
from ..fsutil import atomic_write
from ..recording.upstream import tls_context
from .context import Context, PageError
from .template import esc, hidden
from .worker import in_worker

__all__ = ["edit_config_text", "page"]


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


def edit_config_text(
    text: str, key: str, value_text: str, source: str, config_class: type[Config] = Config
) -> tuple[str, Config]:
    """``text`` with top-level ``key`` set to the YAML ``value_text``, comments and order kept,
    and the configuration (of ``config_class``, declaring the keys) it makes.  Raises
    ConfigError (saying what is wrong) and changes nothing when the result would not be a
    valid configuration."""
    known = settings(config_class)
    if key not in known:
        raise ConfigError(f"unknown key {key!r} (known keys: {', '.join(known)})")
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
    config = parse_config(new_text, source, config_class)  # ConfigError names key and line
    old_comments, new_comments = _comment_lines(text), _comment_lines(new_text)
    missing = [c for c in old_comments if c not in new_comments]
    if missing or len(new_comments) < len(old_comments):
        raise ConfigError(
            f"{source}: this edit would lose comments ({missing[:1] or 'some'}); "
            "edit the file by hand instead"
        )
    return new_text, config


def _file_values(
    path: Path | None, keys: Mapping[str, Setting]
) -> tuple[dict[str, str], str | None]:
    """Each top-level key's value in the file as YAML text (a secret one as ""), or the
    problem reading it."""
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
        declared = keys.get(str(key))
        if declared is not None and declared.hides(value):
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
    config_class = type(ctx.services.config)
    new_text, config = edit_config_text(text, key, value, str(path), config_class)
    try:
        tls_context(config.upstream_ca)  # a CA file that does not load is refused, not saved
    except ValueError as exc:
        raise PageError(400, str(exc), title="Not saved") from None
    atomic_write(path, new_text)
    ctx.services.reload(config)  # as SIGHUP does: the mode and the address stay
    if settings(config_class)[key].restart:
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
    config = ctx.services.config
    keys = settings(type(config))
    values, problem = await in_worker(_file_values, path, keys)
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
        for key, declared in keys.items():
            about = declared.help
            if declared.restart:
                about += " (takes effect at the next start)"
            shown = shown_text(eff[key])
            if key == "mode":
                shown = f"{shown} (running: {ctx.services.mode.value})"
            current = values.get(key, "")
            if key == edited_key and error and not declared.hides(edited_value):
                current = edited_value or ""  # the refused value, to correct
            in_file = key in values
            lines = max(1, min(8, current.count("\n") + 1))
            unseen = declared.secret is True  # typed unseen; the saved one is never shown
            placeholder = "new password (empty: none)" if unseen else "(default)"
            if unseen:
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
