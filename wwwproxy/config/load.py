"""Load and validate the YAML configuration (``conf/wwwproxy.yaml``).

The file is read with ruamel.yaml's round-trip loader so that (a) every error can name the file,
line and key, and (b) the ``/config/`` page can edit a value and write the file back with its
comments and order intact.  A config that does not validate is refused as a whole: a proxy that
starts with half a config is worse than one that says what is wrong.  Which keys there are and
how each is parsed comes from their declarations (:mod:`wwwproxy.config.keys`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from .keys import Config, settings
from .values import where_in

__all__ = ["DEFAULT_CONFIG_PATH", "ConfigError", "load_config", "parse_config"]

DEFAULT_CONFIG_PATH = Path("conf/wwwproxy.yaml")


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
    text: str, source: str = "<string>", config_class: type[Config] = Config
) -> Config:
    """Validate YAML text into a :class:`Config` (or the ``config_class`` declaring the keys);
    raises :class:`ConfigError` naming the place."""
    try:
        data = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        data = CommentedMap()
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping of keys to values")
    keys = settings(config_class)
    values: dict[str, Any] = {"source": source}
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
    """Read the config file; a missing default file means the defaults, a missing named one is
    an error."""
    if path is None:
        path = DEFAULT_CONFIG_PATH
        if not path.exists():
            return Config()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_config(text, str(path))
