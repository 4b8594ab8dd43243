"""Values the whole package shares, each written once. Import-light: the plugin reads them
at configure time, before any heavy module is loaded.
"""

from __future__ import annotations

# The seed of the bootstrap and the permutation test when none is given (plugin, CLI, API).
DEFAULT_SEED = 1337

# The results database, relative to the rootdir (plugin) or the working directory (CLI).
DEFAULT_DB = ".crucible/crucible.db"

# Golden item kinds (the golden schema's ``kind`` field, --crucible-kind, crucible compare --kind).
KINDS = ("retrieval", "aggregation", "adversarial")
