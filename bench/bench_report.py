"""Benchmark: the HTML report of a large run, old code against new, in one invocation.

Run from the repository root:

    .venv/bin/python bench/bench_report.py --db DIR/runs.db [--run RUN] [--old-src /tmp/report-main/src] [--out DIR]

For each code (``new``: this checkout; ``old``: another checkout's ``src`` put first on PYTHONPATH, e.g. a
``git worktree add --detach /tmp/report-main <commit>``), ``crucible report RUN --db DB -o report.html``
runs as a child process of its own: wall and CPU seconds (user + system) and peak RSS (``ru_maxrss``).
Then the page it wrote is opened in headless Chromium (playwright, the ``dev`` extra; ``/usr/bin/chromium``)
from its file: the first paint and the first contentful paint (the browser's paint timing entries), the
time until the item list is drawn (the new page marks ``#items-table[data-ready]``; the old one is
server-rendered, drawn at load), the number of items the page can reach (``data-n`` of the new page's
data block; the old page's ``details.item`` count) and, on the new page, the time a search for the run's
last listed item takes to show it and open its drill-down.

It reports, it never fails; nothing here reaches the network (the page is a local file, and the browser
is started with its background networking off).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_overhead as overhead

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def report(db: Path, run_id: str, out: Path, src: Path | None) -> tuple[float, float, float, int]:
    """(wall s, cpu s, peak RSS MB, exit code) of ``crucible report`` with this code."""
    env = {"PYTHONPATH": str(src)} if src is not None else {}
    wall, rss, rc = overhead.run_child(["-m", "pytest_crucible.cli", "report", run_id, "--db", str(db), "-o", str(out)],
                                       Path.cwd(), out.with_suffix(".log"), env)
    return wall, overhead.LAST_CPU[0], rss, rc


PAINT = """() => Object.fromEntries(performance.getEntriesByType('paint').map(e => [e.name, e.startTime]))"""


def in_browser(page_file: Path) -> dict[str, object]:
    from playwright.sync_api import sync_playwright

    figures: dict[str, object] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            started = time.perf_counter()
            page.goto(page_file.as_uri(), wait_until="load", timeout=600_000)
            figures["load_s"] = time.perf_counter() - started
            new = page.locator("#items-rows").count() == 1
            if new:
                page.wait_for_selector("#items-table[data-rows-ready]", state="attached", timeout=600_000)
                figures["rows_drawn_s"] = time.perf_counter() - started
                page.wait_for_selector("#items-table[data-ready]", state="attached", timeout=600_000)
                figures["all_decoded_s"] = time.perf_counter() - started
            paints = page.evaluate(PAINT)
            figures["first_paint_s"] = (paints.get("first-paint") or float("nan")) / 1000
            figures["first_contentful_paint_s"] = (paints.get("first-contentful-paint") or float("nan")) / 1000
            if new:
                figures["items_reachable"] = int(page.locator("#items-rows").get_attribute("data-n") or 0)
                figures["rows_drawn"] = page.locator("#items-table details.item").count()
                # The last item the page lists: search for it by id, then open it.
                target = page.evaluate(LAST_ID)
                started = time.perf_counter()
                page.fill("#items-search", target)
                page.wait_for_selector(f"details.item[data-item='{target}']", timeout=60_000)
                page.locator(f"details.item[data-item='{target}']").evaluate("details => { details.open = true; }")
                page.wait_for_selector("#items-table tr.more table.chunks", timeout=60_000)
                figures["search_last_and_open_s"] = time.perf_counter() - started
            else:
                figures["items_reachable"] = page.locator("details.item").count()
        finally:
            browser.close()
    return figures


# The id of the last item in the page's data: the rows are decoded already, read the last page's last row.
LAST_ID = """async () => {
  const source = document.getElementById('items-rows');
  const binary = atob(source.textContent.trim()); const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  const text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text();
  const ids = JSON.parse(text).rows.id; return ids[ids.length - 1];
}"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", help="the run to report (default: the newest)")
    parser.add_argument("--old-src", type=Path, help="another checkout's src/ to time as 'old' (PYTHONPATH first)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-report"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run_id = args.run
    if run_id is None:
        with sqlite3.connect(f"file:{args.db}?mode=ro", uri=True) as conn:
            run_id = conn.execute("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
    print(f"HTML report of run {run_id} in {args.db} ({os.cpu_count()} cores)")
    codes = [("old", args.old_src)] if args.old_src else []
    codes.append(("new", None))
    for label, src in codes:
        out = args.out / f"report-{label}.html"
        wall, cpu, rss, rc = report(args.db, run_id, out, src)
        size = out.stat().st_size / 1e6 if out.exists() else float("nan")
        print(f"  {label}: crucible report {wall:6.2f} s wall {cpu:6.2f} s cpu  peak RSS {rss:6.1f} MB  rc={rc}  size {size:5.2f} MB")
        if rc == 0 and CHROMIUM.exists():
            figures = in_browser(out)
            print("       browser: " + ", ".join(f"{name} {value:.2f}" if isinstance(value, float) else f"{name} {value}"
                                          for name, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
