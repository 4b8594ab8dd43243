"""The result of one paired comparison of a metric (:class:`PairedTest`), in a module of its own so that
the independent-items tests (``stats/__init__``) and the clustered ones (``stats/clustered``) share it
without importing each other."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class PairedTest:
    """Outcome of comparing one metric between two runs (``delta = b - a``).

    ``significant`` requires both gates: the BCa interval excludes 0 *and*
    the permutation p-value is below ``alpha``.  ``mde`` is the minimum
    detectable effect at this ``n`` (80% power by default); ``required_n``
    is, for a non-significant result with a non-zero ``delta``, how many
    items would be needed to detect an effect of the observed size with
    that power (normal approximation, see :mod:`.power`; never fewer than
    :func:`min_pairs_for_alpha`), and ``None`` otherwise.  ``sd_diff`` is the
    sample standard deviation (ddof=1) of the paired differences.
    """

    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    mde: float
    required_n: int | None
    sd_diff: float
    n: int
    confidence: float
    alpha: float
    power: float
    seed: int
    n_resamples: int
    n_permutations: int

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)

    @property
    def p(self) -> float:
        return self.p_value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checked_options(*, seed: Any, n_resamples: Any, n_permutations: Any, confidence: Any, alpha: Any,
                    power: Any) -> dict[str, Any]:
    """The options of a paired comparison, checked once for every test that takes them (independent
    items and clusters alike); ValueError naming the bad one."""
    from .bootstrap import _check_confidence, _check_positive_int, _check_seed
    from .power import _check_level

    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return {"seed": _check_seed(seed), "n_resamples": _check_positive_int("n_resamples", n_resamples),
            "n_permutations": _check_positive_int("n_permutations", n_permutations),
            "confidence": _check_confidence(confidence), "alpha": alpha, "power": _check_level("power", power)}
