"""Which judge a session uses: Claude when an API key is configured, else the offline lexical judge."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..defaults import JUDGE_CHOICES
from .engine import Judge



class JudgeSetupError(Exception):
    """The requested judge cannot be used; ``str()`` is the user-facing message."""


def make_judge(name: str = "auto", *, model: str | None = None, batch: bool = False) -> Judge:
    if name == "auto":
        name = "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "lexical"
    if name in ("lexical", "lexical-v3"):
        from .lexical_v3 import LexicalJudgeV3

        return LexicalJudgeV3()
    if name == "lexical-v2":  # the earlier offline judges stay selectable, so that runs judged by them stay comparable
        from .lexical_v2 import LexicalJudgeV2

        return LexicalJudgeV2()
    if name == "lexical-v1":
        from .lexical import LexicalJudge

        return LexicalJudge()
    if name == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise JudgeSetupError(
                "--crucible-judge=anthropic needs an API key: ANTHROPIC_API_KEY is not set\n"
                "HINT: export ANTHROPIC_API_KEY=..., or use the offline judge with --crucible-judge=lexical"
            )
        from .anthropic_judge import AnthropicJudge
        from .prices import DEFAULT_JUDGE_MODEL

        # The SDK reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself; the key never passes through us.
        return AnthropicJudge(model or DEFAULT_JUDGE_MODEL, batch=batch)
    raise JudgeSetupError(f"unknown judge {name!r}: expected one of {', '.join(JUDGE_CHOICES)}")


def read_cache_rows(db_path: Path, judge_model: str, prompt_version: str | None = None) -> list[dict[str, Any]]:
    """Cached verdicts of one judge (all its prompt versions unless one is given), read without writing."""
    from ..store.ledgers import read_judge_cache

    return read_judge_cache(db_path, judge_model, prompt_version)
