"""The SQLite schema and its forward migrations.

The schema version lives in ``PRAGMA user_version``. Each migration moves the file
from version N-1 to N inside one transaction; a file is never migrated backwards.
Append-only ledgers (qrels) refuse UPDATE and DELETE in the database itself, so no
client, ours or another, can rewrite history.
"""

from __future__ import annotations

from enum import Enum


class RunStatus(str, Enum):
    """What a run's row says of it (``runs.status``, the CHECK below): the stored value is the member's value."""

    RUNNING = "running"  # being recorded (or its process died: the next open marks it interrupted)
    COMPLETE = "complete"  # every item recorded and judged: the only status ``latest`` resolves to
    INCOMPLETE = "incomplete"  # recorded, but some judge requests failed, an item was stopped, or items were lost
    INTERRUPTED = "interrupted"  # Ctrl-C, -x / --maxfail, or a process that died
    FAILED = "failed"

    def __str__(self) -> str:  # the stored value in messages, as a plain string would print
        return self.value

MIGRATIONS: list[str] = [
    # version 1: runs, per-item results and metrics, golden items as run, qrels ledger.
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted')),
        config_hash TEXT NOT NULL,
        config_path TEXT,
        params TEXT NOT NULL,
        resolved TEXT NOT NULL,
        mode TEXT NOT NULL CHECK (mode IN ('system', 'component')),
        outcome_mode TEXT NOT NULL,
        golden_hash TEXT,
        n_items INTEGER NOT NULL DEFAULT 0,
        git_commit TEXT,
        pytest_args TEXT,
        judge_model TEXT,
        judge_prompt_version TEXT,
        host TEXT,
        pid INTEGER
    );
    CREATE TABLE golden_items (
        run_id TEXT NOT NULL REFERENCES runs(id),
        item_id TEXT NOT NULL,
        source TEXT,
        line INTEGER,
        item TEXT NOT NULL,
        PRIMARY KEY (run_id, item_id)
    );
    CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(id),
        item_id TEXT NOT NULL,
        question TEXT NOT NULL,
        answer TEXT,
        retrieved TEXT NOT NULL,
        citations TEXT NOT NULL,
        confidence REAL,
        abstained INTEGER NOT NULL DEFAULT 0,
        blocked INTEGER NOT NULL DEFAULT 0,
        detected_concepts TEXT NOT NULL DEFAULT '[]',
        outcome TEXT NOT NULL,
        failures TEXT NOT NULL DEFAULT '[]',
        error TEXT,
        latency_ms REAL,
        recorded_at TEXT NOT NULL,
        PRIMARY KEY (run_id, item_id)
    );
    CREATE TABLE item_metrics (
        run_id TEXT NOT NULL REFERENCES runs(id),
        item_id TEXT NOT NULL,
        metric TEXT NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (run_id, item_id, metric)
    );
    CREATE INDEX item_metrics_by_metric ON item_metrics (run_id, metric);
    CREATE TABLE qrels (
        id INTEGER PRIMARY KEY,
        query_id TEXT NOT NULL,
        chunk_id TEXT,
        doc_id TEXT,
        grade INTEGER NOT NULL CHECK (grade BETWEEN 0 AND 3),
        source TEXT NOT NULL CHECK (source IN ('provenance', 'llm', 'human')),
        judge_model TEXT NOT NULL DEFAULT '',
        prompt_version TEXT,
        created_by TEXT,
        note TEXT,
        run_id TEXT,
        created_at TEXT NOT NULL,
        CHECK (chunk_id IS NOT NULL OR doc_id IS NOT NULL)
    );
    CREATE UNIQUE INDEX qrels_unique ON qrels (query_id, ifnull(chunk_id, ''), ifnull(doc_id, ''), source, judge_model);
    CREATE TRIGGER qrels_no_update BEFORE UPDATE ON qrels
    BEGIN SELECT RAISE(ABORT, 'qrels is an append-only ledger: UPDATE is refused; append a new judgment instead'); END;
    CREATE TRIGGER qrels_no_delete BEFORE DELETE ON qrels
    BEGIN SELECT RAISE(ABORT, 'qrels is an append-only ledger: DELETE is refused; append a new judgment instead'); END;
    CREATE VIEW run_metrics AS
        SELECT run_id, metric, AVG(value) AS mean, COUNT(*) AS n
        FROM item_metrics GROUP BY run_id, metric;
    """,
    # version 2: the judge. Runs can be 'incomplete' (an item's judge-based metrics errored),
    # carry the judge's label, request counts, tokens and cost; verdicts are cached.
    # SQLite cannot alter a CHECK constraint, so runs is rebuilt (the documented 12-step way).
    """
    CREATE TABLE runs_v2 (
        id TEXT PRIMARY KEY,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete', 'interrupted')),
        config_hash TEXT NOT NULL,
        config_path TEXT,
        params TEXT NOT NULL,
        resolved TEXT NOT NULL,
        mode TEXT NOT NULL CHECK (mode IN ('system', 'component')),
        outcome_mode TEXT NOT NULL,
        golden_hash TEXT,
        n_items INTEGER NOT NULL DEFAULT 0,
        git_commit TEXT,
        pytest_args TEXT,
        judge_model TEXT,
        judge_prompt_version TEXT,
        host TEXT,
        pid INTEGER,
        judge_label TEXT,
        judge_stats TEXT,
        cost_estimate_usd REAL,
        cost_usd REAL,
        input_tokens INTEGER,
        output_tokens INTEGER
    );
    INSERT INTO runs_v2 (id, started_at, finished_at, status, config_hash, config_path, params, resolved, mode,
                         outcome_mode, golden_hash, n_items, git_commit, pytest_args, judge_model, judge_prompt_version, host, pid)
        SELECT id, started_at, finished_at, status, config_hash, config_path, params, resolved, mode,
               outcome_mode, golden_hash, n_items, git_commit, pytest_args, judge_model, judge_prompt_version, host, pid FROM runs;
    DROP TABLE runs;
    ALTER TABLE runs_v2 RENAME TO runs;
    CREATE TABLE judge_cache (
        key TEXT PRIMARY KEY,
        judge_model TEXT NOT NULL,
        prompt_version TEXT NOT NULL,
        kind TEXT NOT NULL,
        request TEXT NOT NULL,
        verdict TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX judge_cache_by_judge ON judge_cache (judge_model, prompt_version);
    ALTER TABLE results ADD COLUMN judge_errors TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE results ADD COLUMN verdicts TEXT;
    """,
    # version 3: human judgments append freely (one row per correction; the unique key
    # binds machine sources only), concepts per golden item as run, and per result the
    # judged/unjudged share of the retrieved pool and the assertion results.
    """
    DROP INDEX qrels_unique;
    CREATE UNIQUE INDEX qrels_unique ON qrels (query_id, ifnull(chunk_id, ''), ifnull(doc_id, ''), source, judge_model)
        WHERE source != 'human';
    CREATE INDEX qrels_by_query ON qrels (query_id);
    CREATE TABLE golden_concepts (
        run_id TEXT NOT NULL REFERENCES runs(id),
        item_id TEXT NOT NULL,
        concept_id TEXT NOT NULL,
        grade TEXT NOT NULL CHECK (grade IN ('required', 'acceptable', 'irrelevant')),
        PRIMARY KEY (run_id, item_id, concept_id)
    );
    ALTER TABLE results ADD COLUMN pool TEXT;
    ALTER TABLE results ADD COLUMN assertions TEXT;
    """,
    # version 4: one error class per result, an id per result (what feedback points at),
    # the append-only eval_feedback queue, and draft golden items promoted from reviews.
    """
    ALTER TABLE results ADD COLUMN result_id TEXT;
    ALTER TABLE results ADD COLUMN error_class TEXT;
    ALTER TABLE results ADD COLUMN error_evidence TEXT;
    ALTER TABLE results ADD COLUMN crag_grade TEXT;
    CREATE UNIQUE INDEX results_by_result_id ON results (result_id) WHERE result_id IS NOT NULL;
    CREATE TABLE eval_feedback (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id),
        result_id TEXT,
        item_id TEXT,
        error_class TEXT NOT NULL,
        evidence TEXT,
        corrected_by TEXT,
        note TEXT,
        golden_item_id TEXT,
        created_at TEXT NOT NULL
    );
    CREATE TRIGGER eval_feedback_no_update BEFORE UPDATE ON eval_feedback
    BEGIN SELECT RAISE(ABORT, 'eval_feedback is an append-only queue: UPDATE is refused; append a new row instead'); END;
    CREATE TRIGGER eval_feedback_no_delete BEFORE DELETE ON eval_feedback
    BEGIN SELECT RAISE(ABORT, 'eval_feedback is an append-only queue: DELETE is refused'); END;
    CREATE TABLE golden_drafts (
        id TEXT PRIMARY KEY,
        status TEXT NOT NULL DEFAULT 'draft',
        item TEXT NOT NULL,
        feedback_id TEXT NOT NULL REFERENCES eval_feedback(id),
        created_by TEXT,
        created_at TEXT NOT NULL
    );
    """,
    # version 5: views that make the file readable as it is (e.g. in Datasette):
    # one row per item with its main metrics, and the error-class distribution per run.
    """
    CREATE VIEW item_results AS
    SELECT r.run_id, r.item_id, r.question, r.outcome, r.error_class, r.error_evidence, r.crag_grade,
        r.confidence, r.abstained, r.latency_ms, r.answer,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'recallAtK') AS recallAtK,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'precisionAtK') AS precisionAtK,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'ndcgAt10') AS ndcgAt10,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'mrr') AS mrr,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'hitAtK') AS hitAtK,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'faithfulness') AS faithfulness,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'responseRelevancy') AS responseRelevancy,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'contextPrecision') AS contextPrecision,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'contextRecall') AS contextRecall,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'noiseSensitivity') AS noiseSensitivity,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'truthfulness') AS truthfulness
    FROM results r;
    CREATE VIEW run_error_classes AS
        SELECT run_id, error_class, COUNT(*) AS n FROM results WHERE error_class IS NOT NULL GROUP BY run_id, error_class;
    """,
    # version 6: runs belong to a workspace and carry labels (model, collection, mode, ...)
    # and the question kinds they selected; results name the guardrail layer that blocked;
    # API keys for `crucible serve` keep only a salted hash of the secret.
    """
    ALTER TABLE runs ADD COLUMN workspace TEXT NOT NULL DEFAULT 'default';
    ALTER TABLE runs ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN kinds TEXT;
    CREATE INDEX runs_by_workspace ON runs (workspace, started_at);
    ALTER TABLE results ADD COLUMN blocked_layer TEXT;
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        name TEXT,
        scopes TEXT NOT NULL,
        salt TEXT NOT NULL,
        key_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT
    );
    CREATE INDEX api_keys_by_workspace ON api_keys (workspace);
    """,
    # version 7: the guardrail columns join the item_results view (a view cannot be altered:
    # it is restated). INSERT OR REPLACE deletes the conflicting row without firing DELETE
    # triggers (unless a client turns recursive_triggers on), so a replace could rewrite a ledger row.
    # An insert that would replace one is dropped instead: the earlier row stays as it was,
    # and INSERT OR IGNORE (how the store appends idempotently) behaves exactly as before.
    """
    CREATE TRIGGER qrels_no_replace BEFORE INSERT ON qrels
    WHEN EXISTS (SELECT 1 FROM qrels WHERE id = NEW.id)
      OR (NEW.source != 'human' AND EXISTS (
          SELECT 1 FROM qrels WHERE source = NEW.source AND query_id = NEW.query_id
            AND ifnull(chunk_id, '') = ifnull(NEW.chunk_id, '') AND ifnull(doc_id, '') = ifnull(NEW.doc_id, '')
            AND judge_model = NEW.judge_model))
    BEGIN SELECT RAISE(IGNORE); END;
    CREATE TRIGGER eval_feedback_no_replace BEFORE INSERT ON eval_feedback
    WHEN EXISTS (SELECT 1 FROM eval_feedback WHERE id = NEW.id)
    BEGIN SELECT RAISE(IGNORE); END;
    -- item_results gains the guardrail columns.
    DROP VIEW item_results;
    CREATE VIEW item_results AS
    SELECT r.run_id, r.item_id, r.question, r.outcome, r.error_class, r.error_evidence, r.crag_grade,
        r.confidence, r.abstained, r.blocked, r.blocked_layer, r.latency_ms, r.answer,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'recallAtK') AS recallAtK,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'precisionAtK') AS precisionAtK,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'ndcgAt10') AS ndcgAt10,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'mrr') AS mrr,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'hitAtK') AS hitAtK,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'faithfulness') AS faithfulness,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'responseRelevancy') AS responseRelevancy,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'contextPrecision') AS contextPrecision,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'contextRecall') AS contextRecall,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'noiseSensitivity') AS noiseSensitivity,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'truthfulness') AS truthfulness,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'attackSuccessRate') AS attackSuccessRate,
        (SELECT value FROM item_metrics m WHERE m.run_id = r.run_id AND m.item_id = r.item_id AND m.metric = 'falsePositiveRate') AS falsePositiveRate
    FROM results r;
    """,
    # version 8: a run with no scored item is 'failed' (never a baseline, never 'latest'); a run counts the
    # items it scored, the items whose pipeline errored and the items it skipped (drafts), and keeps the
    # changed config keys the pipeline never read (crucible ablate reads them). The status CHECK needs
    # the table rebuilt (the documented 12-step way, as in version 2).
    """
    CREATE TABLE runs_v8 (
        id TEXT PRIMARY KEY,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete', 'interrupted', 'failed')),
        config_hash TEXT NOT NULL,
        config_path TEXT,
        params TEXT NOT NULL,
        resolved TEXT NOT NULL,
        mode TEXT NOT NULL CHECK (mode IN ('system', 'component')),
        outcome_mode TEXT NOT NULL,
        golden_hash TEXT,
        n_items INTEGER NOT NULL DEFAULT 0,
        git_commit TEXT,
        pytest_args TEXT,
        judge_model TEXT,
        judge_prompt_version TEXT,
        host TEXT,
        pid INTEGER,
        judge_label TEXT,
        judge_stats TEXT,
        cost_estimate_usd REAL,
        cost_usd REAL,
        input_tokens INTEGER,
        output_tokens INTEGER,
        workspace TEXT NOT NULL DEFAULT 'default',
        labels TEXT NOT NULL DEFAULT '{}',
        kinds TEXT,
        unread_keys TEXT,
        n_scored INTEGER,
        n_errored INTEGER,
        n_skipped INTEGER
    );
    INSERT INTO runs_v8 (id, started_at, finished_at, status, config_hash, config_path, params, resolved, mode, outcome_mode,
                         golden_hash, n_items, git_commit, pytest_args, judge_model, judge_prompt_version, host, pid, judge_label,
                         judge_stats, cost_estimate_usd, cost_usd, input_tokens, output_tokens, workspace, labels, kinds,
                         n_scored, n_errored)
        SELECT id, started_at, finished_at, status, config_hash, config_path, params, resolved, mode, outcome_mode,
               golden_hash, n_items, git_commit, pytest_args, judge_model, judge_prompt_version, host, pid, judge_label,
               judge_stats, cost_estimate_usd, cost_usd, input_tokens, output_tokens, workspace, labels, kinds,
               (SELECT COUNT(*) FROM results r WHERE r.run_id = runs.id AND r.error IS NULL),
               (SELECT COUNT(*) FROM results r WHERE r.run_id = runs.id AND r.error IS NOT NULL)
        FROM runs;
    DROP TABLE runs;
    ALTER TABLE runs_v8 RENAME TO runs;
    CREATE INDEX runs_by_workspace ON runs (workspace, started_at);
    """,
    # version 9: `crucible judge calibrate` remembers how a judge (model + prompt version) agreed
    # with a set of human labels; the summary and the report show the newest one next to the judge.
    """
    CREATE TABLE IF NOT EXISTS judge_calibrations (
        id TEXT PRIMARY KEY,
        judge_model TEXT NOT NULL,
        prompt_version TEXT NOT NULL,
        label_set_hash TEXT NOT NULL,
        n_crag INTEGER NOT NULL,
        kappa_crag REAL,
        kappa_crag_binary REAL,
        n_faithful INTEGER NOT NULL,
        kappa_faithful REAL,
        figures TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS judge_calibrations_by_judge ON judge_calibrations (judge_model, prompt_version, created_at);
    """,
    # version 10: a promoted draft belongs to the workspace of the run it came from (`crucible golden export`
    # writes one workspace's drafts), and a correction promoted over HTTP records the API key that wrote it
    # (api_key_id), apart from the reviewer its body names (corrected_by), which the caller chooses. Drafts
    # already there take their run's workspace; the feedback rows are append-only and only gain the column.
    """
    ALTER TABLE eval_feedback ADD COLUMN api_key_id TEXT;
    ALTER TABLE golden_drafts ADD COLUMN workspace TEXT NOT NULL DEFAULT 'default';
    UPDATE golden_drafts SET workspace = coalesce(
        (SELECT runs.workspace FROM eval_feedback JOIN runs ON runs.id = eval_feedback.run_id
          WHERE eval_feedback.id = golden_drafts.feedback_id), 'default');
    CREATE INDEX golden_drafts_by_workspace ON golden_drafts (workspace, created_at);
    """,
    # version 11: your own metrics. A run records the custom metrics (Python and rubric) that produced its
    # values: name, kind, direction, where it was defined and a fingerprint of its code or rubric text, so a
    # comparison sees when the ruler changed. An item whose metric raised keeps the error, naming the metric.
    """
    ALTER TABLE runs ADD COLUMN custom_metrics TEXT;
    ALTER TABLE results ADD COLUMN metric_errors TEXT NOT NULL DEFAULT '[]';
    """,
    # version 12: wiggle measured. A run may call the pipeline several times per item (--crucible-repeat):
    # each repeat is kept in item_repeats (its outcome, answer and metrics), while results and item_metrics
    # keep one row per item (the metrics' means over the repeats), so every comparison reads item means
    # unchanged. human_labels is an append-only ledger of people's labels for one answer of one golden item
    # (keyed by the answer's hash): what prediction-powered inference corrects a judge's mean with.
    """
    ALTER TABLE runs ADD COLUMN repeats INTEGER NOT NULL DEFAULT 1;
    CREATE TABLE item_repeats (
        run_id TEXT NOT NULL REFERENCES runs(id),
        item_id TEXT NOT NULL,
        repeat INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        answer TEXT,
        metrics TEXT NOT NULL DEFAULT '{}',
        failure TEXT,
        error TEXT,
        PRIMARY KEY (run_id, item_id, repeat)
    );
    CREATE TABLE human_labels (
        id INTEGER PRIMARY KEY,
        item_id TEXT NOT NULL,
        answer_hash TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('crag', 'faithful')),
        value TEXT NOT NULL,
        source TEXT NOT NULL,
        created_by TEXT,
        note TEXT,
        created_at TEXT NOT NULL
    );
    CREATE UNIQUE INDEX human_labels_unique ON human_labels (item_id, answer_hash, kind, value, source);
    CREATE INDEX human_labels_by_item ON human_labels (item_id, answer_hash);
    CREATE TRIGGER human_labels_no_update BEFORE UPDATE ON human_labels
    BEGIN SELECT RAISE(ABORT, 'human_labels is an append-only ledger: UPDATE is refused; append a new label instead'); END;
    CREATE TRIGGER human_labels_no_delete BEFORE DELETE ON human_labels
    BEGIN SELECT RAISE(ABORT, 'human_labels is an append-only ledger: DELETE is refused; append a new label instead'); END;
    """,
    # 13: the embedder a run's responseRelevancy was measured with (NULL: not recorded; runs before this
    # version used the hashing stand-in unless the project's crucible_embedder said otherwise).
    """
    ALTER TABLE runs ADD COLUMN embedder TEXT;
    """,
    # 14: the evaluation cutoff K a run's metrics at K were measured at (ini crucible_k). Before this
    # version K was the pipeline's retrievalLimit, so older runs take it from their resolved config.
    """
    ALTER TABLE runs ADD COLUMN eval_k INTEGER;
    UPDATE runs SET eval_k = COALESCE(CAST(json_extract(resolved, '$.retrievalLimit') AS INTEGER), 10);
    """,
    # 15: a good citizen among pytest's plugins. A run records what was selected when it ran fewer golden items than
    # its golden files hold (-k, -m, --lf, a shard): JSON {"ran", "held", "by"}, NULL for a full run; such a run is
    # never `latest`. Every attempt pytest made at an item before its last one (pytest-rerunfailures) is kept in
    # item_attempts; results keeps the last attempt, the one pytest reported.
    """
    ALTER TABLE runs ADD COLUMN selection TEXT;
    CREATE TABLE item_attempts (
        run_id TEXT NOT NULL REFERENCES runs(id),
        item_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        answer TEXT,
        metrics TEXT NOT NULL DEFAULT '{}',
        failure TEXT,
        error TEXT,
        error_class TEXT,
        recorded_at TEXT NOT NULL,
        PRIMARY KEY (run_id, item_id, attempt)
    );
    """,
    # 16: the version of the error class set a run's items were classed with (metrics/errors.py ERROR_CLASSES_VERSION;
    # 2 added wrong_passage). NULL: a run before this version, classed by the first set. Stored classes are never
    # rewritten: a comparison says when two runs were classed by different sets.
    """
    ALTER TABLE runs ADD COLUMN error_classes INTEGER;
    """,
    # 17: an agentic pipeline's tool calls, in the order made (JSON [{"name", "arguments"}], NULL when it made
    # none): what `crucible show --item` and the HTML report set beside the golden item's expectedTools.
    """
    ALTER TABLE results ADD COLUMN tool_calls TEXT;
    """,
    # 18: the history a run answered golden conversations' turns on (crucible_conversation: live or replay). NULL:
    # a run before this version, answered live (the only history there was). A comparison says when two runs'
    # turns were answered on different histories.
    """
    ALTER TABLE runs ADD COLUMN conversation_history TEXT;
    """,
    # 19: a store that grows by what changed. A value repeated across items and runs is stored once, in contents
    # (hash: the first 128 bits of the SHA-256 of its text, in hex; store/contents.py): a golden item as it ran (its
    # canonical JSON) and a result's retrieved ranking (its JSON). A run's rows hold the hash: golden_item_refs
    # (golden_items' columns, item_hash for item) and results.retrieved_hash (for retrieved). The view golden_items
    # has the old table's name and columns. The texts already stored move as they are (content_hash(): the store's
    # SQL function, registered on every connection that migrates), so every run reads and exports as before.
    """
    CREATE TABLE contents (
        hash TEXT PRIMARY KEY,
        body TEXT NOT NULL
    );
    INSERT INTO contents (hash, body)
        SELECT content_hash(body), body FROM (SELECT item AS body FROM golden_items UNION SELECT retrieved FROM results) AS texts;
    CREATE TABLE golden_item_refs (
        run_id TEXT NOT NULL REFERENCES runs(id),
        item_id TEXT NOT NULL,
        source TEXT,
        line INTEGER,
        item_hash TEXT NOT NULL,
        PRIMARY KEY (run_id, item_id)
    );
    INSERT INTO golden_item_refs (run_id, item_id, source, line, item_hash)
        SELECT run_id, item_id, source, line, content_hash(item) FROM golden_items;
    DROP TABLE golden_items;
    CREATE VIEW golden_items AS
        SELECT g.run_id, g.item_id, g.source, g.line, c.body AS item FROM golden_item_refs g JOIN contents c ON c.hash = g.item_hash;
    ALTER TABLE results RENAME COLUMN retrieved TO retrieved_hash;
    UPDATE results SET retrieved_hash = content_hash(retrieved_hash);
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

# Columns a migration gained after files of its version had been written: such a file carries
# the version number without them. (schema version, table, column, type), checked on every open.
LATE_COLUMNS: list[tuple[int, str, str, str]] = [
    # Migration 4 gained crag_grade a commit after it first shipped (42be2d4 wrote v4 files without it).
    (4, "results", "crag_grade", "TEXT"),
]
