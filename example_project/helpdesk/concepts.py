"""Glossary of named entities used across the knowledge base.

Concept ids are stable identifiers (``concept:<slug>``) for products, plans,
systems and programmes. The pipeline reports which of them occur in the
retrieved text, which lets an evaluation check that the right entities were
surfaced even when the exact chunk differs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

GLOSSARY: dict[str, tuple[str, ...]] = {
    # bikes
    "concept:vela-e2": ("Vela E2",),
    "concept:vela-e3": ("Vela E3",),
    "concept:kestrel-trail": ("Kestrel Trail", "Kestrel"),
    "concept:atlas-cargo": ("Atlas Cargo", "Atlas"),
    "concept:fold-f1": ("Fold F1",),
    "concept:strada-road": ("Strada Road", "Strada"),
    "concept:pico": ("Pico 16", "Pico 20", "Pico"),
    # drive system
    "concept:pb-500": ("PB-500",),
    "concept:pb-625": ("PB-625",),
    "concept:fb-300": ("FB-300",),
    "concept:nw-m5": ("NW-M5",),
    "concept:nw-m7": ("NW-M7",),
    "concept:nw-m8": ("NW-M8",),
    "concept:nw-m9": ("NW-M9",),
    "concept:fast-charger": ("Fast Charger 6A", "fast charger"),
    "concept:standard-charger": ("Standard Charger 4A", "standard charger"),
    "concept:dual-battery-kit": ("Dual Battery Kit",),
    "concept:gps-tracker": ("GPS tracker",),
    "concept:battery-recall": ("RC-2024-01", "safety recall", "recall"),
    # plans and services
    "concept:ride-pass": ("Ride Pass",),
    "concept:care-basic": ("Care Basic",),
    "concept:care-plus": ("Care Plus",),
    "concept:fleet-care": ("Fleet Care", "Care Fleet"),
    "concept:ride-app": ("Northwind Ride app", "Ride app"),
    "concept:mobile-van": ("mobile service van", "service van", "mobile van"),
    "concept:loaner-bike": ("loaner",),
    "concept:first-service": ("first service",),
    "concept:roadside-assistance": ("roadside assistance",),
    "concept:price-match": ("price match", "price-match"),
    "concept:trade-in": ("trade-in", "trade in", "traded in"),
    # internal systems and programmes
    "concept:peoplehub": ("PeopleHub",),
    "concept:keystack": ("KeyStack",),
    "concept:nw-connect": ("NW Connect",),
    "concept:mfa": ("multi-factor authentication", "MFA"),
    "concept:rma-system": ("RMA system",),
    "concept:speakup": ("SpeakUp",),
    "concept:cycle-to-work": ("Cycle to Work",),
}


def _compile(aliases: Iterable[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(a) for a in sorted(aliases, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE)


class ConceptGlossary:
    def __init__(self, glossary: dict[str, tuple[str, ...]] | None = None) -> None:
        self._patterns = {cid: _compile(aliases) for cid, aliases in (glossary or GLOSSARY).items()}

    def detect(self, texts: Iterable[str]) -> list[str]:
        """Concept ids mentioned in *texts*, in order of first appearance."""
        found: dict[str, int] = {}
        for offset, text in enumerate(texts):
            for cid, pattern in self._patterns.items():
                if cid in found:
                    continue
                m = pattern.search(text)
                if m:
                    found[cid] = offset * 100_000 + m.start()
        return sorted(found, key=found.__getitem__)
