"""The documentation cannot drift from the code: generated parts equal their generator, the
options documented are the options defined, the CI recipe passes what this repository's CI
passes, the quickstart's commands still print what the page shows, and every link resolves."""

from __future__ import annotations

import difflib
import json
import re
import shlex
from pathlib import Path

import pytest
from helpers import crucible_cli

from pytest_crucible import reference
from pytest_crucible.cli import main as crucible_main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
REGENERATE = f"regenerate with `{reference.REGENERATE}` (from the repository root, in the project's venv)"


def test_configuration_reference_is_generated_from_the_code() -> None:
    committed = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert committed == reference.render(), f"docs/configuration.md is out of date: {REGENERATE}"


def test_every_option_and_ini_key_is_in_the_configuration_reference(pytester: pytest.Pytester) -> None:
    """Against pytest's own --help, so an option defined outside pytest_addoption is caught too."""
    help_text = pytester.runpytest("--help").stdout.str()
    options = sorted(set(re.findall(r"--crucible-[a-z-]+", help_text)))
    ini_keys = sorted(set(re.findall(r"^  (crucible_[a-z_]+) ", help_text, flags=re.M)))
    assert len(options) >= 19 and len(ini_keys) >= 8
    doc = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [name for name in options + ini_keys if f"`{name}" not in doc]
    assert missing == [], f"docs/configuration.md lacks {missing}: {REGENERATE}"
    documented = set(re.findall(r"`(--crucible-[a-z-]+)", doc))
    assert documented <= set(options), f"docs/configuration.md documents options that do not exist: {documented - set(options)}"


def test_every_pipeline_config_key_is_described() -> None:
    from pytest_crucible.config import _KNOWN_TYPES

    doc = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert [key for key in _KNOWN_TYPES if f"| `{key}` |" not in doc] == []


def test_every_environment_variable_read_is_in_the_configuration_reference() -> None:
    source = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "src" / "pytest_crucible").rglob("*.py"))
    names = set(re.findall(r"environ(?:\.get)?\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']", source))
    names |= set(re.findall(r"^ENV_VAR\s*=\s*[\"']([A-Z][A-Z0-9_]+)[\"']", source, flags=re.M))
    doc = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert "ANTHROPIC_API_KEY" in names
    assert sorted(name for name in names if f"`{name}`" not in doc) == [], f"add them to the Environment table: {REGENERATE}"


def test_the_readme_points_at_the_reference_instead_of_a_table() -> None:
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## Options and ini keys"):]
    section = section[:section.index("\n## ", 1)]
    assert "docs/configuration.md" in section
    assert "| option | ini key |" not in section  # the hand-written table is gone for good


def test_the_embedded_golden_schema_is_the_commands_output(capsys) -> None:
    assert crucible_main(["schema", "golden"]) == 0
    printed = json.loads(capsys.readouterr().out)
    doc = (DOCS / "golden-format.md").read_text(encoding="utf-8")
    block = doc[doc.index(reference.SCHEMA_BEGIN):doc.index(reference.SCHEMA_END)]
    embedded = json.loads(block[block.index("```json") + len("```json"):block.rindex("```")])
    assert embedded == printed, f"the schema in docs/golden-format.md differs from `crucible schema golden`: {REGENERATE}"
    assert doc == reference.replace_schema_block(doc), f"docs/golden-format.md's schema block is not formatted as generated: {REGENERATE}"


def test_every_golden_item_field_is_documented() -> None:
    from pytest_crucible.golden_set.schema import Assertion, Attack, Citation, Concept, GoldenItem

    doc = (DOCS / "golden-format.md").read_text(encoding="utf-8")
    missing = [f"{model.__name__}.{info.alias or name}"
               for model in (GoldenItem, Assertion, Citation, Concept, Attack)
               for name, info in model.model_fields.items()
               if f"`{info.alias or name}`" not in doc and f"`attack.{info.alias or name}`" not in doc]
    assert missing == [], f"fields not described in docs/golden-format.md: {missing}"


# -- the CI recipe is this repository's CI ---------------------------------------------------------
def _pytest_commands(text: str) -> list[str]:
    """Every `pytest example_project ...` command of a page, continuation lines joined
    (shell backslashes, YAML folded scalars and list items)."""
    commands, current, lines = [], None, text.splitlines()
    for line in lines:
        stripped = line.strip().removeprefix("- ").removeprefix("run: ").strip()
        if current is not None and (current.endswith("\\") or stripped.startswith("--")):
            current = current.rstrip("\\").rstrip() + " " + stripped
            continue
        if current is not None:
            commands.append(current)
            current = None
        if stripped.startswith("pytest example_project"):
            current = stripped
    if current is not None:
        commands.append(current)
    return commands


def _options(command: str) -> dict[str, str]:
    return dict(re.findall(r"(--[a-z][a-z-]*)(?:=(\S+))?", command))


def test_the_ci_recipe_passes_what_this_repositorys_ci_passes() -> None:
    script = (ROOT / "scripts" / "run-example.sh").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/run-example.sh" in ci
    ci_options = set(re.findall(r"--crucible-[a-z-]+", script + ci))
    ci_config = re.search(r"^config=(\S+)$", script, flags=re.M).group(1)
    assert "pytest example_project" in script and "--crucible-config" in ci_options

    page = (DOCS / "ci.md").read_text(encoding="utf-8")
    commands = _pytest_commands(page)
    recipes = [c for c in commands if "--crucible-baseline" in c]
    assert len(recipes) >= 3, f"expected the every-build, GitHub and GitLab commands in docs/ci.md, found {commands}"
    defined = {option.name for option in reference.plugin_definitions()[0]}
    for command in commands:
        options = _options(command)
        crucible_options = {name for name in options if name.startswith("--crucible-")}
        assert crucible_options <= defined, f"docs/ci.md uses options that do not exist: {crucible_options - defined}"
        assert options["--crucible-config"] == ci_config, f"docs/ci.md runs another config than CI ({ci_config}): {command}"
    for command in recipes:
        crucible_options = {name for name in _options(command) if name.startswith("--crucible-")}
        assert ci_options <= crucible_options, (
            f"this repository's CI passes {sorted(ci_options - crucible_options)} (.ci/run, scripts/run-example.sh), "
            f"docs/ci.md does not: {command}")
    # The same options everywhere, besides where a recipe also writes the verdict for a pull request's comment.
    shapes = {tuple(sorted(set(_options(command)) - {"--crucible-markdown"})) for command in recipes}
    assert len(shapes) == 1, f"the recipes of docs/ci.md pass different options: {shapes}"


# -- the quickstart still works, and prints what it shows ------------------------------------------
QUICKSTART_DIR = "/tmp/qs"  # where the page's commands were run: its paths, and the workspace "qs"
RUN_ID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")  # a ULID


def _quickstart_files() -> dict[str, str]:
    page = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- file: (\S+) -->\n```[a-z]*\n(.*?)```", page, flags=re.S)
    return dict(blocks)


def _transcripts(page: str) -> list[tuple[str, list[str]]]:
    """Every `$ command` of the page's console blocks with the lines shown under it, in page order."""
    transcripts: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", page, flags=re.S):
        assert block.startswith("$ "), f"a console block of docs/quickstart.md does not start with a command: {block[:60]!r}"
        for line in block.splitlines():
            if line.startswith("$ "):
                transcripts.append((line[2:], []))
            else:
                transcripts[-1][1].append(line)
    return transcripts


def _normalised(lines: list[str], run_ids: list[str], directory: str) -> list[str]:
    """What differs per machine and per run, made equal: the project's directory, run ids (the n-th run of the
    session, oldest first: ULIDs sort by time), timings, the Python and plugin versions in pytest's header."""
    names = {run_id: f"<run {number}>" for number, run_id in enumerate(sorted(run_ids), start=1)}
    out = []
    for line in lines:
        line = RUN_ID.sub(lambda match: names[match[0]], line.replace(directory, QUICKSTART_DIR))
        line = re.sub(r" in \d+\.\d+s( \(\d+:\d\d:\d\d\))?", " in <time>", line)
        line = re.sub(r"^([=_])\1+ (.*) \1+$", r"\1 \2 \1", line)  # the rule's width follows the timing's
        line = re.sub(r"^platform .*", "platform <versions>", line)
        if "crucible-" in line:
            line = re.sub(r"^plugins: .*", "plugins: <..., crucible, ...>", line)
        out.append(line)
    return out


def _fits(shown: list[str], printed: list[str]) -> bool:
    """Whether the lines shown are the lines printed, a line `...` standing for any lines (none included)."""
    parts: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == "...":
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) == 1:
        return shown == printed
    first, *middle, last = parts
    start, end = len(first), len(printed) - len(last)
    if printed[:start] != first or end < start or printed[end:] != last:
        return False
    for part in middle:
        at = next((i for i in range(start, end - len(part) + 1) if printed[i:i + len(part)] == part), None)
        if at is None:
            return False
        start = at + len(part)
    return True


def test_the_quickstart_runs_as_written_and_prints_what_it_shows(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's files, then every `$ command` it shows, in its order, in a directory named as the page's: each
    command's output (stdout, then stderr) must be the lines the page shows under it, `...` for lines left out."""
    # The page shows the offline judge, on a terminal: CI (pytest prints whole failure lines under CI) and the
    # environment's own database or workspace would change what is printed.
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CRUCIBLE_WORKSPACE", "CRUCIBLE_DB", "CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # the width the page's output was printed at
    project = pytester.path / "qs"
    files = _quickstart_files()
    assert {"conftest.py", "golden_shop.jsonl", "configs/baseline.json", "configs/rerank.json"} <= set(files)
    for name, body in files.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    monkeypatch.chdir(project)
    page = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    transcripts = _transcripts(page)
    assert [command.split()[0] for command, _ in transcripts] == ["pytest", "mkdir", "pytest", "echo", "pytest", "echo",
                                                                  "crucible", "echo"], transcripts

    printed, code = [], 0
    for command, _ in transcripts:
        lines: list[str] = []
        if command == "echo $?":
            lines = [str(code)]
        else:
            for part in command.split(" && "):
                words = shlex.split(part)
                if words[:2] == ["mkdir", "-p"]:
                    for folder in words[2:]:
                        Path(folder).mkdir(parents=True, exist_ok=True)
                    code = 0
                elif words[0] == "pytest":
                    result = pytester.runpytest("-p", "no:randomly", *words[1:])
                    lines, code = lines + result.outlines + result.errlines, int(result.ret)
                elif words[0] == "crucible":
                    result = crucible_cli(*words[1:])
                    lines, code = lines + result.outlines + result.errlines, result.ret
                else:
                    pytest.fail(f"docs/quickstart.md shows `{part}`, which this test does not know how to run")
                if code != 0:
                    break
        printed.append(lines)

    shown_ids = sorted(set(RUN_ID.findall("\n".join("\n".join(lines) for _, lines in transcripts))))
    printed_ids = sorted(set(RUN_ID.findall("\n".join("\n".join(lines) for lines in printed))))
    for (command, shown), lines in zip(transcripts, printed):
        shown_n = _normalised(shown, shown_ids, QUICKSTART_DIR)
        printed_n = _normalised(lines, printed_ids, str(project))
        diff = "\n".join(difflib.unified_diff(shown_n, printed_n, "shown", "printed", lineterm="", n=2))
        assert _fits(shown_n, printed_n), (
            f"docs/quickstart.md shows an output of `$ {command}` that it does not print (normalised; `...` on the "
            f"page stands for lines left out):\n{diff}")


# -- links -------------------------------------------------------------------------------------------
def test_the_readme_links_every_doc_and_keeps_its_opening() -> None:
    readme = README.read_text(encoding="utf-8")
    assert readme.startswith(
        "# pytest-crucible\n\n```bash\n"
        "bash scripts/run-example.sh    # main job"
    ) and "\nbash scripts/run-tests.sh      # the project's test suite\n```\n" in readme[:400]
    section = readme[readme.index("## Documentation"):]
    unlinked = [path.name for path in sorted(DOCS.glob("*.md")) if f"(docs/{path.name})" not in section]
    assert unlinked == [], f"add these to the README's Documentation section: {unlinked}"


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_exit_code_table_of_ci_md_is_the_codes_the_gate_and_pytest_use() -> None:
    """docs/ci.md's table lists exactly the exit codes a session can end with: pytest's own (0, 1, 2, 4, 5)
    and the gate's (gate.EXIT_CODES: 0 passed, 1 failed, 3 refused)."""
    from pytest_crucible.verdict.gate import EXIT_CODES, FAILED, PASSED, REFUSED

    page = (DOCS / "ci.md").read_text(encoding="utf-8")
    table = page[page.index("Exit codes"):]
    codes = [int(code) for code in re.findall(r"^\| (\d) \|", table[:table.index("\n\n", table.index("| code"))], flags=re.M)]
    assert codes == sorted(set(EXIT_CODES.values()) | {int(pytest.ExitCode.INTERRUPTED), int(pytest.ExitCode.USAGE_ERROR),
                                                         int(pytest.ExitCode.NO_TESTS_COLLECTED)})
    assert (EXIT_CODES[PASSED], EXIT_CODES[FAILED], EXIT_CODES[REFUSED]) == (0, 1, 3)
    rows = dict(re.findall(r"^\| (\d) \| (.*) \|$", table, flags=re.M))
    assert "GATE FAILED" in rows["1"] and "GATE REFUSED" in rows["3"] and "crucible_min_pairs" in rows["3"]


def test_every_doc_names_the_ruler_not_the_pipeline_as_the_k_of_the_at_k_metrics() -> None:
    """The K of recall@K and precision@K is ini crucible_k (the ruler's), never the pipeline's retrievalLimit:
    a page that says otherwise makes a user retrieving 5 read precision@10 as precision@5."""
    from pytest_crucible.defaults import DEFAULT_K

    wrong = re.compile(r"K (?:for|of) the @K metrics is `?retrievalLimit", re.IGNORECASE)
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    assert [page.name for page in pages if wrong.search(page.read_text(encoding="utf-8"))] == []
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"K for the @K metrics is the ruler's, not the pipeline's: ini `crucible_k` (or `--crucible-k`, default {DEFAULT_K})" in readme
