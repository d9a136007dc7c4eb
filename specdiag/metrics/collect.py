"""A light pipeline for ``specdiag metrics``: inputs → records → events → MetricsCollector (no rules)."""

from __future__ import annotations

from collections.abc import Callable

from specdiag.metrics.collector import MetricsCollector


def collect(paths: list[str], stdin_name: str = "-", cap: int = 10_000_000,
            progress: Callable[[str, int], None] | None = None) -> MetricsCollector:
    """``progress(display, bytes_read)`` is called every 4096 records (as ``engine.analyze`` does)."""
    from specdiag.events import default_matcher
    from specdiag.ingest import expand_inputs, iter_records

    col = MetricsCollector(cap=cap)
    matcher = default_matcher()
    wanted = col.events
    for src in expand_inputs(paths, stdin_name=stdin_name):
        for n, rec in enumerate(iter_records(src), 1):
            if progress is not None and not n & 0xFFF:
                progress(src.display, src.stats.bytes_read)
            if rec.kind != "vllm" and rec.kind != "lmcache":
                continue
            ev = matcher.match(rec)
            if ev is not None and ev.id in wanted:
                col.observe(ev)
    return col
