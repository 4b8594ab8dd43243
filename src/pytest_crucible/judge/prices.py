"""Judge model prices, kept as data (``prices.json``) with an as-of date and sources.

Prices are USD per million tokens; the Message Batches discount is a per-model
multiplier (0.5 for every model listed). Some models are priced in bands by prompt
length (Claude Haiku 5.5: above 100,000 prompt tokens every token of the request
costs more), so the judge prices each response on its own (``requests=1``), and
a total over many requests is priced with ``requests=N`` (or with the base band).

This module never imports pytest or the Anthropic SDK.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

DEFAULT_JUDGE_MODEL = "claude-haiku-5-5"
#: Characters per token assumed by :func:`estimate_tokens` (see there).
CHARS_PER_TOKEN = 3.0

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_JUDGE_MODEL",
    "Price",
    "Rates",
    "cache_min_tokens",
    "cost_usd",
    "estimate_tokens",
    "price_for",
    "price_table",
    "prices_as_of",
]


@dataclass(frozen=True)
class Rates:
    """USD per million tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float


@dataclass(frozen=True)
class Price:
    model: str
    name: str
    status: str
    rates: Rates
    batch_multiplier: float
    #: Prompt length (input + cache reads + cache writes of one request) above which ``long_rates`` apply.
    long_prompt_threshold: int | None
    long_rates: Rates | None
    aliases: tuple[str, ...]
    notes: str
    retires: str | None = None
    #: The shortest prompt prefix the model's prompt cache keeps (tokens), where a page documents it.
    cache_min_tokens: int | None = None

    # Convenience views of the base band.
    @property
    def input_per_mtok(self) -> float:
        return self.rates.input

    @property
    def output_per_mtok(self) -> float:
        return self.rates.output

    def rates_for_prompt(self, prompt_tokens: int) -> Rates:
        if self.long_rates is not None and self.long_prompt_threshold is not None and prompt_tokens > self.long_prompt_threshold:
            return self.long_rates
        return self.rates


def _rates(data: dict[str, Any]) -> Rates:
    return Rates(
        input=float(data["input"]),
        output=float(data["output"]),
        cache_write_5m=float(data["cache_write_5m"]),
        cache_write_1h=float(data["cache_write_1h"]),
        cache_read=float(data["cache_read"]),
    )


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("prices.json").read_text(encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def price_table() -> dict[str, Price]:
    """Every priced model, by canonical id."""
    table: dict[str, Price] = {}
    for model, data in _load()["models"].items():
        long_prompt = data.get("long_prompt")
        table[model] = Price(
            model=model,
            name=data["name"],
            status=data["status"],
            rates=_rates(data),
            batch_multiplier=float(data["batch_multiplier"]),
            long_prompt_threshold=int(long_prompt["threshold_tokens"]) if long_prompt else None,
            long_rates=_rates(long_prompt) if long_prompt else None,
            aliases=tuple(data.get("aliases", ())),
            notes=data.get("notes", ""),
            retires=data.get("retires"),
            cache_min_tokens=int(data["cache_min_tokens"]) if data.get("cache_min_tokens") is not None else None,
        )
    return table


def prices_as_of() -> str:
    """The date the price table was compiled (ISO 8601)."""
    return str(_load()["as_of"])


def price_for(model: str) -> Price | None:
    """The price of ``model`` (a canonical id, a listed alias, or ``<id>-YYYYMMDD``); None when unknown."""
    table = price_table()
    if model in table:
        return table[model]
    for price in table.values():
        if model in price.aliases:
            return price
    dated = re.fullmatch(r"(.+)-(?:\d{8}|\d{4}-\d{2}-\d{2})", model)  # claude-...-20251001, gpt-4.1-2025-04-14
    if dated and dated.group(1) in table:
        return table[dated.group(1)]
    return None


def cache_min_tokens(model: str) -> int:
    """The minimum cacheable prompt length of ``model`` in tokens, as documented; 0 when the table has none (a cost
    estimate then takes any prefix to be cacheable, so that it never counts a cache write out)."""
    price = price_for(model)
    return price.cache_min_tokens or 0 if price is not None else 0


def cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    batch: bool = False,
    requests: int | None = None,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    cache_write_1h_tokens: int = 0,
) -> float | None:
    """USD cost of the given token counts; None when the model has no price.

    ``input_tokens`` are uncached input tokens (``usage.input_tokens``);
    ``cache_write_tokens`` are 5-minute cache writes, ``cache_write_1h_tokens``
    1-hour ones. ``batch=True`` applies the model's Message Batches multiplier to
    every category (see the notes in ``prices.json``).

    Prompt-length bands (Claude Haiku 5.5 above 100,000 prompt tokens) need to know
    how many requests the counts cover: pass ``requests`` (1 for one response's
    usage; N for totals over N requests of about equal size, whose average prompt
    then picks the band). Without it the base band is used, which is right for
    judge-sized prompts and keeps totals over many requests from being priced as
    one huge prompt.
    """
    price = price_for(model)
    if price is None:
        return None
    rates = price.rates
    if requests:
        prompt_tokens = input_tokens + cache_read_tokens + cache_write_tokens + cache_write_1h_tokens
        rates = price.rates_for_prompt(math.ceil(prompt_tokens / requests))
    total = (
        input_tokens * rates.input
        + output_tokens * rates.output
        + cache_read_tokens * rates.cache_read
        + cache_write_tokens * rates.cache_write_5m
        + cache_write_1h_tokens * rates.cache_write_1h
    ) / 1_000_000
    if batch:
        total *= price.batch_multiplier
    return total


def estimate_tokens(text: str) -> int:
    """A deliberately high token estimate for ``text``: ``ceil(len(text) / 3)``.

    English prose averages about four characters per token with the older Claude
    tokenizer; the tokenizer of Claude 4.7 and later models (Claude Haiku 5.5
    included) counts about 30% more tokens for the same text, i.e. about three
    characters per token. Three is used so that a cost estimate errs on the high
    side. For exact counts before a run, ``client.messages.count_tokens`` asks the
    API; after a run, every response's ``usage`` gives the billed numbers.
    """
    if not text:
        return 0
    return math.ceil(len(text) / CHARS_PER_TOKEN)
