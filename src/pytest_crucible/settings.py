"""The frozen settings of one session: everything the options, ini keys and config file decided.

Built once at configure time by :mod:`pytest_crucible.options` (the only place that reads pytest's
options); every core object is built from it. Pure: no pytest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .defaults import DEFAULT_K
from .verdict.gate import GateSettings

if TYPE_CHECKING:
    from .evaluation.custom_metrics import PythonMetric, Rubric
    from .evaluation.thresholds import Threshold
    from .store.postgres import DatabaseURL

SYSTEM, COMPONENT = "system", "component"  # --crucible-mode
STRICT, RECORD = "strict", "record"  # --crucible-outcome


@dataclass(frozen=True)
class Settings:
    params: dict[str, Any]
    resolved: dict[str, Any]
    config_hash: str
    config_path: str | None
    db_path: Path | DatabaseURL  # a SQLite file, or a PostgreSQL database (--crucible-db=postgresql://...)
    mode: str = SYSTEM
    outcome_mode: str = STRICT
    include_drafts: bool = False
    rootdir: Path = Path(".")
    pytest_args: tuple[str, ...] = ()
    gate: GateSettings = field(default_factory=GateSettings)
    # The judge of the answer layer (system mode) and of pool labelling.
    judge: str = "lexical"
    # Whether --crucible-judge or ini crucible_judge named the judge (else the default: the offline judge).
    judge_named: bool = False
    judge_model: str | None = None
    judge_price: tuple[float, float] | None = None  # ini crucible_judge_price_per_mtok: USD per Mtok in, out
    registered_judges: dict[str, Any] = field(default_factory=dict)  # pytest_crucible_register_judges, by name
    judge_batch: bool = False
    judge_cache: str = "readwrite"
    max_cost: float | None = None
    label_pool: bool = False
    concurrency: int = 1
    # The history of a golden conversation's turns: live (the pipeline's own earlier answers, the turns of one
    # conversation in order) or replay (the replies the author wrote): ini crucible_conversation.
    conversation: str = "live"
    # ini crucible_background_writes: "auto" (a large run on two cores or more writes its batches from a
    # process of its own, see session.BACKGROUND_FROM_ITEMS), "always" or "never".
    background_writes: str = "auto"
    # Shards on several machines share one run id; `crucible merge` joins them.
    run_id: str | None = None
    # Who the run belongs to and how it is tagged (never part of the configHash).
    workspace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    # --crucible-kind: the question kinds this run selected (None: every kind).
    kinds: tuple[str, ...] | None = None
    # crucible_strict_config: a changed config key the pipeline never read fails the session (exit 4).
    strict_config: bool = False
    # The baseline's config keys (dotted), for the did-you-mean of a config key the pipeline never read.
    baseline_config_keys: tuple[str, ...] = ()
    # Your own metrics (docs/custom-metrics.md): Python metrics, rubric metrics (judged by a model judge),
    # and crucible_thresholds, which fail an item in strict mode.
    # Repeats (docs/statistics.md): the pipeline is called ``repeat`` times per item and each answer judged;
    # in strict mode the item passes when at least ``repeat_pass`` of its repeats pass. ``judge_repeat``:
    # each judge request is judged that many times (beyond the first, past the cache), for self-agreement.
    repeat: int = 1
    repeat_pass: float = 1.0
    judge_repeat: int = 1
    custom_metrics: tuple[PythonMetric, ...] = ()
    rubrics: tuple[Rubric, ...] = ()
    thresholds: tuple[Threshold, ...] = ()
    # The cutoff of the metrics at K (ini crucible_k): the ruler's, recorded with the run.
    k: int = DEFAULT_K

    @property
    def retrieval_limit(self) -> int:
        """Chunks the pipeline returns (its config): what the answer step reads, not the cutoff K."""
        return int(self.resolved["retrievalLimit"])

    @property
    def judges_answers(self) -> bool:
        """System mode scores answers; component mode scores retrieval only."""
        return self.mode == SYSTEM

    @property
    def uses_judge(self) -> bool:
        return self.judges_answers or self.label_pool

    @property
    def custom_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.custom_metrics) + tuple(r.name for r in self.rubrics)

    @property
    def strict(self) -> bool:
        return self.outcome_mode == STRICT
