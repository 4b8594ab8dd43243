"""House rules of the package's structure, checked statically (``ast``, no import of the package).

1. SQL lives in ``store/``: no ``.execute*(`` call, no SQL string literal and no ``import sqlite3`` anywhere else.
2. Layering: ``store/`` never imports the statistics' consumers; ``stats/`` imports no I/O or orchestration;
   ``verdict/`` imports no surface (plugin, session, CLI, server, reports): they read its verdict.
3. No import cycle among module-level imports.
4. Only the pytest-facing modules import pytest at module level, and ``cli/`` imports it nowhere.
5. ``plugin.py`` stays small, the package's top level holds only what is cross-cutting (fewer than 15
   modules; a subsystem is a folder), no ``cli/`` or ``store/`` module grows past 400 lines, and
   ``store/__init__.py`` is a facade.
6. docs/architecture.md names every module, and every module it names exists.
7. The offline judge versions are frozen: no module in ``judge/`` imports a private (``_name``) from another
   lexical version module (``judge/lexical.py``, ``judge/lexical_vN.py``, ``judge/lexical_common.py``); what
   versions share is public, documented as frozen, so an edit to it is seen as one to every version.
   And the judge engine and the session's judging ask a judge what the ``Judge`` protocol declares
   (``judge/engine.py``): no ``getattr``/``hasattr`` probing of a judge.

A failure names the module, its file and the line.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import pytest

PACKAGE = "pytest_crucible"
SOURCE = Path(__file__).resolve().parents[1] / "src" / PACKAGE

# A string that starts (after whitespace, any case) with one of these words and a space... (the rule)
SQL_WORD = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA) ", re.IGNORECASE)
# ...and goes on as a statement does: prose such as "create a key with --scope" is not SQL.
SQL_STATEMENT = re.compile(r"""\s*(?:
      SELECT\s | PRAGMA\s
    | INSERT\s+(?:OR\s+\w+\s+)?INTO\s
    | UPDATE\s+(?:OR\s+\w+\s+)?\S+\s+SET\s
    | DELETE\s+FROM\s
    | (?:CREATE|DROP)\s+(?:(?:TEMP|TEMPORARY|UNIQUE|VIRTUAL)\s+)?(?:TABLE|INDEX|TRIGGER|VIEW)\s
    | ALTER\s+TABLE\s
)""", re.IGNORECASE | re.VERBOSE)
EXECUTE_ATTRIBUTES = {"execute", "executescript", "executemany"}
PYTEST_AT_MODULE_LEVEL = {f"{PACKAGE}.plugin", f"{PACKAGE}.options", f"{PACKAGE}.collection", f"{PACKAGE}.warning"}
PLUGIN_MAX_LINES = 350
SESSION_MAX_LINES = 280  # the conductor: the order of events, nothing else (it was 777 lines of seven jobs)
TOP_LEVEL_MAX_MODULES = 14  # fewer than 15: a subsystem of several modules gets a folder
CLI_MODULE_MAX_LINES = 400
STORE_MODULE_MAX_LINES = 400
STORE_MODULES_OVER_BUDGET = {"schema.py"}  # the migration history (see the test)
SURFACES = ("plugin", "session", "collection", "options", "cli", "server", "report")


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. pytest_crucible.store.keys
    path: Path
    tree: ast.Module

    @cached_property
    def nodes(self) -> list[ast.AST]:
        """Every node of the tree, in ``ast.walk`` order: walked once, read by every rule."""
        return list(ast.walk(self.tree))

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"

    @property
    def package(self) -> str:
        """The package a relative import of this module is resolved against."""
        return self.name if self.is_package else self.name.rpartition(".")[0]

    def where(self, line: int) -> str:
        return f"{self.name} ({self.path.relative_to(SOURCE.parent)}:{line})"

    def under(self, subpackage: str) -> bool:
        prefix = f"{PACKAGE}.{subpackage}"
        return self.name == prefix or self.name.startswith(prefix + ".")


@lru_cache(maxsize=1)
def modules() -> dict[str, Module]:
    found = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(SOURCE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def imported_names(module: Module, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted modules an import statement names, relative imports resolved against the module's package.
    ``from X import y`` names ``X.y`` when that is a module of the package, else ``X``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base_parts = module.package.split(".")
        base_parts = base_parts[: len(base_parts) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base for alias in node.names]
    return list(dict.fromkeys(names))


def all_imports(module: Module) -> list[tuple[int, str]]:
    """(line, imported module) of every import of the module, at any level (functions included)."""
    return [(node.lineno, name) for node in module.nodes if isinstance(node, (ast.Import, ast.ImportFrom))
            for name in imported_names(module, node)]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(module: Module) -> list[tuple[int, str]]:
    """(line, imported module) of the imports run when the module is imported: top-level statements,
    inside top-level ``if``/``try``/``with`` blocks too, but not in functions, classes or ``if TYPE_CHECKING:``."""
    found: list[tuple[int, str]] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.extend((node.lineno, name) for name in imported_names(module, node))
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.With):
                visit(node.body)

    visit(module.tree.body)
    return found


def _names_within(name: str, forbidden: str) -> bool:
    return name == forbidden or name.startswith(forbidden + ".")


def is_sql(text: str) -> bool:
    return bool(SQL_WORD.match(text) and SQL_STATEMENT.match(text))


def _docstrings(module: Module) -> set[int]:
    """ids of the docstring nodes (a docstring is prose, not a statement)."""
    ids = set()
    for node in module.nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


# -- 1. SQL lives in store/ ------------------------------------------------------------------------------
def test_sql_lives_only_in_the_store() -> None:
    problems = set()
    for module in modules().values():
        if module.under("store"):
            continue
        docstrings = _docstrings(module)
        # An f-string is checked whole, its constant parts not again.
        docstrings |= {id(part) for node in module.nodes if isinstance(node, ast.JoinedStr) for part in node.values}
        for node in module.nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTE_ATTRIBUTES:
                problems.add(f"{module.where(node.lineno)}: calls .{node.func.attr}(); run SQL through a store function")
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values)
            if text is not None and is_sql(text):
                problems.add(f"{module.where(node.lineno)}: SQL string {text.strip()[:40]!r}; move the statement into store/")
    assert not problems, "SQL outside src/pytest_crucible/store/:\n" + "\n".join(sorted(problems))


def test_only_the_store_imports_the_database_driver() -> None:
    problems = [f"{module.where(line)}: imports {name}; catch store.DatabaseError, or add a store function"
                for module in modules().values() if not module.under("store")
                for line, name in all_imports(module) if _names_within(name, "sqlite3")]
    assert not problems, "sqlite3 imported outside src/pytest_crucible/store/:\n" + "\n".join(problems)


# -- 2. layering ------------------------------------------------------------------------------------------
LAYERS = {
    "store": ("stats", "verdict"),
    "stats": ("store", "verdict", "config", "plugin", "session"),
    "verdict": SURFACES,
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_imports(layer: str) -> None:
    forbidden = [f"{PACKAGE}.{name}" for name in LAYERS[layer]]
    problems = [
        f"{module.where(line)}: imports {name}"
        for module in modules().values() if module.under(layer)
        for line, name in all_imports(module)
        if any(_names_within(name, banned) for banned in forbidden)
    ]
    assert not problems, f"modules under {layer}/ must not import {', '.join(forbidden)}:\n" + "\n".join(problems)


# -- 3. no import cycle -----------------------------------------------------------------------------------
def _module_graph() -> dict[str, dict[str, int]]:
    """module -> {module of the package it imports at module level: line}. Importing ``a.b.c`` runs
    ``a/__init__`` and ``a/b/__init__`` first, so it leads to those packages too, except to the
    importer's own packages (Python has started those before the importer)."""
    known = modules()
    graph: dict[str, dict[str, int]] = {name: {} for name in known}
    for module in known.values():
        for line, name in module_level_imports(module):
            parts = name.split(".")
            for end in range(2, len(parts) + 1):
                target = ".".join(parts[:end])
                own_package = end < len(parts) and module.name.startswith(target + ".")
                if target in known and target != module.name and not own_package:
                    graph[module.name].setdefault(target, line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    cycles = []
    for component in components:
        members, start = set(component), min(component)
        # Shortest way back to the start within the component.
        paths = {start: [start]}
        frontier = [start]
        while frontier:
            following = []
            for node in frontier:
                for target in sorted(graph[node]):
                    if target == start:
                        cycles.append(paths[node] + [start])
                        following = []
                        break
                    if target in members and target not in paths:
                        paths[target] = paths[node] + [target]
                        following.append(target)
                else:
                    continue
                break
            frontier = following
    return cycles


def test_no_import_cycle() -> None:
    import sys

    graph = _module_graph()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        cycles = _cycles(graph)
    finally:
        sys.setrecursionlimit(limit)
    known = modules()
    shown = [" -> ".join(f"{known[a].where(graph[a][b])} imports {b}" for a, b in itertools.pairwise(cycle)) for cycle in cycles]
    assert not cycles, "import cycles among module-level imports:\n" + "\n".join(shown)


# -- 4. pytest stays at the edge --------------------------------------------------------------------------
def test_only_the_pytest_facing_modules_import_pytest_at_module_level() -> None:
    problems = [
        f"{module.where(line)}: imports {name} at module level (import it inside the function that needs it)"
        for module in modules().values() if module.name not in PYTEST_AT_MODULE_LEVEL
        for line, name in module_level_imports(module)
        if _names_within(name, "pytest") or _names_within(name, "_pytest")
    ]
    assert not problems, "only plugin.py, options.py, collection.py and warning.py may import pytest at module level:\n" + "\n".join(problems)


def test_the_cli_never_imports_pytest() -> None:
    """The `crucible` command runs where pytest is not the point (a dashboard host, a CI merge step):
    it calls the pure core, and `crucible ablate` starts pytest as a process of its own."""
    problems = [f"{module.where(line)}: imports {name}"
                for module in modules().values() if module.under("cli")
                for line, name in all_imports(module) if _names_within(name, "pytest") or _names_within(name, "_pytest")]
    assert not problems, "cli/ must not import pytest:\n" + "\n".join(problems)


# -- 5. plugin.py stays small -----------------------------------------------------------------------------
def test_plugin_module_stays_small() -> None:
    module = modules()[f"{PACKAGE}.plugin"]
    lines = len(module.path.read_text(encoding="utf-8").splitlines())
    assert lines <= PLUGIN_MAX_LINES, (f"{module.where(lines)}: plugin.py has {lines} lines, at most {PLUGIN_MAX_LINES}; "
                                       "move code out of the hook module")


def test_the_session_stays_a_conductor() -> None:
    module = modules()[f"{PACKAGE}.session"]
    lines = len(module.path.read_text(encoding="utf-8").splitlines())
    assert lines <= SESSION_MAX_LINES, (f"{module.where(lines)}: session.py has {lines} lines, at most {SESSION_MAX_LINES}; "
                                        "the session keeps the order of events: put the work in evaluation/runner.py, "
                                        "evaluation/judging.py or store/recorder.py")


def test_the_top_level_holds_only_what_is_cross_cutting() -> None:
    top = sorted(path.name for path in SOURCE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MAX_MODULES, (
        f"src/pytest_crucible/ has {len(top)} modules at its top level, at most {TOP_LEVEL_MAX_MODULES}: {', '.join(top)}; "
        "put a subsystem's modules in a folder of their own (docs/architecture.md)")


def test_no_cli_module_grows_past_its_budget() -> None:
    long = [f"{module.where(lines)}: {lines} lines" for module in modules().values() if module.under("cli")
            if (lines := len(module.path.read_text(encoding="utf-8").splitlines())) > CLI_MODULE_MAX_LINES]
    assert not long, f"cli/ modules hold at most {CLI_MODULE_MAX_LINES} lines; split the command group:\n" + "\n".join(long)


def test_no_store_module_grows_past_its_budget() -> None:
    """The store is rooms of one concern each (connection, runs, results, qrels, export, ...): a module that
    outgrows the budget is holding a second concern. ``schema.py`` is the one exception: its body is the
    migration history, one SQL script per schema version, appended to and never edited or reordered."""
    long = [f"{module.where(lines)}: {lines} lines" for module in modules().values()
            if module.under("store") and module.path.name not in STORE_MODULES_OVER_BUDGET
            if (lines := len(module.path.read_text(encoding="utf-8").splitlines())) > STORE_MODULE_MAX_LINES]
    assert not long, (f"store/ modules hold at most {STORE_MODULE_MAX_LINES} lines; move a concern into a module of "
                      "its own (docs/architecture.md's store/ row):\n" + "\n".join(long))
    assert all((SOURCE / "store" / name).is_file() for name in STORE_MODULES_OVER_BUDGET)


def test_the_store_package_is_a_facade() -> None:
    """``store/__init__.py`` only puts the parts of ``Store`` together and re-exports: code lives in its rooms."""
    module = modules()[f"{PACKAGE}.store"]
    defined = [node for node in module.tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert [node.name for node in defined] == ["Store"], f"{module.where(defined[0].lineno)}: define it in a store/ module"
    store_class = defined[0]
    assert isinstance(store_class, ast.ClassDef)
    assert not [node for node in store_class.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))], (
        f"{module.where(store_class.lineno)}: Store's methods belong in the mixin of their concern")


def test_no_subpackage_hides_a_public_name() -> None:
    """Importing ``pytest_crucible.X`` sets the attribute ``X`` on the package: a folder named like a public
    name (``golden``, ``metric``) would replace ``crucible.golden`` for everyone once anything imported it."""
    init = modules()[PACKAGE].tree
    public = next(ast.literal_eval(node.value) for node in init.body
                  if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets))
    children = {name.split(".")[1] for name in modules() if name.count(".") >= 1}
    assert "golden" in public and "metric" in public
    assert not children & set(public), f"modules named like public names of {PACKAGE}: {sorted(children & set(public))}"


# -- 7. the offline judge versions are frozen --------------------------------------------------------------
LEXICAL_VERSION_MODULE = re.compile(rf"^{PACKAGE}\.judge\.lexical(?:_v\d+|_common)?$")


def private_lexical_imports(module: Module, tree: ast.AST | None = None) -> list[str]:
    """Where the module takes a private name of another lexical version module: ``from .lexical import _x``,
    or ``lexical._x`` after ``from . import lexical`` / ``import ....lexical as lexical``."""
    nodes = list(ast.walk(tree)) if tree is not None else module.nodes
    problems: list[str] = []
    aliases: dict[str, str] = {}  # a local name bound to a lexical version module -> that module
    for node in nodes:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for alias in node.names:
            single = ast.ImportFrom(module=node.module, names=[alias], level=node.level) if isinstance(
                node, ast.ImportFrom) else ast.Import(names=[alias])
            target = imported_names(module, single)[0]
            if not LEXICAL_VERSION_MODULE.match(target) or target == module.name:
                continue
            if isinstance(node, ast.Import) or target.endswith("." + alias.name):  # the module itself
                aliases[alias.asname or alias.name] = target
            elif alias.name.startswith("_"):
                problems.append(f"{module.where(node.lineno)}: imports {alias.name} from {target}")
    for node in nodes:
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            problems.append(f"{module.where(node.lineno)}: reads {node.attr} of {aliases[node.value.id]}")
    return problems


def test_no_judge_module_takes_a_private_name_of_another_lexical_version() -> None:
    problems = [problem for module in modules().values() if module.under("judge")
                for problem in private_lexical_imports(module)]
    assert not problems, ("a released offline judge's verdicts would change with another module's private code; "
                          "share it under a public name in judge/lexical_common.py (frozen):\n" + "\n".join(problems))


def test_the_private_lexical_import_check_sees_both_ways_in() -> None:
    v3 = modules()[f"{PACKAGE}.judge.lexical_v3"]
    taken = ast.parse("from .lexical_v2 import _shape, LexicalJudgeV2\nfrom . import lexical\nlexical._support(1)\n"
                      "from .lexical_common import Window\nfrom .quantities import _private\n")
    assert private_lexical_imports(v3, taken) == [
        f"{v3.where(1)}: imports _shape from {PACKAGE}.judge.lexical_v2",
        f"{v3.where(3)}: reads _support of {PACKAGE}.judge.lexical",
    ]
    own = modules()[f"{PACKAGE}.judge.lexical_v2"]
    assert private_lexical_imports(own, ast.parse("from .lexical_v2 import _shape\n")) == []


def test_the_engine_and_the_session_judging_never_probe_a_judge() -> None:
    problems = []
    for name in (f"{PACKAGE}.judge.engine", f"{PACKAGE}.evaluation.judging"):
        module = modules()[name]
        problems += [f"{module.where(node.lineno)}: {ast.unparse(node)}" for node in module.nodes
                     if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                     and node.func.id in ("getattr", "hasattr") and node.args and "judge" in ast.unparse(node.args[0])]
    assert not problems, "declare what a judge is asked on Judge (judge/engine.py) instead of probing:\n" + "\n".join(problems)


# -- the checks themselves --------------------------------------------------------------------------------
def test_relative_imports_resolve_against_the_package() -> None:
    store_keys = modules()[f"{PACKAGE}.store.keys"]
    node = ast.parse("from . import Store\nfrom ..stats import bootstrap\nfrom ..verdict import gate\nfrom .. import defaults").body
    assert imported_names(store_keys, node[0]) == [f"{PACKAGE}.store"]
    assert imported_names(store_keys, node[1]) == [f"{PACKAGE}.stats.bootstrap"]
    assert imported_names(store_keys, node[2]) == [f"{PACKAGE}.verdict.gate"]
    assert imported_names(store_keys, node[3]) == [f"{PACKAGE}.defaults"]
    store = modules()[f"{PACKAGE}.store"]
    assert imported_names(store, ast.parse("from .keys import x").body[0])[0] == f"{PACKAGE}.store.keys"


@pytest.mark.parametrize("text", [
    "SELECT 1 FROM runs", "  select key, verdict FROM judge_cache", "INSERT INTO api_keys (id) VALUES (?)",
    "INSERT OR REPLACE INTO t (a) VALUES (?)", "UPDATE runs SET {} WHERE id = ?", "update {} set a = 1",
    "\n DELETE FROM item_metrics WHERE run_id = ?", "CREATE TABLE t (a)", "CREATE UNIQUE INDEX i ON t (a)",
    "create trigger x before insert", "DROP TABLE t", "ALTER TABLE t ADD COLUMN c", "PRAGMA user_version",
])
def test_sql_is_recognised(text: str) -> None:
    assert is_sql(text)


@pytest.mark.parametrize("text", [
    "create a key with --scope", "Create the draft golden item", "update pytest-crucible", "delete the file",
    "SELECTED", "drop it", "alter the config", "INSERTS", "",
])
def test_prose_is_not_sql(text: str) -> None:
    assert not is_sql(text)


def test_the_cycle_finder_reports_the_way_round() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


# -- 6. docs/architecture.md names what exists -------------------------------------------------------
def test_every_module_the_architecture_page_names_exists() -> None:
    repo = Path(__file__).resolve().parents[1]
    page = (repo / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(src/pytest_crucible/[\w/]+(?:\.py)?/?)`", page))
    # Short names in the table's shared row (`workspace.py`) and in the text (`store/schema.py`).
    named |= {f"src/pytest_crucible/{name}" for name in re.findall(r"`((?:\w+/)?\w+\.py)`", page) if not name.startswith("tests/")}
    assert len(named) >= 30, "the page's module map went missing"
    missing = sorted(path for path in named if not (repo / path).exists())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
    # ... and every module of the package appears on the page (by path, or by its file name).
    unnamed = sorted(module.name for module in modules().values()
                     if not any(ref in page for ref in (module.path.relative_to(repo).as_posix(), f"`{module.path.name}`",
                                                         module.path.parent.relative_to(repo).as_posix() + "/")))
    assert not unnamed, f"modules missing from docs/architecture.md: {unnamed}"
