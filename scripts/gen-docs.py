"""Regenerate the generated parts of docs/: configuration.md and golden-format.md's schema block.

Run from the repository root: .venv/bin/python scripts/gen-docs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_crucible.reference import write_docs

docs = Path(__file__).resolve().parents[1] / "docs"
changed = write_docs(docs)
for path in changed:
    print(f"regenerated {path.relative_to(docs.parent)}")
if not changed:
    print("docs/ is up to date")
sys.exit(0)
