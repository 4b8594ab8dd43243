"""Check: the HTML report of a run written by this checkout is the page another checkout writes.

Run from the repository root:

    .venv/bin/python bench/check_report_same.py --db DIR/runs.db [--run RUN] --old-src /tmp/report-main/src [--out DIR]

``crucible report RUN`` runs twice, as a child process of each code (``old``: another checkout's ``src``
first on PYTHONPATH; ``new``: this one), on a copy of the database each. Then the two pages are compared:
the item document the page's script decodes (``report.item_data.decode_items``) must be equal, and the
pages' bytes too, once the moment they were written (the footer's timestamp) is taken out of both. It
prints what differs and exits 1 when anything does; 0 when the pages are the same.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What differs between two writes of the same page: the moment it was written.
MOMENT = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d| UTC)?")


def write_page(db: Path, run_id: str, out: Path, src: Path | None) -> float:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest_crucible.cli", "report", run_id, "--db", str(db), "-o", str(out)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", help="the run (default: the newest in the database)")
    parser.add_argument("--old-src", type=Path, required=True)
    parser.add_argument("--out", type=Path, help="where the pages are kept (default: a temporary folder)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from pytest_crucible.report.item_data import decode_items

    run_id = args.run or sqlite3.connect(args.db).execute("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
    out = args.out or Path(tempfile.mkdtemp(prefix="crucible-report-same-"))
    out.mkdir(parents=True, exist_ok=True)
    pages = {}
    for name, src in (("old", args.old_src), ("new", None)):
        db = out / f"{name}.db"
        shutil.copyfile(args.db, db)
        pages[name] = out / f"{name}.html"
        seconds = write_page(db, run_id, pages[name], src)
        print(f"{name}: {pages[name]} ({pages[name].stat().st_size:,} bytes, {seconds:.2f} s)")
    old, new = (pages[name].read_text(encoding="utf-8") for name in ("old", "new"))
    same = True
    old_items, new_items = decode_items(old), decode_items(new)
    if old_items != new_items:
        same = False
        for key in sorted(set(old_items) | set(new_items)):
            if old_items.get(key) != new_items.get(key):
                print(f"DIFFERENT item document: key {key!r}")
    # The pages with every database path and moment taken out (each code wrote from a copy of its own).
    old_text = MOMENT.sub("<moment>", old.replace(str(out / "old.db"), "<db>"))
    new_text = MOMENT.sub("<moment>", new.replace(str(out / "new.db"), "<db>"))
    if old_text != new_text:
        same = False
        at = next(i for i, (a, b) in enumerate(zip(old_text, new_text)) if a != b) if old_text[:len(new_text)] != new_text[:len(old_text)] else min(len(old_text), len(new_text))
        print(f"DIFFERENT pages from character {at}: old {old_text[at - 80:at + 80]!r}\n new {new_text[at - 80:at + 80]!r}")
    print(f"run {run_id}: {'the same page' if same else 'the pages differ'} ({len(new_items.get('detail', [])):,} items)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
