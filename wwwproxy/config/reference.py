"""``docs/configuration.md``, the configuration reference, generated from the declarations of
the keys (:mod:`wwwproxy.config.keys`) so that it cannot drift from them:
``python -m wwwproxy.config.reference > docs/configuration.md`` (a test checks the committed
file is what this makes)."""

from __future__ import annotations

import sys

from .keys import Config, Setting, settings, shown_text

__all__ = ["reference"]

_INTRODUCTION = """\
# Configuration reference

<!-- Generated from the key declarations in wwwproxy/config/keys.py by
`python -m wwwproxy.config.reference > docs/configuration.md`; edit those, not this file. -->

The commands read `./conf/wwwproxy.yaml` (the commented one of a checkout) if there is one,
else `$XDG_CONFIG_HOME/wwwproxy/wwwproxy.yaml` (`~/.config/wwwproxy/wwwproxy.yaml`); `-c FILE`
names another. Every key may be left out: it then has its default. An unknown key or a bad
value is reported with file, line and key, and the file is refused as a whole. A reload
(`wwwproxy reload`, `kill -HUP`, `systemctl reload wwwproxy`, or an edit on the `/config/`
page) applies a changed value at once, except for the keys that say they take effect at the
next start.

The keys, in the order of `conf/wwwproxy.yaml`:
"""


def _markdown(text: str) -> str:
    """Plain text as Markdown shows it (a ``*`` in a pattern is not emphasis)."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")


def _default(value: object) -> str:
    """A default as YAML writes it (a list in brackets); none when unset or empty."""
    if value is None or value == []:
        return "none"
    if isinstance(value, list):
        return f"`[{', '.join(shown_text(v) for v in value)}]`"
    return f"`{shown_text(value)}`"


def _entry(key: Setting, default: object) -> str:
    about = key.help[:1].upper() + key.help[1:]
    applied = "at the next start" if key.restart else "at a reload"
    return (
        f"## `{key.name}`\n\n{_markdown(about)}.\n\n"
        f"- default: {_default(default)}\n- takes effect: {applied}\n"
    )


def reference(config_class: type[Config] = Config) -> str:
    """The Markdown reference of the keys ``config_class`` declares."""
    defaults = config_class()
    entries = [_entry(key, key.shown(defaults)) for key in settings(config_class).values()]
    return "\n".join([_INTRODUCTION, *entries])


if __name__ == "__main__":
    sys.stdout.write(reference())
