"""Stats / SpecDecoding lines reach the observers as ``MetricRows`` batches, with what the per-line
stages would have made of them: the same line order around other records, the same years and times,
the same Records when one is asked for, and Events for an observer that asks for events."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdiag import engine
from specdiag.engine import analyze
from specdiag.events import Event
from specdiag.ingest import scan
from specdiag.ingest.envelope import Record
from specdiag.ingest.hot import HotWindow, MetricRows, RowRecord
from specdiag.ingest.records import iter_records
from specdiag.ingest.sources import expand_inputs
from specdiag.observe import Observer
from specdiag.timeutil import rec_time

pytestmark = pytest.mark.skipif(scan.IMPLEMENTATION == "none", reason="no scanner")

STATS = ("({proc} pid={pid}) INFO {ts} [loggers.py:273] Engine 000: Avg prompt throughput: 2095.4 tokens/s, "
         "Avg generation throughput: 444.4 tokens/s, Running: 25 reqs, Waiting: 5 reqs, GPU KV cache usage: 49.1%, "
         "Prefix cache hit rate: 12.2%, External prefix cache hit rate: 55.4%")  # not a terminal's width
SPEC = ("({proc} pid={pid}) INFO {ts} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.71, "
        "Accepted throughput: 105.30 tokens/s, Drafted throughput: 184.50 tokens/s, Accepted: 1053 tokens, "
        "Drafted: 1845 tokens, Per-position acceptance rate: 0.750, 0.567, 0.395, Avg Draft acceptance rate: 57.1%")
LMCACHE = "({proc} pid={pid}) [2025-12-31 23:59:00,000] LMCache INFO: Stored 256 out of total 256 tokens (cache_engine.py:1:x)"
TRACEBACK = ["({proc} pid={pid}) ERROR {ts} [core.py:1] EngineCore failed", "({proc} pid={pid}) Traceback (most recent call last):",
             '({proc} pid={pid})   File "x.py", line 1, in f']


def _pair(proc: str, pid: int, ts: str) -> list[str]:
    return [STATS.format(proc=proc, pid=pid, ts=ts), SPEC.format(proc=proc, pid=pid, ts=ts)]


def _items(path: Path, hot: bool) -> list:
    src = expand_inputs([str(path)])[0]
    return list(iter_records(src, hot=hot or None, window=HotWindow(src.display)))


def _lines_in_order(items: list) -> list[tuple[str, int]]:
    """(what, line) of everything handed on, metric rows expanded, lookup rows left out."""
    out = []
    for it in items:
        if isinstance(it, MetricRows):
            out += [("metric", n) for n in it.lines]
        elif isinstance(it, Record):
            out.append(("metric" if b"throughput" in it.raw or b"SpecDecoding" in it.raw else "record", it.line))
    return out


def _write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "server.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_metric_lines_arrive_as_batches_not_records(tmp_path: Path) -> None:
    log = _write(tmp_path, [line for i in range(20) for line in _pair("APIServer", 1, f"05-06 08:00:{i:02d}")])
    items = _items(log, hot=True)
    assert items and all(isinstance(it, MetricRows) for it in items)
    rows = items[0]
    assert rows.kinds[:4] == ["stats", "spec", "stats", "spec"]
    assert sum(len(it) for it in items) == 40
    assert rows.lines[:3] == [1, 2, 3]


def test_other_records_keep_their_place_between_metric_rows(tmp_path: Path) -> None:
    """A traceback of one process is closed by that process's next stats line: before it, as the per-line
    stages hand it on; a second process's rows do not close it."""
    lines = _pair("APIServer", 1, "05-06 08:00:00")
    lines += [t.format(proc="EngineCore", pid=7, ts="05-06 08:00:01") for t in TRACEBACK]
    lines += _pair("APIServer", 1, "05-06 08:00:02") + _pair("EngineCore", 7, "05-06 08:00:03")
    lines += _pair("APIServer", 1, "05-06 08:00:04")
    log = _write(tmp_path, lines)
    assert _lines_in_order(_items(log, hot=True)) == _lines_in_order(_items(log, hot=False))


def test_a_year_roll_between_metric_rows_cuts_the_batch(tmp_path: Path) -> None:
    lines = [LMCACHE.format(proc="Worker", pid=9)]
    lines += _pair("APIServer", 1, "12-31 23:59:50") + _pair("APIServer", 1, "01-01 00:00:00")
    items = [it for it in _items(_write(tmp_path, lines), hot=True) if isinstance(it, MetricRows)]
    assert [(it.year, len(it)) for it in items] == [(2025, 2), (2026, 2)]
    per_line = [r for r in _items(_write(tmp_path, lines), hot=False) if isinstance(r, Record) and r.kind == "vllm"]
    assert [t for it in items for t in it.times()] == [rec_time(r) for r in per_line]


def test_a_row_builds_the_record_the_per_line_stages_make(tmp_path: Path) -> None:
    log = _write(tmp_path, _pair("EngineCore_DP0", 203, "05-06 08:00:00"))
    rows = _items(log, hot=True)[0]
    ref = rows.record_ref(1)
    assert isinstance(ref, RowRecord)
    built = ref()
    assert ref() is built  # built once
    want = [r for r in _items(log, hot=False) if isinstance(r, Record)][1]
    for attr in ("path", "line", "kind", "level", "ts", "year", "file", "src_line", "raw"):
        assert getattr(built, attr) == getattr(want, attr), attr
    assert built.origin.key == want.origin.key


class _EventSpy(Observer):
    """An observer of the metric templates as events (as a plug-in or the events store is)."""

    events = frozenset({"V_STATS", "V_SPEC"})
    seen: list[tuple] = []

    def observe(self, ev: Event) -> None:
        _EventSpy.seen.append((ev.id, ev.rec.line, ev.f.get("engine"), ev.f.get("body")))


def _spy(_dep: str) -> _EventSpy:
    return _EventSpy()


def test_an_observer_of_metric_events_still_gets_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _write(tmp_path, [line for i in range(5) for line in _pair("APIServer", 1, f"05-06 08:00:{i:02d}")])
    _EventSpy.seen = []
    analyze([str(log)], jobs=1, observers=(_spy,))
    scanned = list(_EventSpy.seen)
    real = engine.iter_records
    monkeypatch.setattr(engine, "iter_records", lambda src, hot=None, window=None, **_scan: real(src, None, window))
    _EventSpy.seen = []
    analyze([str(log)], jobs=1, observers=(_spy,))
    assert len(scanned) == 10
    assert scanned == _EventSpy.seen


def test_interval_series_is_the_same_from_rows_and_from_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [line for i in range(30) for line in _pair("APIServer", 1, f"05-06 08:{i // 60:02d}:{i % 60:02d}")]
    log = _write(tmp_path, lines)

    def series() -> list[tuple]:
        rep = analyze([str(log)], jobs=1, keep_metrics=True, metrics_cap=8)  # compaction runs too
        (_label, ivs), = rep.deployments[0].metrics.engines()
        return [(iv.t, iv.line, iv.n, iv.running, iv.kv, iv.acc, iv.dr, iv.mal, iv.pos, iv.rec.line,
                 iv.spec_rec.line) for iv in ivs]

    rows = series()
    real = engine.iter_records
    monkeypatch.setattr(engine, "iter_records", lambda src, hot=None, window=None, **_scan: real(src, None, window))
    assert rows == series()
    assert len(rows) <= 8


def _reference_merge(a, b) -> dict:
    """What a merge of two intervals means, written plainly: max of the gauges, mean of the rates."""
    def mx(x, y):
        return y if x is None else x if y is None else max(x, y)

    def mean(x, y):
        return y if x is None else x if y is None else (x + y) / 2

    return {"running": mx(a.running, b.running), "waiting": mx(a.waiting, b.waiting), "kv": mx(a.kv, b.kv),
            "preempt": mx(a.preempt, b.preempt), "prefix": mean(a.prefix, b.prefix), "ext": mean(a.ext, b.ext),
            "prompt_tps": mean(a.prompt_tps, b.prompt_tps), "gen_tps": mean(a.gen_tps, b.gen_tps), "n": a.n + b.n}


@pytest.mark.parametrize("pair", [(None, 3), (3, None), (None, None), (2, 2.0), (2.0, 2), (1.5, float("nan")),
                                  (float("nan"), 1.5), (0, -1), (7, 9)])
def test_a_merge_keeps_max_and_mean_as_written(pair: tuple) -> None:
    from specdiag.metrics.series import Interval, merge

    a, b = Interval(1.0, "p", 1, None, "engine"), Interval(2.0, "p", 2, None, "engine")
    for iv, v in zip((a, b), pair, strict=True):
        iv.fill_stats((v, v, v, "GPU", v, v, v, v, v))
    m = merge(a, b)
    want = _reference_merge(a, b)
    got = {k: getattr(m, k) for k in want}
    assert repr(got) == repr(want)  # repr: NaN equals NaN, and int 2 differs from float 2.0
    assert m.dr is None and m.pos is None and m.rec is None


@pytest.mark.parametrize("ts", ["13-45 99:99:99", "00-00 00:00:00", "02-29 23:59:59", "12-31 24:00:60"])
def test_an_impossible_stamp_gives_the_time_the_per_line_stages_give(tmp_path: Path, ts: str) -> None:
    """The scanner checks digits, not calendars: the per-minute cache must fail where ``parse_ts`` fails."""
    lines = [LMCACHE.format(proc="Worker", pid=9)] + _pair("APIServer", 1, ts)
    log = _write(tmp_path, lines)
    rows = [it for it in _items(log, hot=True) if isinstance(it, MetricRows)]
    per_line = [r for r in _items(log, hot=False) if isinstance(r, Record) and r.kind == "vllm"]
    assert [t for it in rows for t in it.times()] == [rec_time(r) for r in per_line]
    assert len(per_line) == 2


@pytest.mark.parametrize("stamps", [[505080135, 505080135, 505080159, 505080200], [1231235959, 101000000],
                                    [1345999999, 505080135], []])
def test_stamp_times_of_a_column_are_each_stamps_time(stamps: list[int]) -> None:
    from specdiag.timeutil import stamp_time, stamp_times

    for year in (None, 2026):
        assert repr(stamp_times(stamps, year)) == repr([stamp_time(s, year) for s in stamps])

