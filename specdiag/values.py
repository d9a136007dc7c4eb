"""Measurement values as a reader wants them: ``yes``/``no``, ``batch 2–64: K=0``, never a Python repr.

Shared by the renderers and by rules that print a schedule in a summary. Log-derived strings are not sanitised here; each renderer passes
the result through its channel's sanitiser.
"""

from __future__ import annotations

from typing import Any


def is_schedule(v: Any) -> bool:
    """A dynamic-K schedule: ``[[batch_lo, batch_hi, K], ...]`` (vLLM ``num_speculative_tokens_per_batch_size``)."""
    return (isinstance(v, (list, tuple)) and bool(v)
            and all(isinstance(r, (list, tuple)) and len(r) == 3
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in r) for r in v))


def schedule_rows(v: Any) -> list[tuple[str, int]]:
    """``[[1, 1, 3], [2, 64, 0]]`` → ``[("1", 3), ("2–64", 0)]`` (batch-size range, K)."""
    return [(str(lo) if lo == hi else f"{lo}–{hi}", k) for lo, hi, k in v] if is_schedule(v) else []


def schedule_text(v: Any) -> str:
    return "; ".join(f"batch {b}: K={k}" for b, k in schedule_rows(v))


def format_value(v: Any, limit: int = 3) -> str:
    """One measurement value as text: lists joined (the first ``limit`` items, then "+N more"), numbers
    without float noise, booleans as yes/no, mappings as ``k=v``."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if v is None:
        return "—"
    if is_schedule(v):
        return schedule_text(v)
    if isinstance(v, dict):
        items = [f"{k}={format_value(x, limit)}" for k, x in list(v.items())[:limit]]
        more = len(v) - limit
        return ", ".join(items) + (f" (+{more} more)" if more > 0 else "")
    if isinstance(v, (list, tuple, set, frozenset)):
        seq = list(v)
        shown = [format_value(x, limit) if isinstance(x, (list, tuple, dict)) else format_value(x) for x in seq[:limit]]
        if seq and all(isinstance(x, (list, tuple)) for x in seq[:limit]):
            shown = [s.replace(", ", "/") for s in shown]
        more = len(seq) - limit
        return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")
    return str(v)


__all__ = ["format_value", "is_schedule", "schedule_rows", "schedule_text"]
