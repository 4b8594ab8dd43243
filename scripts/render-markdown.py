"""Render crucible's Markdown verdict the way GitHub shows a pull request comment, and screenshot it.

    python scripts/render-markdown.py comment.md docs/img/pr-comment.png

GitHub renders comments with CommonMark plus its table extension, keeps HTML comments hidden and
`<details>` blocks collapsed; markdown-it-py with the same rules gives the same structure (the dev extra
installs it). The screenshot is taken in headless Chromium (Debian's package) through playwright, with
`<details>` opened so the changed items show. tests/test_ci_outputs.py renders through `github_html` too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

# Close to GitHub's comment styles: the system font stack, bordered tables with striped rows.
STYLE = """
body { font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; color: #1f2328;
       margin: 0; padding: 16px; background: #fff; }
.comment { max-width: 880px; border: 1px solid #d1d9e0; border-radius: 6px; padding: 16px; }
table { border-collapse: collapse; margin: 0 0 16px; display: block; overflow: auto; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
th { font-weight: 600; }
tr:nth-child(2n) { background: #f6f8fa; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3; padding: .2em .4em;
       border-radius: 6px; }
p, ul, details { margin: 0 0 16px; }
summary { cursor: pointer; }
"""


def github_html(markdown: str) -> str:
    """A full HTML page holding ``markdown`` rendered as GitHub renders a comment (CommonMark, tables, raw HTML)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").render(markdown)
    return (f'<!doctype html><html><head><meta charset="utf-8"><style>{STYLE}</style></head>'
            f'<body><div class="comment">{body}</div></body></html>')


def screenshot(markdown: str, out: Path, *, width: int = 920) -> None:
    """``markdown`` rendered, every `<details>` opened, saved as a PNG of the whole comment."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 600})
            page.set_content(github_html(markdown))
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            page.locator(".comment").screenshot(path=str(out))
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("markdown", type=Path, help="a Markdown file crucible wrote (--crucible-markdown, --format markdown)")
    parser.add_argument("png", type=Path, help="where to save the screenshot")
    parser.add_argument("--rows", type=int, default=8, help="changed items kept in the screenshot (default: 8)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"render-markdown: {CHROMIUM} is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    screenshot(_shortened(args.markdown.read_text(encoding="utf-8"), args.rows), args.png)
    print(f"wrote {args.png}")
    return 0


def _shortened(markdown: str, rows: int) -> str:
    """The changed-items table cut to ``rows`` rows, so the picture stays readable."""
    lines, out, in_details, kept = markdown.splitlines(), [], False, 0
    for line in lines:
        in_details = in_details or line.startswith("<details>")
        if in_details and line.startswith("| ") and not line.startswith("| item |"):
            kept += 1
            if kept > rows:
                continue
        out.append(line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
