"""``docs/configuration.md`` is what the key declarations generate: it cannot drift."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from wwwproxy.config import settings
from wwwproxy.config.load import parse_config
from wwwproxy.config.reference import reference

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "configuration.md"


def test_the_committed_reference_is_what_the_declarations_generate():
    assert DOCS.read_text(encoding="utf-8") == reference(), (
        "regenerate it: python -m wwwproxy.config.reference > docs/configuration.md"
    )


def test_the_reference_gives_every_key_its_default_and_when_it_applies():
    text = reference()
    sections = text.split("\n## ")[1:]
    assert [s.split("`")[1] for s in sections] == list(settings())
    listen = sections[0]
    assert "- default: `127.0.0.1:8080`" in listen and "takes effect: at the next start" in listen
    clients = sections[list(settings()).index("allowed_clients")]
    assert "- default: `[127.0.0.0/8, ::1/128]`" in clients and "at a reload" in clients
    dont_get = sections[list(settings()).index("dont_get")]
    assert r"\*.example.com" in dont_get  # a pattern, not Markdown emphasis


def test_the_generator_command_writes_the_reference():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "wwwproxy.config.reference"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    )
    assert out.stdout == reference()


def test_the_committed_reference_documents_exactly_the_declared_keys():
    documented = re.findall(r"(?m)^## `([a-z_]+)`$", DOCS.read_text(encoding="utf-8"))
    declared = list(settings())
    assert sorted(set(declared) - set(documented)) == [], "declared but not in the reference"
    assert sorted(set(documented) - set(declared)) == [], "in the reference but unknown"
    assert documented == declared


def readme_configuration_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_configuration_section_names_only_known_keys():
    section = readme_configuration_section()
    known = set(settings())
    examples = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert examples, "the section shows an example"
    for example in examples:
        parse_config(example, "README.md")  # known keys, valid values: else ConfigError
    named = set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)*)`", section))
    assert len(named) >= 10
    assert sorted(named - known) == [], "unknown keys named in the README's configuration"
