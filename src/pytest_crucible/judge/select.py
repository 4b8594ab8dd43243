"""Which judge a session (or a command) uses, from its name: the one place a judge name becomes a judge.

* ``auto``: Claude when ``ANTHROPIC_API_KEY`` is set, else the offline lexical judge (only when asked for by name:
  the default is ``lexical``, whatever the environment holds);
* ``lexical`` (= ``lexical-v3``), ``lexical-v2``, ``lexical-v1``: the offline heuristics;
* ``anthropic``: Claude through the Anthropic SDK; ``openai``: any OpenAI-compatible server through the
  ``openai`` SDK (the ``openai`` extra);
* ``aligned:PATH``: the offline judge aligned to a team's labels, the JSON file ``crucible judge align`` wrote
  (:mod:`.aligned`: identity ``aligned-<hash12>`` of the file's content);
* a name a plugin registered (``pytest_crucible_register_judges``), or ``package.module:ClassName``:
  the team's own judge (:mod:`.custom_judge`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..defaults import JUDGE_CHOICES
from .engine import Judge

if TYPE_CHECKING:
    from ..store.postgres import DatabaseURL

__all__ = ["JudgeSetupError", "load_judge_class", "make_judge", "parse_price", "read_cache_rows", "registered_judges"]


class JudgeSetupError(Exception):
    """The requested judge cannot be used; ``str()`` is the user-facing message."""


#: The providers whose key in the environment a paid judge would use, and the judge that uses it.
PROVIDER_KEYS = (("ANTHROPIC_API_KEY", "anthropic"), ("OPENAI_API_KEY", "openai"))


def unused_key_note() -> list[str]:
    """``NOTE ANTHROPIC_API_KEY is set: --crucible-judge=anthropic uses it ...``, for each provider key set in the
    environment of a session that named no judge (the offline judge ran)."""
    return [f"NOTE {variable} is set: --crucible-judge={judge} uses it (estimate before the first call); "
            "this run used the offline judge" for variable, judge in PROVIDER_KEYS if os.environ.get(variable)]


def make_judge(name: str = "lexical", *, model: str | None = None, batch: bool = False,
               price_per_mtok: tuple[float, float] | None = None, registered: Mapping[str, Any] | None = None,
               concurrency: int = 1) -> Judge:
    """The judge called ``name``; ``registered``: the judges plugins registered, by name; ``concurrency``: a model
    judge keeps up to that many requests in flight (at least JUDGE_REQUESTS_IN_FLIGHT)."""
    from ..defaults import JUDGE_REQUESTS_IN_FLIGHT

    in_flight = max(JUDGE_REQUESTS_IN_FLIGHT, concurrency)
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
        judge = AnthropicJudge(model or DEFAULT_JUDGE_MODEL, batch=batch, max_concurrency=in_flight)
        judge.price_override = price_per_mtok
        return judge
    if name == "openai":
        return _openai_judge(model, batch, price_per_mtok, in_flight)
    if name == "aligned" or name.startswith("aligned:"):
        return _aligned(name.partition(":")[2])
    if registered and name in registered:
        return _custom(registered[name], f"registered as {name!r}")
    if ":" in name:
        return _custom(load_judge_class(name), name)
    extra = f", {', '.join(sorted(registered))}" if registered else ""
    raise JudgeSetupError(f"unknown judge {name!r}: expected one of {', '.join(JUDGE_CHOICES)}{extra}, "
                          "or package.module:ClassName\n"
                          "HINT: a judge of your own is named by its import path (mypackage.judges:MyJudge) or "
                          "registered by the hook pytest_crucible_register_judges (docs/judges.md)")


def _openai_judge(model: str | None, batch: bool, price_per_mtok: tuple[float, float] | None, in_flight: int) -> Judge:
    if importlib.util.find_spec("openai") is None:
        raise JudgeSetupError("--crucible-judge=openai needs the openai SDK, which is not installed\n"
                              "HINT: pip install 'pytest-crucible[openai]'")
    if not model:
        raise JudgeSetupError("--crucible-judge=openai needs a model: there is no default for an OpenAI-compatible server\n"
                              "HINT: --crucible-judge-model=gpt-4.1-mini (or ini crucible_judge_model; for a local "
                              "server, the name it serves, e.g. llama3.1:8b)")
    if not os.environ.get("OPENAI_API_KEY"):
        raise JudgeSetupError("--crucible-judge=openai needs an API key: OPENAI_API_KEY is not set\n"
                              "HINT: export OPENAI_API_KEY=... (a local server that checks none takes any value, "
                              "e.g. OPENAI_API_KEY=local), and OPENAI_BASE_URL=http://127.0.0.1:8000/v1 for a local server")
    from .openai_judge import OpenAIJudge

    # The SDK reads OPENAI_API_KEY and OPENAI_BASE_URL itself; the key never passes through us.
    return OpenAIJudge(model, batch=batch, price_per_mtok=price_per_mtok, max_concurrency=in_flight)


def _aligned(path: str) -> Judge:
    if not path.strip():
        raise JudgeSetupError("--crucible-judge=aligned needs the aligned judge's file: aligned:PATH\n"
                              "HINT: --crucible-judge=aligned:judges/aligned.json (written by crucible judge align LABELS.jsonl "
                              "--judge lexical -o judges/aligned.json)")
    from .aligned import AlignedFileError, load_aligned_judge

    try:
        return load_aligned_judge(path)
    except AlignedFileError as exc:
        raise JudgeSetupError(f"aligned judge {exc}") from None


def load_judge_class(path: str) -> Any:
    """The class (or factory) ``package.module:Name`` names; a clear error when it cannot be imported."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise JudgeSetupError(f"judge {path!r}: expected package.module:ClassName\nHINT: e.g. mypackage.judges:MyJudge")
    try:
        module = _import(module_name)
    except ImportError as err:
        raise JudgeSetupError(f"judge {path!r}: cannot import module {module_name!r} ({err})\n"
                              "HINT: install the package that holds it, or run from the directory that holds it") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise JudgeSetupError(f"judge {path!r}: module {module_name!r} has no {attribute!r}\n"
                              f"HINT: check the name after the colon ({module.__file__})") from None


def _import(module_name: str) -> Any:
    """The module, found like ``python -m`` finds it: installed, or below the current directory (the CLI's
    sys.path starts at its script, not where it runs; under pytest the rootdir is there already)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        here = os.getcwd()
        if here in sys.path or not (err.name or "").split(".")[0] == module_name.split(".")[0]:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)


def _custom(target: Any, source: str) -> Judge:
    from .custom_judge import CustomJudge, CustomJudgeError

    if isinstance(target, Judge):
        return target  # a built-in judge, configured by a plugin (e.g. OpenAIJudge with its own client)
    try:
        impl = target() if isinstance(target, type) else target
    except Exception as err:
        raise JudgeSetupError(f"judge {source}: creating it raised {type(err).__name__}: {err}") from None
    if isinstance(impl, Judge):
        return impl
    try:
        return CustomJudge(impl, source, reserved=(*JUDGE_CHOICES, "openai"))
    except CustomJudgeError as err:
        raise JudgeSetupError(str(err)) from None


def registered_judges(returned: list[Any]) -> dict[str, Any]:
    """Judges by name from what ``pytest_crucible_register_judges`` implementations returned (each a judge
    class or instance, a list of them, or None)."""
    found: dict[str, Any] = {}
    for value in returned:
        for judge in value if isinstance(value, (list, tuple)) else [value]:
            if judge is None:
                continue
            name = getattr(judge, "name", None) or getattr(judge, "model", None)
            if not isinstance(name, str) or not name:
                raise JudgeSetupError(f"pytest_crucible_register_judges returned {judge!r}, which has no name\n"
                                      "HINT: give the class a name = '...' and a version = '...'")
            found[name] = judge
    return found


def parse_price(text: str, where: str) -> tuple[float, float] | None:
    """``"0.40,1.60"`` (USD per million input and output tokens) or ``"0"``: a price; ``""``: none."""
    text = text.strip()
    if not text:
        return None
    parts = [part.strip() for part in text.replace("/", ",").split(",")]
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or any(not 0 <= v < float("inf") for v in values):  # no NaN, no inf
        raise JudgeSetupError(f"{where} = {text!r}: expected USD per million tokens, input and output, e.g. 0.40,1.60 "
                              "(one number: the same for both)\nHINT: 0 for a self-hosted model you do not pay per token")
    return (values[0], values[-1])


def read_cache_rows(db_path: str | Path | DatabaseURL, judge_model: str, prompt_version: str | None = None) -> list[dict[str, Any]]:
    """Cached verdicts of one judge (all its prompt versions unless one is given), read without writing."""
    from ..store.ledgers import read_judge_cache

    return read_judge_cache(db_path, judge_model, prompt_version)
