"""Values the whole package shares, each written once. Import-light: the plugin reads them
at configure time, before any heavy module is loaded.
"""

from __future__ import annotations

# The seed of the bootstrap and the permutation test when none is given (plugin, CLI, API).
DEFAULT_SEED = 1337

# The results database, relative to the rootdir (plugin; the CLI finds the same directory from the
# working directory, workspace.default_db, and falls back to the working directory itself).
DEFAULT_DB = ".crucible/crucible.db"

# Golden item kinds (the golden schema's ``kind`` field, --crucible-kind, crucible compare --kind).
KINDS = ("retrieval", "aggregation", "adversarial")

# The fewest pairs a gated metric needs: with n pairs the smallest two-sided sign-flip p-value is
# 2 / 2**n, which is below 0.05 only from n = 6 (stats.min_pairs_for_alpha(0.05); a test keeps them
# equal). With fewer pairs the gate is blind, so it refuses instead of passing.
MIN_PAIRS = 6

#: The judges a run or a calibration can name. "lexical" is the current offline judge (lexical-v2);
#: lexical-v1 stays selectable so that runs judged by it stay comparable; auto picks anthropic when
#: ANTHROPIC_API_KEY is set, else lexical.
JUDGE_CHOICES = ("auto", "lexical", "lexical-v2", "lexical-v1", "anthropic")

# The agreement with people (Cohen's kappa of `crucible judge calibrate`) below which a gate on a
# judged metric carries a warning: 0.6 is where "substantial" agreement starts on the usual scale
# (Landis and Koch), and about what two groups of trained assessors reach with each other.
CALIBRATED_KAPPA = 0.6
