"""Load and validate the YAML configuration (``conf/wwwproxy.yaml``).

The file is read with ruamel.yaml's round-trip loader so that (a) every error can name the file,
line and key, and (b) the ``/config/`` page can edit a value and write the file back with its
comments and order intact.  A config that does not validate is refused as a whole: a proxy that
starts with half a config is worse than one that says what is wrong.  Which keys there are and
how each is parsed comes from their declarations (:mod:`wwwproxy.config.keys`).

Where the file is, when none is named: ``./conf/wwwproxy.yaml`` (a checkout of wwwproxy, or any
directory laid out like one), else the user's ``$XDG_CONFIG_HOME/wwwproxy/wwwproxy.yaml``.  A
configuration that names no ``cache`` keeps it in ``./cache`` in a checkout and in
``$XDG_CACHE_HOME/wwwproxy`` anywhere else, so ``wwwproxy serve`` started in some other directory
does not make a cache there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from .keys import Config, settings
from .values import where_in

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "ConfigError",
    "config_candidates",
    "default_cache",
    "find_config",
    "load_config",
    "parse_config",
]

#: A checkout's configuration, relative to the working directory; its presence marks a checkout.
DEFAULT_CONFIG_PATH = Path("conf/wwwproxy.yaml")


def _xdg_dir(environ: Mapping[str, str], name: str, fallback: str) -> Path:
    """``$name`` if it is an absolute path (the XDG rule: a relative one is ignored), else
    ``~/fallback``."""
    value = environ.get(name, "")
    if value and os.path.isabs(value):
        return Path(value)
    return Path(environ.get("HOME") or Path.home()) / fallback


def config_candidates(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The configuration files looked for, first found wins: the checkout's, the user's."""
    user = _xdg_dir(environ, "XDG_CONFIG_HOME", ".config") / "wwwproxy" / "wwwproxy.yaml"
    return [DEFAULT_CONFIG_PATH, user]


def find_config(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The configuration file read when none is named (None: there is none, the defaults)."""
    return next((path for path in config_candidates(environ) if path.is_file()), None)


def default_cache(checkout: bool, environ: Mapping[str, str] = os.environ) -> Path:
    """The cache directory of a configuration that names none: ``./cache`` in a checkout, the
    user's ``$XDG_CACHE_HOME/wwwproxy`` elsewhere."""
    if checkout:
        return Path("cache")
    return _xdg_dir(environ, "XDG_CACHE_HOME", ".cache") / "wwwproxy"


class ConfigError(ValueError):
    """A configuration problem; the message names file, line and key."""


def _yaml_problem(exc: YAMLError) -> str:
    """ruamel's several-line message as one line with the place: ``problem (line L, column C)``."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return problem
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"


def parse_config(
    text: str,
    source: str = "<string>",
    config_class: type[Config] = Config,
    defaults: Mapping[str, Any] | None = None,
) -> Config:
    """Validate YAML text into a :class:`Config` (or the ``config_class`` declaring the keys);
    raises :class:`ConfigError` naming the place.  ``defaults`` replace the declared defaults of
    keys the text does not set."""
    try:
        data = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        data = CommentedMap()
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping of keys to values")
    keys = settings(config_class)
    values: dict[str, Any] = {**(defaults or {}), "source": source}
    problems = []
    for name, raw in data.items():
        where = where_in(source, data, name)
        key = keys.get(name)
        if key is None:
            known = ", ".join(sorted(keys))
            problems.append(f"{where}: unknown key {name!r} (known keys: {known})")
            continue
        try:
            values.update(key.value(raw, source))
        except ValueError as exc:
            # a rule's problems name its item's line; the rest (not a list) the key's
            placed = key.rules and str(exc).startswith(source)
            problems.append(str(exc) if placed else f"{where}: key {name!r}: {exc}")
    if problems:
        raise ConfigError("\n".join(problems))
    return config_class(**values)


def load_config(path: str | Path | None = None) -> Config:
    """Read the config file (None: the one :func:`find_config` finds, or none: the defaults); a
    missing named one is an error.  The cache is :func:`default_cache` unless it names one."""
    cache = default_cache(DEFAULT_CONFIG_PATH.is_file())
    if path is None:
        path = find_config()
        if path is None:
            return Config(cache=cache)
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_config(text, str(path), defaults={"cache": cache})
