"""How golden items become pytest items: golden files collected directly, the ``@crucible.golden``
marker's parameters, and which golden item a test runs. pytest glue, used by plugin.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .golden_set import GoldenItem
    from .session import CrucibleSession  # noqa: F401 (the stash key's type)

DRAFT_REASON = "draft golden item (run it with --crucible-include-drafts)"

SESSION_KEY = pytest.StashKey["CrucibleSession"]()
GOLDEN_ITEM_KEY = pytest.StashKey["GoldenItem"]()


def display_path(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


class GoldenFile(pytest.File):
    """A golden file: one test per item, in file order."""

    def collect(self):
        from .golden_set import GoldenFileError, load_golden_file

        try:
            items = load_golden_file(self.path, display_path=display_path(self.config, self.path))
        except GoldenFileError as exc:
            raise self.CollectError(str(exc)) from None
        include_drafts = self.config.stash[SESSION_KEY].settings.include_drafts
        for golden in items:
            test = GoldenItemTest.from_parent(self, name=golden.id, callobj=golden_file_test)
            test.stash[GOLDEN_ITEM_KEY] = golden
            if golden.status == "draft" and not include_drafts:
                test.add_marker(pytest.mark.skip(reason=DRAFT_REASON))
            yield test


class GoldenItemTest(pytest.Function):
    """A golden item collected from a file; failures point at the item's line."""

    def reportinfo(self):
        golden = self.stash[GOLDEN_ITEM_KEY]
        return self.path, max(golden.line - 1, 0), f"golden item {golden.id}"


def golden_file_test(crucible_evaluate) -> None:
    """The test body of a collected golden item: evaluate it (the fixture fails it if it must)."""
    __tracebackhide__ = True
    crucible_evaluate()


def deselect_kinds(config: pytest.Config, kinds: tuple[str, ...] | None, items: list[pytest.Item]) -> None:
    """--crucible-kind: golden items of other kinds are deselected, so their pipeline is never called."""
    if not kinds:
        return
    keep, drop = [], []
    for item in items:
        golden = golden_of(item)
        (drop if golden is not None and golden.kind not in kinds else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def golden_of(item: pytest.Item) -> "GoldenItem | None":
    """The golden item a test runs (a collected golden item, or a marked test's parameter)."""
    golden = item.stash.get(GOLDEN_ITEM_KEY, None)
    if golden is None:
        callspec = getattr(item, "callspec", None)
        golden = callspec.params.get("golden_item") if callspec is not None and item.get_closest_marker("crucible_golden") else None
    return golden


def _marker_path(metafunc: pytest.Metafunc, raw: str) -> Path:
    path = Path(raw)
    if path.is_absolute():
        return path
    beside_test = Path(metafunc.definition.path).parent / path
    return beside_test if beside_test.exists() else metafunc.config.rootpath / path


def marker_params(metafunc: pytest.Metafunc, marker: pytest.Mark, include_drafts: bool) -> list:
    """One ``pytest.param`` per golden item of the marker's files (filtered); a bad file or marker is
    a collection error naming the file, the line and the field."""
    from .golden_set import GoldenFileError, filter_items, load_golden_file

    where = f"{metafunc.definition.nodeid}: @crucible.golden"
    if "golden_item" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(f"{where} needs a 'golden_item' argument on the test function\nHINT: def {metafunc.function.__name__}(golden_item): ...")
    if not marker.args:
        raise pytest.Collector.CollectError(f"{where} needs at least one golden file path\nHINT: @crucible.golden(\"golden/faq.jsonl\")")
    params = []
    try:
        seen: dict[str, str] = {}
        for raw in marker.args:
            path = _marker_path(metafunc, str(raw))
            shown = display_path(metafunc.config, path)
            for golden in filter_items(load_golden_file(path, display_path=shown), marker.kwargs, where):
                if golden.id in seen:
                    raise GoldenFileError(shown, golden.line, "id", f"duplicate id '{golden.id}' (also in {seen[golden.id]})", "ids must be unique across the files of one marker.")
                seen[golden.id] = shown
                marks = [pytest.mark.skip(reason=DRAFT_REASON)] if golden.status == "draft" and not include_drafts else []
                params.append(pytest.param(golden, id=golden.id, marks=marks))
    except GoldenFileError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    return params
