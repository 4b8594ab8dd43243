"""Generated documentation: the configuration reference, from the definitions themselves.

``docs/configuration.md`` is the output of :func:`render`: every ``--crucible-*`` option
and ``crucible_*`` ini key comes from the plugin's own ``pytest_addoption`` (called here
with a recorder standing in for pytest's parser), and every pipeline config key from
:mod:`pytest_crucible.config`. The embedded JSON Schema of ``docs/golden-format.md``
comes from :func:`pytest_crucible.golden_set.schema.golden_json_schema`. Regenerate both with
``python scripts/gen-docs.py``; the test suite fails when a committed file differs.

Only :func:`plugin_definitions` imports the plugin module (and with it pytest).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pytest

REGENERATE = "python scripts/gen-docs.py"
SCHEMA_BEGIN = "<!-- BEGIN generated: crucible schema golden -->"
SCHEMA_END = "<!-- END generated: crucible schema golden -->"

# What the plugin itself does with a pipeline config key; the pipeline decides what the
# others mean. A key added to config._KNOWN_TYPES without an entry here fails render().
CONFIG_KEY_HELP: dict[str, str] = {
    "retrieval": "The retrieval settings below, as one object.",
    "retrieval.rerank": "Turn a second-stage reranker on. Passed to your pipeline; the plugin does not read it.",
    "retrieval.graphFusion": "Fuse graph (entity) retrieval into the candidates. Passed to your pipeline.",
    "retrieval.understanding": "Rewrite or classify the query before retrieval. Passed to your pipeline.",
    "retrieval.tokenBudget": "Context tokens the answer step may use. The plugin uses it to estimate the judge's cost "
                             "before a paid run (`--crucible-max-cost`).",
    "retrieval.candidatePool": "Candidates fetched before reranking. Passed to your pipeline.",
    "policyMode": "Answer policy (e.g. when to abstain). Passed to your pipeline.",
    "promptVersion": "Prompt template version of the answer step. Passed to your pipeline.",
    "retrievalLimit": "Chunks the pipeline returns. Passed to your pipeline. Not the K of the @K metrics: that is "
                      "the ruler's cutoff, ini `crucible_k` (default 10), so that changing retrievalLimit changes the "
                      "system and never the ruler.",
    "chatModelSlot": "Which chat model the pipeline answers with. Also the default of the run's `model` label.",
}


@dataclass
class Option:
    names: tuple[str, ...]
    attrs: dict[str, Any]

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def dest(self) -> str:
        return self.attrs.get("dest") or self.name.lstrip("-").replace("-", "_")


@dataclass
class IniKey:
    name: str
    help: str
    type: str | None
    default: Any


@dataclass
class _RecordingParser:
    """Stands in for pytest's ``Parser``: records what ``pytest_addoption`` defines."""

    options: list[Option] = field(default_factory=list)
    ini: list[IniKey] = field(default_factory=list)

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> _RecordingParser:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.options.append(Option(names, attrs))

    def addini(self, name: str, help: str, type: str | None = None, default: Any = None, **_: Any) -> None:
        self.ini.append(IniKey(name, help, type, default))


def plugin_definitions() -> tuple[list[Option], list[IniKey]]:
    """The options and ini keys the plugin defines, in definition order."""
    from . import plugin

    parser = _RecordingParser()
    plugin.pytest_addoption(cast("pytest.Parser", parser))  # duck-typed: the hook calls only what it records
    return parser.options, parser.ini


def _cell(text: str) -> str:
    """Text made safe for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _help(text: str) -> str:
    return _cell(text.replace("%%", "%"))


def _option_form(option: Option) -> str:
    attrs = option.attrs
    if attrs.get("action") in ("store_true", "store_false"):
        return option.name
    if attrs.get("choices"):
        return f"{option.name}={'|'.join(map(str, attrs['choices']))}"
    return f"{option.name}={attrs.get('metavar') or option.dest.upper()}"


def _option_default(option: Option, ini_names: set[str]) -> str:
    attrs = option.attrs
    default = attrs.get("default")
    if attrs.get("action") == "store_true":
        return "off"
    if attrs.get("action") == "append" and not default:
        return "none"
    if default is None:
        return "the ini key" if option.dest in ini_names else "not set"
    return f"`{default}`"


def _ini_default(key: IniKey) -> str:
    default = key.default
    if isinstance(default, (list, tuple)):
        return "`" + " ".join(map(str, default)) + "`" if default else "none"
    if default in (None, ""):
        return "not set"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    return f"`{default}`"


def _config_type(types: tuple[type, ...]) -> str:
    names = {dict: "object", bool: "boolean", int: "integer", str: "string", float: "number"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _config_default(dotted: str) -> str:
    from .config import DEFAULT_CONFIG

    node: Any = DEFAULT_CONFIG
    for part in dotted.split("."):
        node = node[part]
    return "(object)" if isinstance(node, dict) else f"`{json.dumps(node)}`"


def render() -> str:
    """The whole text of docs/configuration.md."""
    from .config import _KNOWN_TYPES, _POSITIVE, DEFAULT_CONFIG, LABELS_KEY, RUBRICS_KEY, STANDARD_LABELS

    options, ini = plugin_definitions()
    ini_names = {key.name for key in ini}
    lines = [
        "# Configuration reference",
        "",
        f"<!-- Generated from the code by `{REGENERATE}`; do not edit by hand. -->",
        "",
        "Three places configure a run: **pytest options** on the command line, **ini keys** in your pytest",
        "configuration file (`pytest.ini`, `pyproject.toml` under `[tool.pytest.ini_options]`, `tox.ini`,",
        "`setup.cfg`), and the **pipeline config**, the JSON file given with `--crucible-config`, which the",
        "runner hands to your pipeline and whose hash identifies the run. An option given on the command line",
        "wins over the ini key of the same name.",
        "",
        "## pytest options",
        "",
        "| option | ini key | default | meaning |",
        "|---|---|---|---|",
    ]
    for option in options:
        ini_key = f"`{option.dest}`" if option.dest in ini_names else ""
        lines.append(f"| `{_cell(_option_form(option))}` | {ini_key} | {_option_default(option, ini_names)} | "
                     f"{_help(option.attrs.get('help', ''))} |")
    repeatable = ", ".join(f"`{option.name}`" for option in options if option.attrs.get("action") == "append")
    lines += [
        "",
        "\"the ini key\": when the option is not given, the ini key of the same name decides, and its own",
        "default applies when that is not set either (table below).",
        f"Repeatable options: {repeatable}.",
        "",
        "## ini keys",
        "",
        "| ini key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for key in ini:
        shown_type = {"args": "list of strings", "linelist": "list of lines", "bool": "boolean"}.get(key.type or "", "string")
        lines.append(f"| `{key.name}` | {shown_type} | {_ini_default(key)} | {_help(key.help)} |")
    lines += [
        "",
        "Example, in `pytest.ini`:",
        "",
        "```ini",
        "[pytest]",
        "crucible_config = configs/baseline.json",
        "crucible_golden_files = golden_*.jsonl",
        "crucible_outcome = record",
        "```",
        "",
        "## Pipeline config keys",
        "",
        "`--crucible-config` takes one JSON object. Missing keys take their defaults, so `{}` is the default",
        "setup, and the **configHash** (sha256 of the canonical JSON of the resolved config) is the same for",
        "`{}` and for a file that spells out a default. Keys the plugin does not know are your own: they are",
        "passed through to the pipeline untouched and are part of the hash. A known key of the wrong type is a",
        "usage error naming the file, the line and the key.",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for dotted, types in _KNOWN_TYPES.items():
        if dotted not in CONFIG_KEY_HELP:
            raise KeyError(f"config key {dotted} has no description: add it to CONFIG_KEY_HELP in {__name__}")
        kind = "positive integer" if dotted in _POSITIVE else _config_type(types)
        lines.append(f"| `{dotted}` | {kind} | {_config_default(dotted)} | {_cell(CONFIG_KEY_HELP[dotted])} |")
    labels = ", ".join(f"`{name}`" for name in STANDARD_LABELS)
    lines += [
        "",
        "The defaults, as one file:",
        "",
        "```json",
        json.dumps(DEFAULT_CONFIG, indent=2),
        "```",
        "",
        "The pipeline receives the resolved config as a dict that records which keys it read. When the",
        "session ends, every key whose value differs from its default but was never read is reported",
        "(`config key retrieval.rerank=true was never read by the pipeline: is the config applied?`): a",
        "config the pipeline does not apply is a label, not an experiment. It is a `CrucibleWarning` in",
        "pytest's warnings summary, pointing at the key in the config file, so",
        "`-W error::pytest_crucible.CrucibleWarning` (or the ini line",
        "`filterwarnings = error::pytest_crucible.CrucibleWarning`) turns it into an error, and",
        "`crucible_strict_config = true` makes it one without a filter. Either way the session exits 4",
        "(usage error) and the crucible section names the keys, with a HINT.",
        "",
        f"### `{LABELS_KEY}`",
        "",
        f"A top-level `\"{LABELS_KEY}\"` object tags the run without changing what it is: it is removed from",
        "the resolved config, so it is never part of the configHash and the pipeline never sees it. Values",
        f"are strings (numbers are turned into strings). Every run carries the labels {labels}:",
        "by default `model` is the config's `chatModelSlot`, `collection` the rootdir's name and `mode`",
        "`default`. The config's labels override those defaults, and `--crucible-label KEY=VALUE`",
        "overrides both. `crucible runs --json` shows them.",
        "",
        "```json",
        '{"retrieval": {"rerank": true}, "labels": {"model": "claude-haiku", "collection": "helpdesk", "mode": "hybrid"}}',
        "```",
        "",
        f"### `{RUBRICS_KEY}`",
        "",
        f"A top-level `\"{RUBRICS_KEY}\"` list declares rubric metrics: metrics a model judge grades against",
        "criteria you write (details: [custom-metrics.md](custom-metrics.md)). Like the labels, it is removed",
        "from the resolved config: it is never part of the configHash and the pipeline never sees it. A",
        "rubric says how the run is measured, not how the pipeline is set up; a comparison of two runs",
        "whose rubric text differs is refused instead. Each rubric has a `name`, its `criteria`, and",
        "optionally a `scale` (`\"pass_fail\"`, the default, or `[LOW, HIGH]` integers), `steps` (a list",
        "of evaluation steps) and `appliesTo` (`kind`, `tags` and `questionType` lists). A bad rubric is a",
        "usage error naming the file, the line and the field. The ini key `crucible_rubrics` names a JSON",
        "file of more rubrics; a name must not be declared in both.",
        "",
        "```json",
        '{"rubrics": [{"name": "politeness", "criteria": "The answer is courteous to the customer.", "scale": [1, 5]}]}',
        "```",
        "",
        "## Environment",
        "",
        "| variable | effect |",
        "|---|---|",
        "| `ANTHROPIC_API_KEY` | the key of `--crucible-judge=anthropic` (and of `auto`, which then picks Claude); it never chooses the judge by itself; read by the `anthropic` SDK, never stored or printed |",
        "| `ANTHROPIC_BASE_URL` | where the `anthropic` SDK sends requests (a proxy, or a test server) |",
        "| `OPENAI_API_KEY` | with `--crucible-judge=openai`, the key of the OpenAI-compatible server; read by the `openai` "
        "SDK, never stored or printed (a local server that checks none takes any value) |",
        "| `OPENAI_BASE_URL` | where the `openai` SDK sends requests: unset for OpenAI, e.g. `http://127.0.0.1:8000/v1` "
        "for a local vLLM server (docs/judges.md) |",
        "| `CRUCIBLE_WORKSPACE` | the workspace the `crucible` command reads when `--workspace` is not given (default: the "
        "project's `crucible_workspace` ini value, else its directory's name); the plugin itself uses "
        "`--crucible-workspace` and the ini key |",
        "| `CRUCIBLE_DB` | the results database when no option names one (the plugin's `--crucible-db`, the `crucible` "
        "command's `--db`): a SQLite file, or a PostgreSQL URL `postgresql://USER:PASSWORD@HOST:PORT/DB` (the `postgres` "
        "extra). Meant for CI secrets: a password never reaches a run, a log, junit or the HTML report (`***`) |",
        "| `CRUCIBLE_FILE_MODE` | one mode for every file crucible creates, whatever the umask: the database (SQLite "
        "gives its `-wal` and `-shm` the same), the HTML report, junit XML, the CLI's exports. Unset, the database is "
        "`0600` (owner only: it holds every run, the ledgers and the keys' hashes) and the artifacts get what the umask "
        "leaves of `0666`, never writable by the group or others (`0644` under umask 022), so a CI artifact step "
        "running as another user can read them. A folder crucible creates gets the matching mode (`0700`, `0755`). "
        "Octal, owner read and write, no execute bits; anything else is a usage error |",
        "| `GITHUB_ACTIONS`, `GITHUB_STEP_SUMMARY` | set by GitHub Actions: the session appends its verdict, as Markdown, to "
        "the step summary file and prints workflow commands (annotations) for regressions, refusals and faults "
        "(`crucible_step_summary = false` turns both off) |",
        "| `GITHUB_WORKSPACE` | set by GitHub Actions: a failed item's annotation names its golden file relative to "
        "this checkout, so GitHub shows it on that file's line |",
        "| `MLFLOW_TRACKING_URI`, `MLFLOW_EXPERIMENT_NAME` | with `--crucible-mlflow`, the tracking server and the "
        "experiment each run is logged to (MLflow's own variables; the experiment defaults to `crucible/WORKSPACE`) |",
        "",
    ]
    return "\n".join(lines)


def golden_schema_block() -> str:
    """The JSON Schema of a golden item as embedded in docs/golden-format.md (markers included)."""
    from .golden_set.schema import golden_json_schema

    return "\n".join([SCHEMA_BEGIN, "```json", json.dumps(golden_json_schema(), indent=2), "```", SCHEMA_END])


def replace_schema_block(text: str) -> str:
    """``text`` with its generated schema block replaced by the current one."""
    start, end = text.index(SCHEMA_BEGIN), text.index(SCHEMA_END) + len(SCHEMA_END)
    return text[:start] + golden_schema_block() + text[end:]


def write_docs(docs_dir: str | Path) -> list[Path]:
    """Regenerate the generated documentation under ``docs_dir``; returns the files that changed."""
    docs = Path(docs_dir)
    changed = []
    targets = {
        docs / "configuration.md": lambda old: render(),
        docs / "golden-format.md": replace_schema_block,
    }
    for path, regenerate in targets.items():
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        new = regenerate(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed
