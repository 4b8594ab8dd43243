"""Sentence similarity for the offline ``lexical-v2`` judge: static word embeddings, no download.

The ``wordllama`` wheel ships a 256-dimensional static embedding table (16 MB) and its tokenizer
inside the package; :func:`similarity` loads them from there once per process (about 0.2 s) and
never reaches the network (``disable_download=True``). A text's vector is the normalised mean of its
token vectors. The judge (:mod:`pytest_crucible.judge.lexical_v2`) compares single words with it: a
word the answer puts where the passage has another is a synonym when their cosine is high ("comes
with" / "includes" 0.44, "kids" / "children" 0.87) and a swap when it is low ("team" / "personal"
-0.01, "dispensed" / "signed" 0.04). Whole sentences are not compared: a negated copy scores as
high as a paraphrase.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["EMBEDDING_MODEL", "similarity"]

EMBEDDING_MODEL = "wordllama l2_supercat_256"
_lock = threading.Lock()
_model: Any = None


def _load() -> Any:
    global _model
    with _lock:
        if _model is None:
            import wordllama

            # The package holds both files: weights/ (found beside the module) and tokenizers/
            # (found under cache_dir/tokenizers); pointing cache_dir at the package keeps it offline.
            _model = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        return _model


@lru_cache(maxsize=16384)
def _vector(text: str) -> Any:
    return _load().embed([text], norm=True)[0]


def similarity(a: str, b: str) -> float:
    """Cosine similarity of the two texts' embeddings, in [-1, 1] (0.0 when either is blank)."""
    if not a.strip() or not b.strip():
        return 0.0
    return float(_vector(a) @ _vector(b))
