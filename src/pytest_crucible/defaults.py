"""Values the whole package shares, each written once. Import-light: the plugin reads them
at configure time, before any heavy module is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

# The seed of the bootstrap and the permutation test when none is given (plugin, CLI, API).
DEFAULT_SEED = 1337

# The results database, relative to the rootdir (plugin; the CLI finds the same directory from the
# working directory, workspace.default_db, and falls back to the working directory itself).
DEFAULT_DB = ".crucible/crucible.db"

# The evaluation cutoff K of the metrics at K (recall@K, precision@K, hit@K) unless ini crucible_k says
# otherwise. Part of the ruler, not of the system: it does not follow the pipeline's retrievalLimit.
DEFAULT_K = 10
#: The mode of every file crucible creates (the database, reports, junit XML, exports): owner only.
#: CRUCIBLE_FILE_MODE overrides it (files.file_mode).
DEFAULT_FILE_MODE = 0o600

# A model judge's requests in flight at once (Claude, an OpenAI-compatible server); --crucible-concurrency=N
# raises it to N, so that a judge-bound run keeps N requests waiting on the provider at every moment.
JUDGE_REQUESTS_IN_FLIGHT = 4

# Golden item kinds (the golden schema's ``kind`` field, --crucible-kind, crucible compare --kind).
KINDS = ("retrieval", "aggregation", "adversarial")

# The fewest pairs a gated metric needs: with n pairs the smallest two-sided sign-flip p-value is
# 2 / 2**n, which is below 0.05 only from n = 6 (stats.min_pairs_for_alpha(0.05); a test keeps them
# equal). With fewer pairs the gate is blind, so it refuses instead of passing.
MIN_PAIRS = 6
#: How the gate's p-values are corrected across the gated metrics (the family): "holm" keeps the chance that
#: any of them is called a regression when none moved at or below alpha (docs/statistics.md, "Many metrics,
#: one verdict"); "none" tests each metric at full alpha (with 12 gated metrics that do not move, about one
#: run in four would fail somewhere).
MULTIPLE = "holm"
MULTIPLE_CHOICES = ("holm", "none")
#: What the gate does with a golden item edited under the same id since the baseline (its question, reference,
#: assertions, answerable or kind differ; a change of citations alone moves the ruler instead, verdict/ruler.py):
#: "exclude" leaves it out of the pairs (the default, first), "include" pairs it anyway, "refuse" refuses (exit 3).
CHANGED_ITEMS_CHOICES = ("exclude", "include", "refuse")
CHANGED_ITEMS = CHANGED_ITEMS_CHOICES[0]

#: The judges a run or a calibration can name. "lexical" is the current offline judge (lexical-v3);
#: lexical-v2 and lexical-v1 stay selectable so that runs judged by them stay comparable; auto picks
#: anthropic when ANTHROPIC_API_KEY is set, else lexical (asked for by name only: a key in the environment
#: supplies credentials, it never chooses the judge).
#: The judge of a session or command that names none: the offline one, whatever the environment holds.
DEFAULT_JUDGE = "lexical"
JUDGE_CHOICES = ("auto", "lexical", "lexical-v3", "lexical-v2", "lexical-v1", "anthropic", "openai")
#: The offline judges, newest first.
OFFLINE_JUDGES = ("lexical-v3", "lexical-v2", "lexical-v1")

# The agreement with people (Cohen's kappa of `crucible judge calibrate`) below which a gate on a
# judged metric carries a warning: 0.6 is where "substantial" agreement starts on the usual scale
# (Landis and Koch), and about what two groups of trained assessors reach with each other.
CALIBRATED_KAPPA = 0.6


@dataclass(frozen=True)
class ServerLimits:
    """What one `crucible serve` lets its clients cost it (the server; the CLI's serve options show the
    defaults). Each has a `crucible serve` option; docs/server.md ("Limits") says why each default is what it is."""

    #: Compares computed at once (each is CPU-bound: ~1 s for two 169-item runs); beyond, 503 + Retry-After.
    max_compares: int = 2
    #: Metrics documents computed at once (~25 ms each for a 169-item run, CPU-bound); beyond, 503 + Retry-After.
    #: Twice key_in_flight: one key never holds them all.
    max_metrics: int = 8
    #: Requests one key may have in flight at once, on any /api/ endpoint (its key check included); beyond,
    #: 429 + Retry-After.
    key_in_flight: int = 4
    #: Open connections (uvicorn's limit_concurrency); a request beyond it gets uvicorn's plain 503.
    max_connections: int = 512
    #: Seconds a client has to send a request's line and headers, and again its body.
    read_timeout: float = 10.0
    #: Seconds a response may wait on a client that reads none of it (the connection's send buffer full);
    #: beyond, the connection is closed.
    write_timeout: float = 10.0
    #: Requests with a wrong key per client address per minute; beyond, 429 without checking any key.
    auth_failures: int = 30
    #: Promotes per key per minute; beyond, 429.
    promotes_per_minute: int = 30
    #: Compare answers kept in memory (answers about complete runs only: those never change).
    compare_cache: int = 256
    #: Of those, the most one key's compares may hold: a key asking new compares replaces its own oldest
    #: answers first, so it can push out at most this many of the other keys' answers.
    compare_cache_per_key: int = 32
    #: Seconds an idle keep-alive connection stays open between requests.
    keep_alive: float = 5.0

#: The version of the error class set and its rules (metrics/errors.py), recorded by every run (``runs.error_classes``)
#: so that a comparison says when two runs were classed by different rules. 1: the first set; 2: ``wrong_passage``, an
#: answer faithful to the retrieved context but wrong, which version 1 classed ``hallucination``.
ERROR_CLASSES_VERSION = 2
