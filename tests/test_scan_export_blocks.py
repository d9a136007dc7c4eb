"""Blocks of a collector's or an export's JSON lines (journald ``-o json``, Cloud Logging, Loki ``jsonl``, Fluent
Bit documents) are scanned from a copy of their texts (``ahead._export_unwrapped``) when every line names the
same source: the same reports as reading every JSON line, whichever sources the blocks mix, whatever the
texts hold (colour, escapes, line breaks, timestamps of their own)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specdiag.ingest import ahead

pytest.importorskip("specdiag.ingest._scan")

from test_prefilter import _analyse as _run  # noqa: E402
from test_scan_wrapped_blocks import TP8, _named_blocks, _noise  # noqa: E402

MICROS = 1_778_082_963_000_000  # 2026-05-06


def _journald(lines: list[str], host: str = "gpu-node-3", year_step: int = 0) -> list[str]:
    """``journalctl -o json``; with ``year_step``, the time moves a year on every ``year_step`` lines."""
    year = 365 * 86_400_000_000
    return [json.dumps({"__CURSOR": f"s=1;i={i}", "__REALTIME_TIMESTAMP": str(MICROS + i * 1000 + (
        i // year_step * year if year_step else 0)), "_HOSTNAME": host, "SYSLOG_IDENTIFIER": "vllm", "_PID": "767",
        "MESSAGE": x}) for i, x in enumerate(lines)]


def _gcp(lines: list[str], pod: str = "vllm-0") -> list[str]:
    return [json.dumps({"textPayload": x, "insertId": f"i{i}", "resource": {"type": "k8s_container", "labels": {
        "pod_name": pod, "container_name": "vllm"}}, "timestamp": f"2026-05-06T15:56:03.{i % 10**6:06d}Z"})
        for i, x in enumerate(lines)]


def _loki(lines: list[str]) -> list[str]:
    return [json.dumps({"labels": {"pod": "vllm-0", "container": "vllm"}, "line": x,
                        "timestamp": f"2026-05-06T15:56:03.{i:09d}Z"}) for i, x in enumerate(lines)]


def _fluent(lines: list[str]) -> list[str]:
    return [json.dumps({"log": x + "\n", "stream": "stderr", "time": "2026-05-06T15:56:03Z",
                        "kubernetes": {"pod_name": "vllm-0", "container_name": "vllm"}}) for x in lines]


def _vector(lines: list[str]) -> list[str]:
    """A collector's documents that name no source (Vector's file source: ``message``, ``timestamp``)."""
    return [json.dumps({"file": "/var/log/vllm.log", "message": x, "source_type": "file",
                        "timestamp": f"2026-05-06T15:56:03.{i:06d}Z"}) for i, x in enumerate(lines)]


def _copied(lines: list[str], tmp_path: Path) -> int:
    """How many blocks of the log were scanned from their copies."""
    from specdiag.ingest.records import iter_records
    from specdiag.ingest.sources import Source

    log = tmp_path / "copied.json"
    log.write_text("\n".join(lines) + "\n")
    count = [0]
    real = ahead.unwrapped

    def counting(data, start, end):
        got = real(data, start, end)
        count[0] += got is not None
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ahead, "unwrapped", counting)
        for _ in iter_records(Source(str(log), str(log)), hot=True):
            pass
    return count[0]


def _same_both_ways(tmp_path: Path, lines: list[str]) -> dict:
    log = tmp_path / "export.json"
    log.write_text("\n".join(lines) + "\n")
    jobs = str(os.cpu_count() or 1)
    on = _run(log, "on", "SPECDIAG_SCAN_WRAPPED", jobs)
    assert on == _run(log, "off", "SPECDIAG_SCAN_WRAPPED", jobs)
    return on


@pytest.mark.parametrize("export", [_journald, _gcp, _loki, _fluent, _vector])
def test_an_export_of_the_incident_reports_what_reading_every_line_reports(tmp_path, export):
    lines = export(TP8 * 4)
    report = _same_both_ways(tmp_path, lines)
    assert {f["rule"] for f in report["findings"]} >= {"KV001"}
    assert _copied(lines, tmp_path) >= 2  # its blocks were scanned from their copies
    assert bool(_named_blocks(lines, tmp_path)) == (export is not _vector)  # the source names the deployment


def test_noise_in_a_sourceless_export_is_counted_and_reports_the_same(tmp_path):
    lines = _vector(_noise(3 << 20))
    report = _same_both_ways(tmp_path, lines)
    assert {f["rule"] for f in report["findings"]} >= {"KV001"}
    assert _copied(lines, tmp_path) >= 3


def test_noise_in_a_journald_export_is_counted_and_reports_the_same(tmp_path):
    lines = _journald(_noise(3 << 20), year_step=20_000)
    report = _same_both_ways(tmp_path, lines)
    assert {f["rule"] for f in report["findings"]} >= {"KV001"}
    assert set(_named_blocks(lines, tmp_path)) == {"host:gpu-node-3"}


def test_two_pods_interleaved_in_long_runs_report_the_same(tmp_path):
    a, b = _gcp(TP8 * 3, "vllm-0"), _gcp(TP8 * 3, "vllm-1")
    lines = [x for i in range(0, len(a), 5000) for x in a[i : i + 5000] + b[i : i + 5000]]
    report = _same_both_ways(tmp_path, lines)
    assert len(report["deployments"]) == 2


def test_a_block_is_copied_only_when_every_line_names_the_same_source_in_one_text_line():
    one = [x.encode() for x in _journald(["INFO 05-06 15:56:03 [core.py:94] a", "\x1b[32mplain\x1b[0m\r"])]
    data = b"\n".join(one) + b"\n"
    assert ahead.unwrapped(data, 0, len(data)) == b"INFO 05-06 15:56:03 [core.py:94] a\nplain\n"
    for other in (_journald(["x"], host="gpu-node-4"), _gcp(["x"]), _journald(["two\nlines"]),
                  ['{"MESSAGE": "no source", "__REALTIME_TIMESTAMP": "1778082963000000"}'], ["not json"],
                  [" " + _journald(["x"])[0]]):
        data = b"\n".join([*one, other[0].encode()]) + b"\n"
        assert ahead.unwrapped(data, 0, len(data)) is None, other


def test_scanned_stats_lines_of_an_export_take_the_year_of_their_own_line(tmp_path):
    """vLLM prints no year: a stats line read alone takes its JSON line's; scanned from the copy, too (the
    journal's time moves a year on every 1,000 lines)."""
    from specdiag.ingest.hot import MetricRows
    from specdiag.ingest.records import iter_records
    from specdiag.ingest.sources import Source
    from specdiag.ingest.wrappers import json_line

    lines = _journald(TP8, year_step=1000)
    log = tmp_path / "journal.json"
    log.write_text("\n".join(lines) + "\n")
    want = {n: json_line(lines[n - 1].encode())[1] for n in range(1, len(lines) + 1) if "Avg prompt" in lines[n - 1]}
    got = {n: batch.year for batch in iter_records(Source(str(log), str(log)), hot=True)
           if isinstance(batch, MetricRows) for n, kind in zip(batch.lines, batch.kinds, strict=True)
           if kind == "stats"}
    assert len(got) == len(want) > 100 and got == want
    assert {2026, 2027, 2028} <= set(got.values())


@pytest.mark.parametrize("named", [True, False])
def test_a_coloured_record_held_at_a_terminal_width_in_an_export_reports_the_same(tmp_path, named):
    """journald keeps vLLM's colour as ``\\u001b[1;36m``: the reader strips the residue from the JSON line
    before measuring it. A quiet record exactly a terminal's width (200) without its residue is held, and
    the short row after it joined, whether or not the copy's rows are measured: same report either way."""
    from specdiag.ingest.cleaner import ANSI_RESIDUE

    rec = "\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m DEBUG 05-06 15:56:03 [shm_broadcast.py:227] Poller received cancel event"

    def line(text: str, i: int) -> str:
        if not named:  # no source: the rows are the input's, as docker's are
            return json.dumps({"message": text, "timestamp": f"2026-05-06T15:56:03.{i:06d}Z"}, separators=(",", ":"))
        return json.dumps({"__REALTIME_TIMESTAMP": str(MICROS + i), "_HOSTNAME": "h", "MESSAGE": text},
                          separators=(",", ":"))

    warm = [line(rec + f" {i}", i) for i in range(12000)]  # > 1 MiB: the place is learnt in the first block

    held = rec + " "
    while len(ANSI_RESIDUE.sub(b"", line(held, 0).encode())) < 200:
        held += "z"
    assert len(ANSI_RESIDUE.sub(b"", line(held, 0).encode())) == 200
    tail = [x for i in range(300) for x in (line(held, i), line("r" * 20, i))]
    lines = warm + tail
    log = tmp_path / "held.json"
    log.write_text("\n".join(lines) + "\n")
    on = _run(log, "on", "SPECDIAG_PREFILTER", "1")
    assert on == _run(log, "off", "SPECDIAG_PREFILTER", "1")
    assert on == _run(log, "off", "SPECDIAG_SCAN_WRAPPED", "1")
