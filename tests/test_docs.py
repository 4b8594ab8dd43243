"""The README's option table cannot drift from the options the plugin defines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_every_option_and_ini_key_is_in_the_readme(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    help_text = result.stdout.str()
    options = sorted(set(re.findall(r"--crucible-[a-z-]+", help_text)))
    ini_keys = sorted(set(re.findall(r"^  (crucible_[a-z_]+) ", help_text, flags=re.M)))
    assert len(options) >= 19 and len(ini_keys) >= 8
    readme = README.read_text()
    table = readme[readme.index("## Options and ini keys"):]
    missing = [name for name in options + ini_keys if f"`{name}" not in table]
    assert missing == [], f"add these to the README's options table: {missing}"
    documented = set(re.findall(r"`(--crucible-[a-z-]+)", table))
    assert documented <= set(options), f"the README documents options that do not exist: {documented - set(options)}"
