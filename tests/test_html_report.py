"""The HTML report: content from real runs of the example project, escaping, the CLI, and a real browser."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import made_once, needs_a_look

from pytest_crucible.cli import main as crucible_main
from pytest_crucible.report.html import render_report, risk_coverage_plot, write_report
from pytest_crucible.report.item_data import decode_items
from pytest_crucible.store import Store
from pytest_crucible.verdict.gate import GateSettings, decide
from pytest_crucible.verdict.runs import load_run, read_run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _run_example(db: Path, *extra: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", str(EXAMPLE), f"--crucible-db={db}", "-q", "-p", "no:cacheprovider", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _make_example_runs(folder: Path) -> list[str]:
    db = folder / "crucible.db"
    _run_example(db)
    _run_example(db, f"--crucible-config={EXAMPLE / 'configs' / 'rerank.json'}", "--crucible-baseline=latest")
    store = Store.open(db, create=False)
    try:
        runs = store.list_runs()
    finally:
        store.close()
    assert len(runs) == 2
    return [runs[1]["id"], runs[0]["id"]]


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory):
    """(db, baseline run id, candidate run id): the example project, then with the reranker on (made once per test
    session: the tests only read it)."""
    folder, (baseline, candidate) = made_once(tmp_path_factory, "html-example-runs", _make_example_runs)
    return folder / "crucible.db", baseline, candidate


def report_against(store: Store, run_id: str, ref: str) -> str:
    """The page `crucible report RUN --against REF` writes: the gate decides once, the page shows it."""
    gate = decide(load_run(store, run_id), read_run(ref, store, exclude=run_id), GateSettings(baseline=ref))
    return render_report(store, run_id, gate=gate)


@pytest.fixture(scope="module")
def example_html(example_runs, tmp_path_factory) -> Path:
    db, baseline, candidate = example_runs
    store = Store.open(db, create=False)
    try:
        html = report_against(store, candidate, baseline)
    finally:
        store.close()
    return write_report(tmp_path_factory.mktemp("report") / "report.html", html)


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of the page (entities decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        def matches(found: dict[str, str]) -> bool:
            for name, value in attrs.items():
                name = name.rstrip("_")
                if name == "class":
                    if value not in found.get("class", "").split():
                        return False
                elif found.get(name) != value:
                    return False
            return True

        return [found for name, found in self.tags if name == tag and matches(found)]


def _parse(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


def embedded_items(html: str) -> dict:
    """The items the page embeds, decoded as its script decodes them (each block: base64, then gzip, then JSON)."""
    return decode_items(html)


def _only_the_pages_scripts(html: str) -> bool:
    """The page's script tags are the items' two data blocks and the one inlined script, nothing else."""
    tags = re.findall(r"<script[^>]*>", html, flags=re.IGNORECASE)
    return (len(tags) == 3 and tags[0].startswith('<script type="application/octet-stream" id="items-rows"')
            and tags[1].startswith('<script type="application/octet-stream" id="items-detail"') and tags[2] == "<script>")


# -- content ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_report_of_the_example_project(example_runs, example_html) -> None:
    db, _baseline, candidate = example_runs
    html = example_html.read_text(encoding="utf-8")
    page = _parse(html)
    store = Store.open(db, create=False)
    try:
        results = store.results(candidate)
        run = store.get_run(candidate)
    finally:
        store.close()

    # Self-contained: only the items' data block and the one inlined script, nothing fetched from anywhere.
    assert _only_the_pages_scripts(html)
    assert not re.search(r"<script[^>]*\bsrc=", html)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)

    # Header.
    text = " ".join(page.text)
    assert run["id"] in text and run["config_hash"][:12] in text
    assert "example_project/configs/rerank.json" in text
    assert "judge lexical-v3" in text
    assert '"rerank": true' in text  # the resolved config

    # The gate's verdict stands at the top of the page, before the metrics, in the gate's words.
    [headline] = page.find("p", id="gate-headline")
    assert headline["data-verdict"] == "passed" and html.index('id="gate-headline"') < html.index('id="metrics"')
    assert "gate passed: no significant regression" in html[html.index('id="gate-headline"'):html.index('id="metrics"')]
    # p-values below 0.001 read "<.001", as in the terminal, never "0.000"; the p-values are Holm-adjusted over
    # the gated metrics, and the report says so.
    table = html[html.index('<section id="comparison">'):]
    table = table[:table.index("</section>")]
    assert ">0.000<" not in table and re.search(r"p Holm-adjusted over \d+ gated metrics", table)
    from pytest_crucible.report.views import p_text

    assert p_text(0.0004) == "<.001" and p_text(0.0012) == "0.001"

    # Metric families.
    families = {table["data-family"] for table in page.find("table", class_="family")}
    assert {"retrieval", "ragas", "abstention"} <= families

    # The risk-coverage plot: an SVG with a step path through several points, and axis labels.
    [svg] = page.find("svg", id="risk-coverage")
    assert svg["viewbox"].startswith("0 0 ")
    [curve] = page.find("path", class_="curve")
    coordinates = re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", curve["d"])
    assert len(coordinates) >= 4
    points = page.find("circle", class_="pt")
    assert len(points) >= 2
    width, height = (float(v) for v in svg["viewbox"].split()[2:])
    assert all(0 <= float(x) <= width and 0 <= float(y) <= height for x, y in coordinates)
    assert "coverage (share of questions answered)" in text and "selective risk (error rate)" in text
    assert page.find("path", class_="curve-base"), "the baseline's curve is drawn beside this run's"

    # The comparison: one row per metric, coloured by verdict, with a CI drawn around a zero line.
    rows = page.find("tr", **{"data-metric": "ndcgAt10"})
    assert rows and rows[0]["data-verdict"] in ("improved", "regressed", "not significant")
    expected_class = {"improved": "improved", "regressed": "regressed", "not significant": "ns", "changed": "changed"}
    verdict_rows = [tag for tag in page.find("tr") if "data-verdict" in tag]
    assert len(verdict_rows) >= 10
    for row in verdict_rows:
        assert row["class"] == expected_class[row["data-verdict"]]
    assert len(page.find("svg", class_="ci")) == len(verdict_rows)
    assert len(page.find("line", class_="zero")) == len(verdict_rows)
    assert "config retrieval.rerank" in text.replace("\n", " ") or "retrieval.rerank" in text

    # Error classes and facets.
    assert page.find("section", id="error-classes") and "hallucination" in text
    facets = {table["data-facet"] for table in page.find("table", class_="facet")}
    assert {"questionType", "popularity", "tag"} <= facets

    # Every result is in the page's data, the ones that need a look first, each group in the results' order,
    # each with its retrieved chunks.
    data = embedded_items(html)
    look = [row["item_id"] for row in results if needs_a_look(row)]
    assert data["rows"]["id"] == look + [row["item_id"] for row in results if row["item_id"] not in set(look)]
    assert data["n"] == len(results) and sum(data["rows"]["look"]) == len(look)
    assert sum(1 for detail in data["detail"] if detail.get("chunks")) == sum(1 for row in results if json.loads(row["retrieved"]))
    assert any(data["sources"][chunk[3]] == "provenance" for detail in data["detail"] for chunk in detail.get("chunks", []))
    assert any(detail.get("claims") for detail in data["detail"]), "faithfulness claims of a system-mode run"
    assert any(detail.get("assertions") for detail in data["detail"])


@pytest.mark.slow
def test_report_against_an_exported_baseline(example_runs, tmp_path) -> None:
    db, baseline, candidate = example_runs
    store = Store.open(db, create=False)
    try:
        export = tmp_path / "baseline.json"
        export.write_text(json.dumps(store.export_run(baseline)), encoding="utf-8")
        from_file = report_against(store, candidate, str(export))
        from_store = report_against(store, candidate, "latest")
        alone = render_report(store, baseline)
    finally:
        store.close()
    for html in (from_file, from_store):
        assert 'id="comparison"' in html and baseline in html
        assert html.count('class="ci"') >= 10
    assert 'id="comparison"' not in alone


def _small_store(path: Path) -> tuple[Store, str]:
    store = Store.open(path)
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="system", outcome_mode="record",
                             config_path="configs/<evil>.json")
    evil = '<script>alert("x")</script>'
    rows = [("q1", f"What about {evil}?", "perfect", 0.9), ("q2", "Plain question?", "incorrect", 0.4), ("q3", "Third?", "acceptable", 0.7)]
    for item_id, question, grade, confidence in rows:
        store.record_score(run_id, {
            "item_id": item_id, "question": question,
            "item": {"id": item_id, "question": question, "citations": [{"docId": "d", "chunkId": "d#1", "mode": "required"}],
                     "tags": ["topic:<b>tag</b>"], "questionType": "simple"},
            "answer": "Answer with <img src=x onerror=alert(1)> markup [S1]", "citations": ["d#1"],
            "retrieved": [{"chunk_id": "d#1", "doc_id": "d", "text": "chunk text </td></tr><script>bad()</script>", "score": 1.0},
                          {"chunk_id": "e#2", "doc_id": "e", "text": "other", "score": 0.5}],
            "confidence": confidence, "abstained": False, "outcome": "passed", "metrics": {"ndcgAt10": 1.0, "truthfulness": 1.0},
            "verdicts": {"faithfulness": {"claims": ["claim <i>one</i>"], "supported": [True], "reasons": ["because <u>"]},
                         "contextPrecision": {"useful": [True, False]}, "correctness": {"grade": "correct", "reason": "<ok>"}},
            "assertions": [{"text": "says <em>x</em>", "kind": "must", "weight": 1.0, "supported": True, "satisfied": True}],
            "error_class": "correct" if grade != "incorrect" else "hallucination", "error_evidence": "evidence <x>",
            "crag_grade": grade,
        })
    store.finish_run(run_id, status="complete", golden_hash="g")
    return store, run_id


def test_everything_is_escaped(tmp_path) -> None:
    store, run_id = _small_store(tmp_path / "small.db")
    try:
        html = render_report(store, run_id)
    finally:
        store.close()
    # The page's own script tags only: the hostile strings are data (compressed, base64), never markup.
    assert _only_the_pages_scripts(html)
    assert "<img" not in html and "alert(" not in html
    for raw in ("<i>one</i>", "<em>x</em>", "<b>tag</b>", "<evil>", "<u>", "<ok>", "<x>"):
        assert raw not in html
    page = _parse(html)
    assert page.find("svg", id="risk-coverage") and len(page.find("circle", class_="pt")) == 3
    data = embedded_items(html)
    assert data["n"] == 3 and sorted(data["rows"]["id"]) == ["q1", "q2", "q3"]
    assert data["rows"]["id"][0] == "q2"  # the hallucination first
    assert 'What about <script>alert("x")</script>?' in data["rows"]["question"]  # the question as asked
    assert {data["sources"][chunk[3]] for detail in data["detail"] for chunk in detail["chunks"]} == {"provenance", "unjudged"}
    assert ["d#1", "d", "chunk text </td></tr><script>bad()</script>"] in data["chunks"]  # stored once for the three items
    assert len(data["chunks"]) == 2


def test_risk_coverage_plot_geometry() -> None:
    pairs = {"a": (0.9, True), "b": (0.8, False), "c": (0.8, True), "d": (0.6, True), "e": (0.3, False)}
    plot = risk_coverage_plot(pairs)
    points = plot["curve"]["points"]
    assert [round(p["coverage"], 3) for p in points] == [0.2, 0.6, 0.8, 1.0]  # tied confidences enter together
    assert [round(p["risk"], 3) for p in points] == [0.0, 0.333, 0.25, 0.4]
    xs = [p["cx"] for p in points]
    assert xs == sorted(xs) and plot["x0"] < xs[0] and xs[-1] == plot["x1"]
    assert risk_coverage_plot({}) is None


@pytest.mark.slow
def test_cli_report(example_runs, tmp_path, capsys) -> None:
    db, baseline, candidate = example_runs
    out = tmp_path / "out" / "report.html"
    assert crucible_main(["report", candidate[:12], "--against", baseline, "-o", str(out), "--db", str(db)]) == 0
    assert f"wrote the report of run {candidate}" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and 'id="risk-coverage"' in html and 'id="comparison"' in html
    assert crucible_main(["report", "nope", "-o", str(out), "--db", str(db)]) == 2
    assert "no run matches 'nope'" in capsys.readouterr().err
    assert crucible_main(["report", "latest", "--against", str(tmp_path / "missing.json"), "-o", str(out), "--db", str(db)]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_cli_report_against_a_run_and_its_export_on_a_small_store(tmp_path, capsys) -> None:
    """`crucible report --against` without the example project's runs (the two tests above use them: slow)."""
    db = tmp_path / "small.db"
    _small_store(db)[0].close()
    store, candidate = _small_store(db)
    try:
        [baseline] = [run["id"] for run in store.list_runs() if run["id"] != candidate]
        export = tmp_path / "baseline.json"
        export.write_text(json.dumps(store.export_run(baseline)), encoding="utf-8")
    finally:
        store.close()
    for ref in (baseline, str(export)):
        out = tmp_path / "report.html"
        # 3 paired items: the page shows the comparison, and the gate refuses to pass on so few (exit 3).
        assert crucible_main(["report", candidate, "--against", ref, "-o", str(out), "--db", str(db)]) == 3
        assert f"wrote the report of run {candidate} against {ref}" in capsys.readouterr().out
        html = out.read_text(encoding="utf-8")
        assert 'id="comparison"' in html and baseline in html and html.count('class="ci"') == 3


# -- a real browser ---------------------------------------------------------------------------
def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of raw pixel bytes) of an 8-bit RGB/RGBA PNG, without Pillow."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                corner = previous[i - bpp] if i >= bpp else 0
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(row[i:i + 3]) for row in rows for i in range(0, stride, bpp)]


@pytest.mark.slow
def test_report_in_a_real_browser(example_html, tmp_path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y --no-install-recommends chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed (pip install playwright)")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests, errors = [], []
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(example_html.as_uri())
            page.wait_for_selector("#items-table[data-ready]", state="attached")  # the items decoded and a page of rows drawn

            # Nothing but the file itself is loaded, and nothing fails.
            assert all(url.startswith(("file:", "data:")) for url in requests), requests
            assert errors == []

            svg = page.locator("#risk-coverage")
            box = svg.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 100
            curve = page.locator("#risk-coverage path.curve")
            assert curve.evaluate("path => path.getTotalLength()") > 100
            assert curve.evaluate("path => path.getAttribute('d').split(/[ML]/).filter(Boolean).length") >= 4
            assert page.locator("#risk-coverage circle.pt").count() >= 2
            curve_box = curve.bounding_box()
            assert curve_box["width"] > 50

            # An item opens to its retrieved chunks: a click anywhere on its row (here on its question) opens
            # its details, and the row below it shows them.
            group = page.locator("#items-table > tbody").first
            first, chunks = group.locator("details.item"), group.locator("table.chunks")
            assert not chunks.is_visible()
            group.locator("td.q").scroll_into_view_if_needed()
            question = group.locator("td.q").bounding_box()
            page.mouse.click(question["x"] + question["width"] / 2, question["y"] + question["height"] / 2)
            assert first.evaluate("details => details.open") is True
            assert chunks.is_visible()
            assert chunks.locator("tr").count() >= 2
            first.locator("summary").click()  # and the item's id closes it
            assert first.evaluate("details => details.open") is False and not chunks.is_visible()
            assert page.locator("details.item").count() == page.locator("details.item[data-item]").count() > 0

            # The comparison's intervals are drawn.
            assert page.locator("svg.ci").first.bounding_box()["width"] > 0

            # The guardrail eval: each rate's Wilson interval is drawn, a blocked attack says by which layer.
            wilson = page.locator("#guardrails svg.wilson")
            assert wilson.count() >= 2 and wilson.first.bounding_box()["width"] > 100
            page.locator("#guardrails").screenshot(path=str(tmp_path / "guardrails.png"))
            blocked = page.locator("#items-table > tbody[data-blocked]").first  # its drill-down is built when it opens
            blocked.locator("details.item").evaluate("details => { details.open = true; }")
            assert blocked.locator("[data-blocked]").inner_text().startswith("blocked by ")

            # Screenshots: the plot is not one flat colour, the page is not blank.
            svg_png = svg.screenshot(path=str(tmp_path / "risk-coverage.png"))
            page_png = tmp_path / "report.png"
            page.screenshot(path=str(page_png), full_page=True)
        finally:
            browser.close()

    width, height, pixels = _png_pixels(svg_png)
    assert width > 100 and height > 100
    colours = set(pixels)
    assert len(colours) >= 3, colours  # background, grid/axes, the curve
    accent = [p for p in pixels if p[2] > 150 and p[0] < 120]  # the blue curve and its points
    assert len(accent) > 100
    assert page_png.stat().st_size > 20_000


@pytest.mark.slow
def test_the_plugin_writes_the_report_at_session_end(tmp_path) -> None:
    pytest.importorskip("bm25s", reason="the example project needs the example extra")
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "example_project"
    report = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "pytest", str(example), "-q", "-p", "no:cacheprovider", "--crucible-mode=component",
                           f"--crucible-db={tmp_path / 'e.db'}", f"--crucible-html={report}"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    html = report.read_text()
    assert embedded_items(html)["n"] >= 40 and "crucible run" in html


@pytest.mark.slow
def test_conversations_read_as_chat_transcripts_in_a_real_browser(example_html, tmp_path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y --no-install-recommends chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed (pip install playwright)")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(example_html.as_uri())
            assert errors == []

            # The example's four golden conversations, the first open, the others closed until clicked.
            section = page.locator("#conversations")
            assert section.locator("h2").inner_text() == "Conversations (4)"
            conversations = section.locator("details.conversation")
            assert conversations.count() == 4
            opened = conversations.first
            assert opened.evaluate("details => details.open") is True
            closed = conversations.nth(1)
            turn = closed.locator("li.turn").first
            assert not turn.is_visible()
            closed.locator("summary").click()
            assert closed.evaluate("details => details.open") is True and turn.is_visible()

            # Each turn: the user's question, then the pipeline's answer indented below it, with the grade and the
            # retrieved ids; the turns in order, every bubble inside the window.
            ride = section.locator("details[data-conversation='chat-ride-pass']")
            ride.evaluate("details => { details.open = true; }")
            turns = ride.locator("li.turn")
            assert turns.count() == 3
            assert [turns.nth(i).get_attribute("data-turn-item") for i in range(3)] == [
                "chat-ride-pass:t1", "chat-ride-pass:t2", "chat-ride-pass:t3"]
            first = turns.first
            assert "What does a Ride Pass for the Vela E3 cost per month?" in first.locator(".bubble.user").inner_text()
            user, answer = first.locator(".bubble.user").bounding_box(), first.locator(".bubble.assistant").bounding_box()
            assert answer["y"] >= user["y"] + user["height"] - 0.5 and answer["x"] > user["x"]
            assert first.locator(".grade").inner_text() in ("perfect", "acceptable", "missing", "incorrect")
            assert any("sub-ride-pass" in ids for ids in ride.locator(".retrieved").all_inner_texts())
            assert first.locator(".bubble.written").inner_text().startswith("the reply the golden file writes")
            tops = [turns.nth(i).bounding_box()["y"] for i in range(3)]
            assert tops == sorted(tops)
            for bubble in ride.locator(".bubble").all():
                box = bubble.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= 1280 + 0.5
                assert bubble.evaluate("node => node.scrollWidth <= node.clientWidth + 1")
            # The conversation's own metrics stand in its summary line (knowledge retention: its answered later turns judged).
            badges = ride.locator("summary [data-metric]")
            assert [badges.nth(i).get_attribute("data-metric") for i in range(badges.count())] == ["conversationSuccess",
                                                                                                  "turnsToFirstFailure",
                                                                                                  "knowledgeRetention"]
            section.screenshot(path=str(tmp_path / "conversations.png"))
        finally:
            browser.close()


@pytest.mark.slow
def test_searching_a_long_run_finds_an_item_far_down_and_opens_it_in_a_real_browser(tmp_path) -> None:
    """250 items, 100 rows a page: the last item recorded is not drawn at first; a search for it finds it,
    opening it builds its drill-down, and its hostile strings stay text (no alert, no injected element)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y --no-install-recommends chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright client is not installed (pip install playwright)")
    store = Store.open(tmp_path / "long.db")
    run_id = store.start_run(config_hash="c" * 64, params={}, resolved={"retrievalLimit": 10}, mode="system", outcome_mode="record")
    evil = '<img src=x onerror="window.pwned=1"> "quoted" <script>window.pwned=2</script>'
    store.record_scores(run_id, [{
        "item_id": f"q{i:03d}", "question": f"Question {i}?" if i != 240 else f"Needle {evil}?",
        "item": {"id": f"q{i:03d}", "question": "q"}, "answer": f"answer {i}" if i != 240 else f"Answer {evil}",
        "retrieved": [{"chunk_id": f"d#{i}", "doc_id": "d", "text": f"chunk {i} {evil if i == 240 else ''}", "score": 1.0}],
        "outcome": "passed", "metrics": {"ndcgAt10": 0.5}} for i in range(250)])
    store.finish_run(run_id, status="complete", golden_hash="g")
    try:
        page_file = write_report(tmp_path / "long.html", render_report(store, run_id))
    finally:
        store.close()

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests, errors, dialogs = [], [], []
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(page_file.as_uri())
            page.wait_for_selector("#items-table[data-ready]", state="attached")
            assert page.locator("#items-table details.item").count() == 100
            assert page.locator("details#item-q240").count() == 0
            assert page.locator("#items-status").inner_text() == "items 1–100 of 250"

            page.fill("#items-search", "needle")
            page.wait_for_selector("details#item-q240")
            assert page.locator("#items-table details.item").count() == 1
            assert "1 matching (250 in the run)" in page.locator("#items-status").inner_text()
            group = page.locator("#items-table > tbody", has=page.locator("details#item-q240"))
            assert group.locator("td.q").inner_text() == f"Needle {evil}?"
            group.locator("details.item > summary").click()
            assert group.locator("details.item").evaluate("details => details.open") is True
            assert group.locator("table.chunks").is_visible()
            assert group.locator("div.answer").inner_text() == f"Answer {evil}"
            assert group.locator("td.excerpt").inner_text().strip() == f"chunk 240 {evil}"
            assert group.locator("tr.more img, tr.more script, td.q img").count() == 0  # text, never markup
            assert page.evaluate("() => window.pwned") is None and dialogs == []

            # The answer is searched too; paging walks the whole list.
            page.fill("#items-search", "answer 249")  # in no id or question: only q249's answer holds it
            page.wait_for_selector("details#item-q249")
            assert page.locator("#items-table details.item").count() == 1
            page.fill("#items-search", "")
            page.wait_for_function("() => document.querySelectorAll('#items-table details.item').length === 100")
            page.click("#items-next")
            page.click("#items-next")
            assert page.locator("#items-status").inner_text() == "items 201–250 of 250"
            assert page.locator("details#item-q240").count() == 1
            assert errors == [] and all(url.startswith(("file:", "data:")) for url in requests), (errors, requests)
        finally:
            browser.close()
