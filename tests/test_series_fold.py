"""The interval series folds rows a column at a time: what a fold means, that a long series keeps rows of
equal width within its cap, and that batches cut anywhere give the series of one row at a time."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdiag.events import default_matcher
from specdiag.ingest import scan
from specdiag.ingest.hot import HotWindow, MetricRows
from specdiag.ingest.records import iter_records
from specdiag.ingest.sources import expand_inputs
from specdiag.metrics.series import FAN_IN, SeriesTracker, fold, fold_groups

STATS = ("({proc} pid={pid}) INFO 05-06 {ts} [loggers.py:273] Engine 000: Avg prompt throughput: {p}.0 tokens/s, "
         "Avg generation throughput: 44.5 tokens/s, Running: {run} reqs, Waiting: 0 reqs, GPU KV cache usage: 4.5%, "
         "Prefix cache hit rate: 1{p}.5%")
SPEC = ("({proc} pid={pid}) INFO 05-06 {ts} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: {mal}, "
        "Accepted throughput: 1.30 tokens/s, Drafted throughput: 4.50 tokens/s, Accepted: {acc} tokens, "
        "Drafted: {dr} tokens, Per-position acceptance rate: 0.{p}50, 0.567, Avg Draft acceptance rate: 57.1%")
OTHER = "(Worker pid=9) [2026-05-06 08:00:00,000] LMCache WARNING: something else (cache_engine.py:1:x)"


def _row(t, n=1, running=None, kv=None, prefix=None, acc=None, dr=None, mal=None, pos=None, nd=None) -> list:
    return [t, int(t), f"rec{t}", n, running, None, kv, "GPU", prefix, None, None, None, None,
            acc, dr, mal, None if not dr else acc / dr, pos, nd, f"spec{t}" if dr else None]


def test_a_fold_is_max_of_gauges_mean_of_rates_sums_of_counts_and_weighted_positions() -> None:
    rows = [_row(1.0, running=3, kv=0.5, prefix=0.2, acc=10, dr=20, mal=1.5, pos=[0.5, 0.25], nd=20.0),
            _row(2.0, running=None, kv=float("nan"), prefix=None, acc=30, dr=40, mal=2.5, pos=[1.0, 0.5], nd=20.0),
            _row(3.0, running=7, kv=0.1, prefix=0.4, acc=0, dr=10, mal=1.0, pos=[0.0], nd=10.0)]
    out = fold(rows)
    assert out[:4] == [1.0, 1, "rec1.0", 3]
    assert out[4] == 7  # the largest printed running count
    assert out[6] == 0.5  # max() keeps the first of 0.5 and NaN, as a left fold of ``y if y > x else x`` does
    assert out[8] == pytest.approx(0.3)  # the mean of the two printed prefix hit rates
    assert (out[13], out[14], out[18]) == (40, 70, 50.0)
    assert out[15] == pytest.approx(1 + 40 / 50)  # mean acceptance length from the summed counts
    assert out[16] == pytest.approx(40 / 70)
    # the third row printed one position only: left out; the others weighted by their drafts
    assert out[17] == pytest.approx([(0.5 * 20 + 1.0 * 20) / 40, (0.25 * 20 + 0.5 * 20) / 40])
    assert out[19] == "spec1.0"
    assert all(r[3] == 1 for r in rows)  # rows are not mutated


def test_a_fold_of_rows_without_drafted_counts_keeps_the_printed_rate() -> None:
    a, b = _row(1.0), _row(2.0)
    a[15], a[16], b[16] = 1.8, 0.4, 0.6
    out = fold([a, b])
    assert out[14] is None and out[15] == 1.8 and out[16] == pytest.approx(0.5)


def _log(tmp_path: Path, pairs: int, cut_every: int = 0) -> Path:
    lines = []
    for i in range(pairs):
        ts = f"08:{i // 60 % 60:02d}:{i % 60:02d}"
        lines.append(STATS.format(proc="APIServer", pid=1, ts=ts, p=i % 10, run=i % 7))
        if cut_every and i % cut_every == 0:  # another process's line between a stats line and its SpecDecoding line
            lines.append(OTHER)
        lines.append(SPEC.format(proc="APIServer", pid=1, ts=ts, p=i % 10, mal=f"{1 + i % 3}.25", acc=i, dr=2 * i + 1))
    p = tmp_path / "server.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def _series_from_batches(log: Path, cap: int) -> SeriesTracker:
    src = expand_inputs([str(log)])[0]
    tr = SeriesTracker(cap=cap)
    for it in iter_records(src, hot=True, window=HotWindow(src.display)):
        if isinstance(it, MetricRows):
            tr.observe_rows(it)
    return tr


def _series_line_by_line(log: Path, cap: int) -> SeriesTracker:
    src = expand_inputs([str(log)])[0]
    tr, matcher = SeriesTracker(cap=cap), default_matcher()
    for rec in iter_records(src):
        ev = matcher.match(rec)
        if ev is not None:
            tr.observe(ev)
    return tr


def _digest(tr: SeriesTracker) -> list:
    return [[(iv.t, iv.line, iv.n, iv.running, iv.kv, iv.prefix, iv.acc, iv.dr, iv.mal, iv.rate, iv.pos, iv.ndrafts,
              iv.rec.line, iv.spec_rec.line if iv.spec_rec else None) for iv in ivs] for ivs in tr.engines.values()]


@pytest.mark.skipif(scan.IMPLEMENTATION == "none", reason="no scanner")
@pytest.mark.parametrize("cut_every", [0, 3, 7])
def test_batches_cut_anywhere_give_the_series_of_one_line_at_a_time(tmp_path: Path, cut_every: int) -> None:
    log = _log(tmp_path, 300, cut_every)
    batched, single = _series_from_batches(log, 16), _series_line_by_line(log, 16)
    assert _digest(batched) == _digest(single)
    (ivs,) = batched.engines.values()
    assert sum(iv.n for iv in ivs) == 300 and sum(iv.acc for iv in ivs) == sum(range(300))


@pytest.mark.skipif(scan.IMPLEMENTATION == "none", reason="no scanner")
@pytest.mark.parametrize(("cap", "cut_every"), [(16, 40), (16, 25), (64, 9), (5, 40)])
def test_batches_past_the_cap_folded_as_columns_give_the_series_of_one_line_at_a_time(
        tmp_path: Path, cap: int, cut_every: int) -> None:
    """Batches of tens of pairs arriving at strides 4, 16, 64, … (folded from columns, compactions inside a
    batch, a cap that is not a multiple of FAN_IN) give the rows of one line at a time."""
    log = _log(tmp_path, 3000, cut_every)
    batched, single = _series_from_batches(log, cap), _series_line_by_line(log, cap)
    assert _digest(batched) == _digest(single)
    (ivs,) = batched.engines.values()
    assert sum(iv.n for iv in ivs) == 3000 and len(ivs) <= cap


def test_a_series_past_its_cap_keeps_rows_of_one_width(tmp_path: Path) -> None:
    cap = 16
    tr = _series_line_by_line(_log(tmp_path, 1000), cap)
    (ivs,) = tr.engines.values()
    widths = [iv.n for iv in ivs]
    assert cap // FAN_IN <= len(ivs) <= cap
    assert len(set(widths[:-1])) == 1 and widths[-1] <= widths[0]  # the newest row may be a shorter group
    assert sum(widths) == 1000
    assert not any(isinstance(iv.kv, float) and math.isnan(iv.kv) for iv in ivs)


@pytest.mark.skipif(scan.IMPLEMENTATION == "none", reason="no scanner")
def test_a_batch_that_opens_with_a_spec_line_of_its_own_keeps_every_rows_record(tmp_path: Path) -> None:
    """A SpecDecoding line whose stats line already had one becomes a row of its own at the head of the
    next batch: the rows after it still begin their groups with a Record (shown as evidence)."""
    lines = []
    for i in range(400):
        ts = f"08:{i // 60 % 60:02d}:{i % 60:02d}"
        spec = SPEC.format(proc="APIServer", pid=1, ts=ts, p=i % 10, mal="1.25", acc=i, dr=2 * i + 1)
        lines += [STATS.format(proc="APIServer", pid=1, ts=ts, p=i % 10, run=1), spec]
        if i % 5 == 0:
            lines += [OTHER, spec]  # a batch cut, then the same SpecDecoding line again
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    batched, single = _series_from_batches(log, 16), _series_line_by_line(log, 16)
    assert _digest(batched) == _digest(single)  # _digest reads iv.rec.line of every row


_GAUGE = st.one_of(st.none(), st.integers(0, 50), st.floats(-1.0, 1e6), st.just(math.nan), st.just(-0.0))
_COUNT = st.one_of(st.none(), st.integers(0, 3), st.integers(0, 10_000), st.floats(0.0, 1e4))
_POSITIONS = st.one_of(st.none(), st.just([]), st.lists(st.one_of(st.none(), st.floats(0.0, 1.0)), min_size=2, max_size=2),
                       st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3))


@st.composite
def _rows(draw, common: bool) -> list:
    """Random interval rows; ``common``: every row with a SpecDecoding line and 3 printed positions (the path
    ``fold_groups`` takes a column at a time), else anything ``fold`` may meet (None, NaN, zero counts, ragged
    positions, rows without a SpecDecoding line)."""
    t = draw(st.floats(0, 1e6))
    gauges = [draw(_GAUGE) for _ in range(9)]
    dev = draw(st.sampled_from(["GPU", "", None, "CPU"]))
    if common:
        acc, dr, nd = draw(st.integers(0, 500)), draw(st.integers(1, 900)), draw(st.integers(1, 300))
        pos = draw(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3))
        mal, rate, ref = draw(_GAUGE), acc / dr, draw(st.sampled_from(["spec", None]))
    else:
        acc, dr, nd, mal, rate = (draw(_COUNT) for _ in range(5))
        pos, ref = draw(_POSITIONS), draw(st.sampled_from(["spec", None, ""]))
    return [t, int(t), draw(st.sampled_from(["rec", None])), draw(st.integers(1, 16)), gauges[0], gauges[1], gauges[2],
            dev, gauges[3], gauges[4], gauges[5], gauges[6], gauges[7], acc, dr, mal, rate, pos, nd, ref]


def _same(a, b) -> bool:
    """Equal to the bit: NaN where NaN, the same type, lists alike element by element."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and (a == b or a is b) and str(a) == str(b)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from([2, 3, 4, 16]), st.integers(1, 6), st.booleans())
def test_folding_every_group_at_once_gives_folds_result_to_the_bit(data, stride: int, groups: int, common: bool) -> None:
    rows = data.draw(st.lists(_rows(common), min_size=stride * groups, max_size=stride * groups))
    expected = [fold(rows[i : i + stride]) for i in range(0, len(rows), stride)]
    assert _same(fold_groups(rows, stride), expected)


def test_a_log_naming_a_new_engine_on_every_line_keeps_memory_bounded(tmp_path) -> None:
    """Rows of engines past MAX_ENGINES are counted and named in a note, not kept: memory must not grow
    with a log that names a new engine every few lines (a generator's or a hostile log's)."""
    from specdiag.engine import analyze
    from specdiag.metrics.series import MAX_ENGINES

    line = ("(APIServer pid=1) INFO 05-06 08:01:{s:02d} [loggers.py:127] Engine {e:03d}: Avg prompt throughput: "
            "35.7 tokens/s, Avg generation throughput: 82.2 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 8.2%, Prefix cache hit rate: 10.0%")
    log = tmp_path / "engines.log"
    log.write_text("\n".join(line.format(s=e % 60, e=e) for e in range(MAX_ENGINES + 36)) + "\n")
    rep = analyze([str(log)], keep_metrics=True)
    dep = rep.deployments[0]
    assert len(dep.metrics.series.engines) == MAX_ENGINES
    assert any("36 stats/SpecDecoding line(s) of engines past the first 64" in n for n in dep.notes)


def _sparse_log(tmp_path: Path, n: int, seed: int, spec_share: float, engines: int = 1, repeat: float = 0.01) -> Path:
    """Stats lines each followed by its SpecDecoding line only sometimes (vLLM prints one only for an interval
    that verified drafts), another process's line now and then, a repeated SpecDecoding line rarely, and
    with ``engines`` > 1 the engine label changing between stats lines."""
    import random

    rng = random.Random(seed)
    lines = []
    for i in range(n):
        ts = f"08:{i // 60 % 60:02d}:{i % 60:02d}"
        stats = STATS.format(proc="APIServer", pid=1, ts=ts, p=i % 10, run=i % 7)
        lines.append(stats.replace("Engine 000", f"Engine {rng.randrange(engines):03d}"))
        if rng.random() < spec_share:
            spec = SPEC.format(proc="APIServer", pid=1, ts=ts, p=i % 10, mal=f"{1 + i % 3}.25", acc=i, dr=2 * i + 1)
            lines.append(spec)
            if rng.random() < repeat:
                lines.append(spec)  # a SpecDecoding line after a SpecDecoding line: a row of its own
        if rng.random() < 0.02:
            lines.append(OTHER)
    p = tmp_path / "server.log"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.skipif(scan.IMPLEMENTATION == "none", reason="no scanner")
@pytest.mark.parametrize(("cap", "spec_share", "engines", "seed"),
                         [(16, 0.6, 1, 1), (16, 0.0, 1, 2), (5, 0.3, 1, 3), (64, 0.9, 1, 4), (20000, 0.5, 1, 5),
                          (16, 0.5, 2, 6), (5, 0.9, 3, 8), (20000, 1.0, 4, 9), (16, 0.5, 70, 10)])
def test_batches_of_stats_lines_with_and_without_spec_lines_give_the_series_of_one_line_at_a_time(
        tmp_path: Path, cap: int, spec_share: float, engines: int, seed: int) -> None:
    """Batches where only some stats lines have their SpecDecoding line are made a column at a time
    (``SeriesTracker._observe_joined``); the rows, folds and Records are those of one line at a time."""
    log = _sparse_log(tmp_path, 3000, seed, spec_share, engines)
    batched, single = _series_from_batches(log, cap), _series_line_by_line(log, cap)
    assert _digest(batched) == _digest(single)
    assert batched.untracked_rows == single.untracked_rows
    kept = sum(iv.n for ivs in batched.engines.values() for iv in ivs)
    assert kept + batched.untracked_rows >= 3000  # and the repeated lines' rows; past MAX_ENGINES counted only


@pytest.mark.skipif(scan.IMPLEMENTATION == "none", reason="no scanner")
@pytest.mark.parametrize("engines", [1, 2])
def test_a_batch_of_stats_lines_with_some_spec_lines_is_made_a_column_at_a_time(tmp_path: Path, engines: int,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """One engine, or a data-parallel server's engines in turn: column at a time, not row at a time."""
    log = _sparse_log(tmp_path, 2000, 7, 0.5, engines=engines, repeat=0.0)
    rows_each = []
    real = SeriesTracker._observe_each

    def each(self, rows, lo, hi):
        rows_each.append(hi - lo)
        return real(self, rows, lo, hi)

    monkeypatch.setattr(SeriesTracker, "_observe_each", each)
    _series_from_batches(log, 16)
    assert sum(rows_each) < 100  # of about 3,000 lines: the SpecDecoding lines that head a batch
