"""Small-sample statistics for the places where counts become words (repro verdicts, fleet contrasts).

An experiment cell or a fleet group is usually a handful of runs or deployments, so normal
approximations are wrong exactly where they are used: this module keeps the exact or well-behaved
forms (Wilson score interval, Fisher's exact test) in pure Python with no dependency, one helper per
concept.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, sqrt

#: two-sided 95 % normal quantile, the only confidence level the reports use
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Rate:
    """``hits`` out of ``n`` with its Wilson 95 % interval; ``n == 0`` has no rate (``value`` None)."""

    hits: int
    n: int
    low: float
    high: float

    @property
    def value(self) -> float | None:
        return self.hits / self.n if self.n else None

    def describe(self) -> str:
        """``3/40 = 7.5 % (95 % CI 2.6–19.9 %)``, or ``0/0 (no exposure)``."""
        if not self.n:
            return "0/0 (no exposure)"
        return (f"{self.hits}/{self.n} = {100 * self.hits / self.n:.1f} % "
                f"(95 % CI {100 * self.low:.1f}–{100 * self.high:.1f} %)")


def wilson(hits: int, n: int, z: float = Z95) -> Rate:
    """The Wilson score interval: never outside [0, 1], sensible at 0/n and n/n, unlike the Wald
    interval, which says 0/5 is certain. ``n == 0`` gives the whole of [0, 1]."""
    if hits < 0 or n < 0 or hits > n:
        raise ValueError(f"need 0 <= hits <= n, got {hits}/{n}")
    if n == 0:
        return Rate(0, 0, 0.0, 1.0)
    p = hits / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if hits == 0 else max(0.0, centre - half)
    high = 1.0 if hits == n else min(1.0, centre + half)
    return Rate(hits, n, low, high)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test for the 2×2 table ``[[a, b], [c, d]]`` (rows: the two
    groups; columns: with / without the outcome). Sums the probabilities of every table with the same
    margins that is no more likely than the one seen (the usual two-sided definition, as R and SciPy).
    """
    if min(a, b, c, d) < 0:
        raise ValueError("counts must be non-negative")
    row1, row2, col1 = a + b, c + d, a + c
    total = row1 + row2
    if total == 0 or row1 == 0 or row2 == 0 or col1 == 0 or col1 == total:
        return 1.0
    denom = comb(total, col1)

    def prob(x: int) -> float:
        return comb(row1, x) * comb(row2, col1 - x) / denom

    seen = prob(a)
    lo, hi = max(0, col1 - row2), min(row1, col1)
    p = sum(q for q in map(prob, range(lo, hi + 1)) if q <= seen * (1 + 1e-7))
    return min(1.0, p)


def describe_p(p: float) -> str:
    """A p-value as reports print it: ``p = 0.031``, ``p < 0.001``."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}" if p < 0.1 else f"p = {p:.2f}"


#: the significance level below which a comparison is called decisive in words
ALPHA = 0.05
