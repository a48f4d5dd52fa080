"""The configuration: its keys, each declared once (:mod:`.keys`), the parsers of their values
(:mod:`.values`), reading the YAML file (:mod:`.load`), and the reference generated from the
declarations (:mod:`.reference`, ``docs/configuration.md``)."""

from __future__ import annotations

from .keys import Config, Setting, effective, setting, settings, shown_text
from .load import (
    DEFAULT_CONFIG_PATH,
    ConfigError,
    config_candidates,
    default_cache,
    find_config,
    load_config,
    parse_config,
)
from .values import FreshnessRule, ModifyHTMLRule, PurgeRule, parse_hostport

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "Config",
    "ConfigError",
    "FreshnessRule",
    "ModifyHTMLRule",
    "PurgeRule",
    "Setting",
    "config_candidates",
    "default_cache",
    "effective",
    "find_config",
    "load_config",
    "parse_config",
    "parse_hostport",
    "setting",
    "settings",
    "shown_text",
]
