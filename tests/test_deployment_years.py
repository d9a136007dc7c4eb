"""vLLM's lines print no year: each server's take it from that server's own dated lines, never from another
server's in the same stream (``ingest/years.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from specdiag.engine import analyze, quiet_places
from specdiag.events import default_matcher
from specdiag.ingest import blocks, sources
from specdiag.ingest.records import iter_records
from specdiag.ingest.sources import expand_inputs
from specdiag.report.json_report import render_json

_LMC = ("{p}(Worker_TP0 pid=767) [{y}-03-06 15:56:0{s},745] LMCache {lvl}: {msg} "
        "(vllm_v1_adapter.py:884:lmcache.integration.vllm.vllm_v1_adapter)")
_DEATH = "{p}(EngineCore_DP0 pid=800) ERROR {md} 15:56:03 [core.py:1000] EngineCore encountered a fatal error."
_SHORT = "Num retrieved tokens: 49664, num expected tokens: 55808"


def _runs(log: Path) -> dict[str, list[tuple[str, str]]]:
    rep = json.loads(render_json(analyze([str(log)])))
    return {d["id"]: [(r["start"], r["end"]) for r in d["runs"]] for d in rep["deployments"]}


def test_a_pod_that_prints_no_year_is_not_given_its_neighbours(tmp_path):
    log = tmp_path / "pods.log"
    log.write_text("\n".join([
        _LMC.format(p="[pod/vllm-a/vllm] ", y=2025, s=3, lvl="ERROR", msg=_SHORT),
        _DEATH.format(p="[pod/vllm-a/vllm] ", md="03-06"),
        _DEATH.format(p="[pod/vllm-b/vllm] ", md="11-06"),
    ]) + "\n")
    runs = _runs(log)
    assert runs["pod/vllm-a/vllm"] == [("2025-03-06 15:56:03", "2025-03-06 15:56:03")]
    assert runs["pod/vllm-b/vllm"] == [("11-06 15:56:03", "11-06 15:56:03")]  # the year is unknown, not 2025


def test_a_pod_takes_the_year_its_own_later_lines_print(tmp_path):
    log = tmp_path / "pods.log"
    log.write_text("\n".join([
        _LMC.format(p="[pod/vllm-a/vllm] ", y=2025, s=3, lvl="ERROR", msg=_SHORT),
        _DEATH.format(p="[pod/vllm-b/vllm] ", md="03-06"),
        _LMC.format(p="[pod/vllm-b/vllm] ", y=2024, s=4, lvl="ERROR", msg=_SHORT),
    ]) + "\n")
    runs = _runs(log)
    assert runs["pod/vllm-b/vllm"] == [("2024-03-06 15:56:03", "2024-03-06 15:56:04")]


def test_one_pods_stream_dates_its_first_lines_by_the_look_ahead_as_before(tmp_path):
    log = tmp_path / "pod.log"
    log.write_text("\n".join([
        _DEATH.format(p="[pod/vllm-a/vllm] ", md="03-06"),
        _LMC.format(p="[pod/vllm-a/vllm] ", y=2025, s=4, lvl="ERROR", msg=_SHORT),
    ]) + "\n")
    assert _runs(log)["pod/vllm-a/vllm"] == [("2025-03-06 15:56:03", "2025-03-06 15:56:04")]


def test_a_new_run_takes_the_year_it_prints_itself_not_the_last_runs(tmp_path):
    """Two runs concatenated in a plain file: the second's vLLM lines before its first dated line are dated
    by that line, not by the first run's year."""
    log = tmp_path / "runs.log"
    log.write_text("\n".join([
        "(APIServer pid=1) INFO 03-06 15:50:00 [api_server.py:1000] vLLM API server version 0.11.0",
        _LMC.format(p="", y=2025, s=1, lvl="ERROR", msg=_SHORT),
        "(APIServer pid=9) INFO 03-06 15:56:02 [api_server.py:1000] vLLM API server version 0.11.0",
        _DEATH.format(p="", md="03-06"),
        _LMC.format(p="", y=2026, s=4, lvl="ERROR", msg=_SHORT),
    ]) + "\n")
    (runs,) = _runs(log).values()
    assert len(runs) == 2
    assert runs[0][0].startswith("2025-") and runs[1] == ("2026-03-06 15:56:02", "2026-03-06 15:56:04")


def _padded(line: str, width: int = 256) -> str:
    """``line`` padded to ``width`` bytes with its line end (blocks then end where lines do)."""
    return line + " " * (width - 1 - len(line))


def test_a_block_of_one_pods_lines_is_decided_on_that_pods_year(tmp_path, monkeypatch):
    """A block whose every line names one pod is scanned from its copy, its LMCache records counted unread when
    they print the reader's year: that year must be the pod's own, so the records are the same with the
    prefilter on and off. Pod b prints 2026, pod a 2025, then (from a block's first line) pod b 2025, and
    dies: the death is 2025."""
    quiet = ("[pod/{pod}/vllm] (Worker_TP0 pid=767) [{y}-03-06 15:56:0{s},745] LMCache INFO: Health monitor "
             "initialized and started (base_service_factory.py:126:lmcache.integration.base_service_factory)")
    lines = [quiet.format(pod="vllm-b", y=2026, s=n % 10) for n in range(512)]
    lines += [quiet.format(pod="vllm-a", y=2025, s=n % 10) for n in range(512)]
    lines += [quiet.format(pod="vllm-b", y=2025, s=n % 10) for n in range(512)]
    lines.append(_DEATH.format(p="[pod/vllm-b/vllm] ", md="03-06"))
    log = tmp_path / "pods.log"
    log.write_text("".join(x + " " * (255 - len(x)) + "\n" for x in lines))  # 256 bytes: blocks end at lines
    monkeypatch.setattr(sources, "BLOCK_SIZE", sources.FIRST_BLOCK)  # 256 lines a block, one pod each

    def errors() -> list[tuple[int, int | None]]:
        quiet = quiet_places(default_matcher())
        quiet.add(b"INFO base_service_factory.py:126:lmcache.integration.base_service_factory")
        recs = iter_records(expand_inputs([str(log)])[0], hot=True, quiet=quiet)
        return [(r.line, r.year) for r in recs if getattr(r, "level", None) == "ERROR"]

    on = errors()
    monkeypatch.setattr(blocks, "PREFILTER", False)
    assert on == errors() == [(len(lines), 2025)]
