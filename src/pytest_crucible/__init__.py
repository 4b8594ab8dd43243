"""pytest-crucible: RAG golden sets as pytest test suites.

Public API: ``golden`` (the marker), ``metric`` (a custom metric, docs/custom-metrics.md),
``PipelineResult`` and ``Retrieved`` (what a pipeline returns), ``ItemScore`` (what an evaluated
item produced). The models are
imported on first use so that loading the plugin stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    import os

    import pytest

    # What the lazy attributes below resolve to, for type checkers (at run time they load on first use).
    from .evaluation.custom_metrics import PythonMetric
    from .evaluation.pipeline import PipelineResult, Retrieved
    from .evaluation.scoring import ItemScore
    from .warning import CrucibleWarning

__version__ = "0.1.0"
__all__ = ["CrucibleWarning", "ItemScore", "PipelineResult", "Retrieved", "__version__", "golden", "metric"]


def golden(*paths: str | os.PathLike[str], **filters: Any) -> pytest.MarkDecorator:
    """``@crucible.golden("golden/faq.jsonl", questionType="multi_hop")``.

    Same as ``@pytest.mark.crucible_golden(...)``: parametrizes the test's
    ``golden_item`` argument with the matching items of the files (paths relative
    to the test file), one case per item, ids = item ids. A missing or unusable path, or a filter on a
    field golden items do not have, is one collection error naming the line that wrote the marker.
    """
    import sys

    import pytest  # here, so that the CLI and the pure core never load pytest

    from .evaluation.custom_metrics import shown_path
    from .golden_set.schema import GoldenFileError, check_marker_arguments

    caller = sys._getframe(1)
    where = f"{shown_path(caller.f_code.co_filename)}:{caller.f_lineno}: @crucible.golden"
    try:
        check_marker_arguments(paths, filters, where)
    except GoldenFileError as exc:
        # pytest reports a CollectError raised while it imports a test module as its message alone
        raise pytest.Collector.CollectError(str(exc)) from None
    # (typed here: MarkDecorator's call is overloaded on a lone callable, which *paths leaves to Any)
    mark: pytest.MarkDecorator = pytest.mark.crucible_golden(*paths, **filters)
    return mark


@overload
def metric(name: Callable[..., Any], *, better: Literal["higher", "lower"] | None = "higher") -> PythonMetric: ...
@overload
def metric(name: str | None = None, *, better: Literal["higher", "lower"] | None = "higher"
           ) -> Callable[[Callable[..., Any]], PythonMetric]: ...
def metric(name: Any = None, *, better: Any = "higher") -> Any:
    """``@crucible.metric("answerWords", better="lower")``: a per-item metric of your own, called as
    ``function(item, result, *, config)``; returns a number, or None when it does not apply to the item.
    ``better``: "higher", "lower" or None (reported, never gated). See docs/custom-metrics.md."""
    from .evaluation.custom_metrics import metric as make_metric

    return make_metric(name, better=better)


def __getattr__(name: str) -> Any:
    if name in ("PipelineResult", "Retrieved"):
        from .evaluation import pipeline

        return getattr(pipeline, name)
    if name == "ItemScore":
        from .evaluation.scoring import ItemScore

        return ItemScore
    if name == "CrucibleWarning":
        from .warning import CrucibleWarning

        return CrucibleWarning
    raise AttributeError(f"module 'pytest_crucible' has no attribute {name!r}")
