"""Metric rows (vLLM stats and SpecDecoding lines, scanned into columns) among lines the prefilter counts: the
counted lines before a metric row are passed over until the next line read (``_Inert.passes_over``), and
the report is the one every line read gives — with records left open, processes first seen on counted
lines, a December month and a wrapper that dates lines in the mix."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from specdiag.ingest import blocks

pytest.importorskip("specdiag.ingest._scan")

from test_prefilter import _analyse  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STATS = ("(EngineCore_DP0 pid=7) INFO {m}-06 15:56:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
         "{p}.0 tokens/s, Avg generation throughput: 9.0 tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV "
         "cache usage: {k}.5%, Prefix cache hit rate: 41.8%")
SPEC = ("(EngineCore_DP0 pid=7) INFO {m}-06 15:56:{s:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance "
        "length: 2.41, Accepted throughput: 58.20 tokens/s, Drafted throughput: 121.10 tokens/s, Accepted: 582 "
        "tokens, Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455, 0.253, Avg Draft acceptance "
        "rate: 48.1%")
QUIET = ("(Worker_TP{r} pid=7{r}) DEBUG {m}-06 15:56:{s:02d} [shm_broadcast.py:227] Poller received cancel event",
         "node-1:1234:5678 [0] NCCL INFO Channel 00/02 : 0 1",
         "2026-05-06 08:12:21,060 - myapp.db - INFO - retrying upstream call (attempt 4)")
OPEN = ["(APIServer pid=1) ERROR {m}-06 15:56:{s:02d} [core.py:94] EngineCore failed to start.",
        "Traceback (most recent call last):",
        '  File "/x/vllm/v1/engine/core.py", line 1, in run',
        "RuntimeError: boom"]


def _mixed(rng: random.Random, n: int, month: str = "05") -> list[str]:
    out = []
    for i in range(n):
        pick = rng.random()
        fields = {"m": month, "s": i % 60, "r": rng.randrange(4), "p": rng.randrange(900), "k": rng.randrange(99)}
        if pick < 0.25:
            out.append((STATS if rng.random() < 0.6 else SPEC).format(**fields))
        elif pick < 0.2505:
            out += [line.format(**fields) for line in OPEN[: rng.randrange(1, 5)]]
        else:
            out.append(rng.choice(QUIET).format(**fields))
    return out


def _passed(log: Path, monkeypatch) -> int:
    """How many metric rows passed over the counted lines before them (the analysis run in-process)."""
    from specdiag.engine import analyze

    count = [0]
    real = blocks._Inert.passes_over

    def counting(self, n):
        got = real(self, n)
        count[0] += got
        return got

    monkeypatch.setattr(blocks._Inert, "passes_over", counting)
    analyze([str(log)])
    return count[0]


@pytest.mark.parametrize("month", ["05", "12"])
def test_metric_rows_among_counted_lines_report_what_reading_every_line_reports(tmp_path, monkeypatch, month):
    rng = random.Random(int(month))
    start = (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_text().splitlines()
    log = tmp_path / "metrics.log"
    log.write_text("\n".join(start + _mixed(rng, 40_000, month)) + "\n")
    assert log.stat().st_size > 3 << 20
    assert _analyse(log, "on") == _analyse(log, "off")
    passed = _passed(log, monkeypatch)
    if month == "05":
        assert passed > 5_000
    else:  # a December record waits for the year roll: every metric row reads what is before it
        assert passed < 1_000


def test_metric_rows_behind_timestamps_report_what_reading_every_line_reports(tmp_path):
    """kubectl ``--timestamps``: each counted line dates the reader, so metric rows never pass over them."""
    rng = random.Random(3)
    lines = [f"2026-05-06T15:56:{i % 60:02d}.{i % 1000:03d}Z {line}" for i, line in enumerate(_mixed(rng, 30_000))]
    log = tmp_path / "dated.log"
    log.write_text("\n".join(lines) + "\n")
    assert _analyse(log, "on") == _analyse(log, "off")
