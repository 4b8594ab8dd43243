"""The judge of one session: its engine (the cache preloaded), the judgment ledger, the calibration, the
cost estimate, the Message Batches judged at the end, the counters of every process, and the notes about
what it could not judge. The session asks; this module knows how a judge is set up and used."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..golden_set.schema import GoldenItem
    from ..judge.engine import Judge, JudgeEngine
    from ..settings import Settings
    from ..store import Store
    from .answers import CostEstimate
    from .route import AnswerRoute

_UNREAD = object()
NOT_ASKED = "notAsked:"  # + a request kind: the judging totals' count of requests the judge was not sent  # a lazily read value not read yet (None is a value: "never calibrated")


class SessionJudging:
    """The judge as one session uses it. ``settings`` may be replaced (custom metrics found late join them)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embedder: Any = None  # the one that measured responseRelevancy; Message Batches judge with it too
        self.embedder_name: str | None = None
        self.cost_estimate: CostEstimate | None = None
        self.batch_errors: list[str] = []
        self._engine: JudgeEngine | None = None
        self._ledger: dict[str, list[dict[str, Any]]] | None = None
        self._calibration: Any = _UNREAD
        self._route: AnswerRoute | None = None
        self._worker_totals: dict[str, float] = {}
        self._worker_agreement: dict[str, list[int]] = {}

    @property
    def engine(self) -> JudgeEngine:
        """The session's judge engine, its cache preloaded from the database (read-only)."""
        if self._engine is None:
            from ..judge.engine import JudgeEngine
            from ..judge.select import make_judge, read_cache_rows

            s = self.settings
            judge = make_judge(s.judge, model=s.judge_model, batch=s.judge_batch, price_per_mtok=s.judge_price,
                               concurrency=s.concurrency, registered=s.registered_judges)
            engine = JudgeEngine(judge, cache_mode=s.judge_cache, judge_repeat=s.judge_repeat)
            if s.judge_cache != "off":
                engine.load_cache(read_cache_rows(s.db_path, engine.model))
            self._engine = engine
        return self._engine

    @property
    def judge(self) -> Judge | None:
        """The judge of the run's row, or None when the session judges nothing."""
        return self.engine.judge if self.settings.uses_judge else None

    def ledger_rows(self, query_id: str) -> list[dict[str, Any]]:
        """The human and llm judgments of one query, loaded once per session (read-only)."""
        if self._ledger is None:
            from ..store import read_judgment_ledger

            self._ledger = read_judgment_ledger(self.settings.db_path)
        return self._ledger.get(query_id, [])

    @property
    def calibration(self) -> dict[str, Any] | None:
        """The judge's newest `crucible judge calibrate` row (None: never calibrated), read once: a failure
        on a judged verdict names it."""
        if self._calibration is _UNREAD:
            from ..store.ledgers import read_latest_judge_calibration

            judge = self.judge
            self._calibration = None if judge is None else read_latest_judge_calibration(
                self.settings.db_path, judge.model, judge.prompt_version)
        return self._calibration

    @property
    def graded_rubrics(self) -> tuple:
        """The rubric metrics this session judges: none without answers to judge (component mode) or
        without a judge that can grade a rubric (the offline judges cannot: see ``notes``)."""
        s = self.settings
        if not s.rubrics or not s.judges_answers or not self.engine.judge.grades_rubrics:
            return ()
        return s.rubrics

    def estimate_cost(self, golden: list[GoldenItem]) -> CostEstimate | None:
        """What a paid judge will cost on the selected items (None: the judge is free), kept for the run row.
        Raises JudgeSetupError when the judge cannot be set up (e.g. the anthropic SDK is missing)."""
        judge = self.engine.judge
        if not judge.paid:
            return None
        from . import estimate_cost

        self.cost_estimate = estimate_cost(golden, self.settings, judge, self.graded_rubrics, engine=self.engine)
        return self.cost_estimate

    @property
    def route(self) -> AnswerRoute:
        """Where this session judges its items (``evaluation.route``), chosen once: the judge is built to
        choose only when the prefetcher could judge ahead."""
        if self._route is None:
            from .route import choose_route

            self._route = choose_route(self.settings, overlaps=lambda: bool(self.engine.judge.overlaps))
        return self._route

    def judging_ahead(self) -> Callable[[Any, Any], None] | None:
        """What the prefetcher runs after each pipeline call: the item's judging on the ``ahead`` route
        (a judge that waits on a network, answering now: Message Batches judge at session end); else None."""
        s = self.settings
        if not self.route.ahead:
            return None
        from . import judge_ahead

        self.ledger_rows("")  # loaded here, once, not by two workers at once
        engine, embedder, rubrics = self.engine, self.embedder, self.graded_rubrics
        route = self.route
        return lambda golden, outcome: judge_ahead(golden, outcome, settings=s, ledger=self.ledger_rows(golden.id),
                                                   engine=engine, embedder=embedder, rubrics=rubrics, route=route)

    def judge_run_in_batch(self, store: Store, run_id: str, progress: Callable[[str], object] | None) -> None:
        """With --crucible-judge-batch: the run's answers judged now, in Message Batches; their errors kept."""
        s = self.settings
        if not self.route.answers_pending:
            return
        from ..judge.embed import default_embedder
        from . import judge_run_in_batch

        self.embedder = self.embedder or default_embedder()
        self.embedder_name = self.embedder_name or getattr(self.embedder, "name", None)
        self.batch_errors = judge_run_in_batch(store, run_id, self.engine, self.embedder, s,
                                               on_start=lambda n_items: self._watch_batches(n_items, progress),
                                               rubrics=self.graded_rubrics)

    def _watch_batches(self, n_items: int, write: Callable[[str], object] | None) -> None:
        """Progress lines while Message Batches are processed (one Progress per batch)."""
        if write is None or not self.engine.judge.batch:  # only a batch judge polls batches (Judge.on_progress)
            return
        from ..progress import Progress

        watched: dict[str, Progress] = {}

        def on_progress(batch_id: str, done: int, total: int) -> None:
            if batch_id not in watched:
                label = f"{self.engine.judge.batch_name} {len(watched) + 1} for {n_items} items ({batch_id})"
                watched[batch_id] = Progress(label, total, write, unit="judge requests")
            watched[batch_id].update(done, total)

        self.engine.judge.on_progress = on_progress

    # -- the counters of every process -----------------------------------------------------------------
    def totals(self) -> dict[str, Any]:
        """Requests, cache hits, tokens and cost of this session's judging (all processes)."""
        totals = dict(self._worker_totals)
        if self._engine is not None:
            for name, value in self._engine.stats.as_dict().items():
                totals[name] = totals.get(name, 0) + value
            usage = self._engine.judge.usage()
            for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd"):
                totals[name] = totals.get(name, 0) + getattr(usage, name)
            for name, value in self._engine.judge.counters().items():  # e.g. jsonMode: how requests were judged
                totals[name] = totals.get(name, 0) + value
            for kind, value in self._engine.not_asked.items():  # requests of a kind the judge does not answer
                totals[NOT_ASKED + kind] = totals.get(NOT_ASKED + kind, 0) + value
        return totals

    def self_agreement(self) -> dict[str, Any] | None:
        """--crucible-judge-repeat: per request kind, how many requests got the same verdict every time (all processes)."""
        if self.settings.judge_repeat < 2:
            return None
        kinds = {kind: list(counts) for kind, counts in self._worker_agreement.items()}
        for kind, (agreed, total) in (self._engine.agreement if self._engine is not None else {}).items():
            counts = kinds.setdefault(kind, [0, 0])
            counts[0], counts[1] = counts[0] + agreed, counts[1] + total
        return {"judgings": self.settings.judge_repeat, "kinds": kinds}

    def worker_output(self) -> dict[str, Any]:
        """What a worker's judging adds to the controller's (plain types)."""
        return {"judge": {name: float(value) for name, value in self.totals().items()},
                "agreement": self._engine.agreement if self._engine is not None else {}}

    def add_worker_output(self, output: dict[str, Any]) -> None:
        for name, value in output.get("judge", {}).items():
            self._worker_totals[name] = self._worker_totals.get(name, 0) + value
        for kind, (agreed, total) in output.get("agreement", {}).items():
            counts = self._worker_agreement.setdefault(kind, [0, 0])
            counts[0], counts[1] = counts[0] + agreed, counts[1] + total

    def run_stats(self) -> dict[str, Any] | None:
        """What the run's row keeps of the judging: stats, cost, tokens (None when nothing is judged)."""
        if not self.settings.uses_judge:
            return None
        from ..judge.engine import JUDGE_COUNTERS

        summary, agreement, judge = self.totals(), self.self_agreement(), self.engine.judge
        return {
            "stats": {**{name: int(summary.get(name, 0)) for name in ("requests", "cache_hits", "judged", "failures")},
                      **{name: int(summary[name]) for name in JUDGE_COUNTERS if summary.get(name)},
                      **({"selfAgreement": agreement} if agreement else {}),
                      # prompt caching: input tokens read from and written to the API's cache (priced in cost_usd)
                      **{key: int(summary[name]) for key, name in (("cacheReadTokens", "cache_read_tokens"),
                                                                   ("cacheWriteTokens", "cache_write_tokens"))
                         if summary.get(name)},
                      # retention's own prompt (or rule) version: its metrics compare only under the same one
                      **({"retentionPrompt": judge.prompt_version_for("retention")} if judge.judges_retention else {})},
            "cost_usd": summary.get("cost_usd"),
            "input_tokens": int(summary.get("input_tokens", 0)),
            "output_tokens": int(summary.get("output_tokens", 0)),
        }

    def run_fields(self) -> dict[str, Any]:
        """What the run's row learns once its tests are collected: the judge, the cost estimate, the custom metrics."""
        from .custom_metrics import definitions

        judge, rubrics, estimate = self.judge, self.graded_rubrics, self.cost_estimate
        grader = judge if rubrics else None  # graded rubrics need answers judged, so a judge (settings.uses_judge)
        return dict(judge_model=judge.model if judge else None,
                    judge_prompt_version=judge.prompt_version if judge else None,
                    judge_label=judge.label if judge else None,
                    cost_estimate_usd=estimate.to_spend if estimate else None,  # the requests not in the cache
                    custom_metrics=definitions(self.settings.custom_metrics, rubrics, judge_model=grader.model if grader else None,
                                               rubric_prompt_version=grader.prompt_version_for("rubric") if grader else None))

    # -- what it could not judge -----------------------------------------------------------------------
    def alerts(self) -> list[str]:
        """Warnings said at the end: requests a model judge never sent, its host unreachable (every process's)."""
        not_sent = int(self.totals().get("notSent", 0))
        if not not_sent:
            return []
        judge = self.engine.judge
        return [f"WARNING judge unreachable at {judge.endpoint or judge.model}: {not_sent} requests not sent (the judge's "
                "circuit opened after connection failures in a row; their items' judged metrics are errored, the run is incomplete)"]

    def notes(self) -> list[str]:
        """Said once at the end: rubrics not graded, thresholds that could not fail an item, an unused key."""
        return self._rubric_note() + self._retention_note() + self._threshold_note() + self._key_note()

    def _retention_note(self) -> list[str]:
        """Golden conversations' turns whose knowledge retention was not judged: the judge does not answer the
        ``retention`` kind (a judge of your own without ``judges_retention``); knowledgeRetained is left out."""
        turns = int(self.totals().get(NOT_ASKED + "retention", 0))
        if not turns:
            return []
        return [f"NOTE {self.engine.judge.model} does not judge the request kind 'retention': knowledgeRetained and "
                f"knowledgeRetention not scored ({turns} conversation turn{'s' if turns != 1 else ''})",
                "  (a judge of your own answers it when it sets judges_retention = True: docs/judges.md)"]

    def _rubric_note(self) -> list[str]:
        """Rubric metrics declared but not judged; nothing is stored for them."""
        s = self.settings
        if not s.rubrics or self.graded_rubrics:
            return []
        names = ", ".join(r.name for r in s.rubrics)
        if not s.judges_answers:
            return [f"NOTE rubric metrics grade answers, and component mode has none: {names} skipped"]
        return [f"NOTE rubric metrics need a model judge: {names} skipped",
                f"  ({self.engine.judge.model} cannot grade a rubric; --crucible-judge=anthropic can)"]

    def _key_note(self) -> list[str]:
        """A provider's key is in the environment and no judge was named: the key only supplies credentials,
        the offline judge ran (the same command in CI, where the key is absent, measures the same)."""
        from ..judge.select import unused_key_note

        s = self.settings
        return [] if s.judge_named or not s.judges_answers else unused_key_note()

    def _threshold_note(self) -> list[str]:
        """With Message Batches the judged metrics arrive after the tests: thresholds on them cannot fail an item."""
        s = self.settings
        if not (self.route.answers_pending and s.strict and s.thresholds):
            return []
        from ..metrics.properties import names

        at_test_time = {*names(answer_layer=False), *(m.name for m in s.custom_metrics)}
        late = sorted({t.metric for t in s.thresholds if t.metric not in at_test_time})
        if not late:
            return []
        return [f"NOTE crucible_thresholds on {', '.join(late)} did not fail any item:",
                "  with --crucible-judge-batch their values arrive after the tests (the gate and floors still read them)"]

    def close(self) -> None:
        if self._engine is not None:
            self._engine.judge.close()
