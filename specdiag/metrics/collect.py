"""``specdiag metrics``' pipeline: the engine's run loop with the rules switched off.

One run loop serves ``analyze`` and ``metrics``, so both read inputs, wrappers and deployments the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specdiag.metrics.collector import MetricsCollector
from specdiag.metrics.series import Interval


class DeploymentMetrics:
    """The series of several deployments, each engine's label prefixed with its deployment."""

    def __init__(self, parts: list[tuple[str, MetricsCollector]]) -> None:
        self.parts = parts

    def engines(self) -> list[tuple[str, list[Interval]]]:
        return [(f"{dep} {label}", items) for dep, col in self.parts for label, items in col.engines()]


def collect(paths: list[str], stdin_name: str = "-", cap: int = 10_000_000,
            progress: Callable[[str, int], None] | None = None) -> Any:
    """A MetricsCollector for one deployment, or a DeploymentMetrics over several (both have ``engines()``).

    ``progress(display, bytes_read)`` is called as ``engine.analyze`` calls it.
    """
    from specdiag.engine import AnalyzeOptions, run_analysis

    opts = AnalyzeOptions(paths=tuple(paths), stdin_name=stdin_name, rules=False, metrics_cap=cap, keep_metrics=True)
    report = run_analysis(opts, progress=progress)
    parts = [(d.id, d.metrics) for d in report.deployments if d.metrics is not None]
    if len(parts) == 1:
        return parts[0][1]
    return DeploymentMetrics(parts)
