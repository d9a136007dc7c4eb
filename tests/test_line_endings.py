"""Line ends: files whose lines end in a bare CR read as the LF file they stand for, CRLF as before, and a
record written after a progress bar's CR inside an LF line is read as a record of its own."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from logbuilder import lmc, lookup, retrieve, shortfall_pair, vllm

from specdiag.engine import analyze
from specdiag.ingest import expand_inputs, iter_records, scan, scan_fast, sources
from specdiag.ingest.cr_lines import MAX_CR_TRIES, cr_records
from specdiag.ingest.sources import LineEnds, Source

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*/serve.log"))


def _lf_only(path: Path) -> bytes:
    """The example with its few CRLF lines (the vLLM logo) made LF: ``tr '\\n' '\\r'`` of a CRLF line is
    two CR line ends, which is another file."""
    return path.read_bytes().replace(b"\r\n", b"\n")


def _report(path: Path) -> dict:
    """The JSON report without what names the file or its line ends."""
    out = analyze([str(path)]).to_dict()
    text = json.dumps(out, sort_keys=True).replace(str(path), "LOG")
    out = json.loads(text)
    for inp in out["inputs"]:
        inp.pop("line_ends", None)
    out.pop("elapsed_s", None)
    return out


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.parent.name)
def test_a_cr_ended_file_gives_the_report_of_its_lf_original(example: Path, tmp_path: Path) -> None:
    """Same findings, measurements, evidence line numbers and fingerprints; before: one 1 MiB line,
    'no problem found: 1 of 1 lines recognised'."""
    lf, cr = tmp_path / "lf" / "serve.log", tmp_path / "cr" / "serve.log"
    lf.parent.mkdir()
    cr.parent.mkdir()
    lf.write_bytes(_lf_only(example))
    cr.write_bytes(_lf_only(example).replace(b"\n", b"\r"))
    want, got = _report(lf), _report(cr)
    assert got["inputs"][0]["lines"] == want["inputs"][0]["lines"] > 100
    assert got == want
    assert analyze([str(cr)]).inputs[0]["line_ends"] == "CR"


def test_the_tp8_example_read_with_cr_ends_keeps_its_three_findings(tmp_path: Path) -> None:
    cr = tmp_path / "serve.log"
    cr.write_bytes((ROOT / "examples/tp8-shortfall/serve.log").read_bytes().replace(b"\n", b"\r"))
    report = analyze([str(cr)])
    assert sorted({f.rule for f in report.findings if not f.rule.startswith("LOG")}) == ["KV001", "KV003", "KV007"]
    assert report.inputs[0]["errors"] == []


def test_a_crlf_file_is_read_as_its_lf_original_and_said_to_be_crlf(tmp_path: Path) -> None:
    lf, crlf = tmp_path / "lf" / "serve.log", tmp_path / "crlf" / "serve.log"
    lf.parent.mkdir()
    crlf.parent.mkdir()
    data = _lf_only(ROOT / "examples/tp8-shortfall/serve.log")
    lf.write_bytes(data)
    crlf.write_bytes(data.replace(b"\n", b"\r\n"))
    assert _report(crlf) == _report(lf)
    assert analyze([str(crlf)]).inputs[0]["line_ends"] == "CRLF"
    assert "cr_line_ends" not in analyze([str(crlf)]).inputs[0]


class _Reads:
    """A stream whose reads end at the given offsets (a pipe, a decompressor): blocks split anywhere."""

    def __init__(self, data: bytes, cuts: list[int]) -> None:
        self.pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]

    def read(self, n: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


def _lines(data: bytes, cuts: list[int]) -> list[bytes]:
    src = Source("x.log", stream=_Reads(data, sorted(set(cuts))))
    return b"".join(d[s:e] for d, s, e in src.blocks()).split(b"\n")[:-1]


SMALL = [b"INFO 05-06 15:56:03 [a.py:1] one", b"", b"[2026-05-06 15:56:03,745] LMCache INFO: two (a.py:1:b)",
         b"three\x1b[0m"]


@pytest.mark.parametrize("end,strip", [(b"\r", False), (b"\r\n", True), (b"\n", False)], ids=["CR", "CRLF", "LF"])
def test_reads_split_at_every_offset_give_the_same_lines(end: bytes, strip: bool) -> None:
    """A CR at the end of one read and an LF at the start of the next is CRLF, not two line ends."""
    data = end.join(SMALL) + end
    for cut in range(1, len(data)):
        for second in (cut + 1, cut + 2, len(data) - 1):
            lines = _lines(data, [cut, second] if second < len(data) else [cut])
            assert [ln.removesuffix(b"\r") if strip else ln for ln in lines] == SMALL, (cut, second)


@pytest.mark.parametrize("end", [b"\r", b"\r\n"], ids=["CR", "CRLF"])
def test_a_small_block_size_reads_the_same_lines(end: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(end.join(SMALL * 5) + end)
    for size in (1, 2, 3, 7, 64):
        monkeypatch.setattr(sources, "BLOCK_SIZE", size)
        src = expand_inputs([str(log)])[0]
        lines = b"".join(d[s:e] for d, s, e in src.blocks()).split(b"\n")[:-1]
        assert [ln.removesuffix(b"\r") for ln in lines] == SMALL * 5, size
        assert src.stats.line_ends == ("CR" if end == b"\r" else "CRLF")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SMALL + [b"x", b"\x1b[32m", b"Loading 10%"]), min_size=1, max_size=12),
       st.sampled_from([b"\r", b"\r\n"]), st.lists(st.integers(1, 400), max_size=6))
def test_any_split_of_a_cr_or_crlf_file_gives_its_lines(lines: list[bytes], end: bytes, cuts: list[int]) -> None:
    data = end.join(lines) + end
    got = _lines(data, [c for c in cuts if c < len(data)])
    assert [ln.removesuffix(b"\r") for ln in got] == lines


def test_the_sniff_holds_a_last_cr_until_it_knows_the_next_byte() -> None:
    ends = LineEnds()
    assert ends.convert(b"one\r") == b"one" and ends.kind is None
    assert ends.convert(b"\ntwo\r\n") == b"\r\ntwo\r\n" and ends.kind == "CRLF"
    ends = LineEnds()
    assert ends.convert(b"one\r") == b"one" and ends.convert(b"two\r") == b"\ntwo" and ends.kind == "CR"
    assert ends.flush() == b"\n"


def test_a_read_without_lf_inside_an_lf_file_ends_its_lines_at_its_crs() -> None:
    """A stretch of CR-ended lines longer than a read, in an LF file."""
    ends = LineEnds()
    assert ends.convert(b"a\nb\n") == b"a\nb\n" and ends.kind == "LF"
    assert ends.convert(b"c\rd\re\r") == b"c\nd\ne" and ends.translated == 2
    assert ends.convert(b"\nf\n") == b"\r\nf\n"  # the held CR was a CRLF's


# ---- a CR inside an LF line -------------------------------------------------------------------------------
def _records(tmp_path: Path, lines: list[str | bytes]) -> tuple[list, object]:
    log = tmp_path / "mixed.log"
    log.write_bytes(b"\n".join(x.encode() if isinstance(x, str) else x for x in lines) + b"\n")
    src = expand_inputs([str(log)])[0]
    return [r for r in iter_records(src) if hasattr(r, "kind")], src.stats


def test_a_record_after_a_progress_bar_cr_is_a_record_on_that_line(tmp_path: Path) -> None:
    bar = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]\r"
    recs, stats = _records(tmp_path, [
        vllm("first"),
        bar + lmc("Num retrieved tokens: 1, num expected tokens: 2", level="ERROR", proc="Worker_TP2 pid=767"),
        bar + bar + vllm("after two redraws", level="WARNING"),
    ])
    by_line = {r.line: r for r in recs if r.kind in ("vllm", "lmcache")}
    assert by_line[2].kind == "lmcache" and by_line[2].origin.rank_label == "TP2" and by_line[2].level == "ERROR"
    assert by_line[3].msg == "after two redraws" and by_line[3].level == "WARNING"
    assert stats.lines == 3 and stats.recognized == 3 and stats.cr_splits == 2


def test_a_piece_without_a_prefix_takes_the_prefix_of_its_physical_line(tmp_path: Path) -> None:
    """vLLM writes ``(Worker_TP2 pid=N)`` only where a line starts after an LF: a record after a CR on
    that line came from the same process."""
    line = f"(Worker_TP2 pid=767) Loading 10%\r{vllm('loaded', loc='gpu_model_runner.py:1')}"
    recs, _ = _records(tmp_path, [line])
    (rec,) = [r for r in recs if r.kind == "vllm"]
    assert rec.origin.rank_label == "TP2" and rec.origin.pid == 767 and rec.msg == "loaded"


def test_a_progress_bar_redraw_stays_one_line(tmp_path: Path) -> None:
    bar = "\r".join(f"Capturing CUDA graphs: {p}%|{'#' * (p // 10)}| {p}/100" for p in range(0, 101, 10))
    recs, stats = _records(tmp_path, [vllm("before"), bar, "(Worker pid=1) " + bar + "\r"])
    assert stats.lines == 3 and stats.cr_splits == 0
    assert [r.msg for r in recs if r.kind == "vllm"] == ["before"]


def test_cr_separated_records_inside_one_lf_line_are_each_read(tmp_path: Path) -> None:
    """A collector that wrote CR line ends for a while inside an LF file."""
    lines = [lookup("chatcmpl-a", 1024, 768),
             *shortfall_pair("chatcmpl-a", 512, 768, proc="Worker_TP1 pid=12"),
             retrieve("chatcmpl-a", 512, 768, 1024, proc="Worker_TP1 pid=12")]
    recs, stats = _records(tmp_path, [vllm("start"), "\r".join(lines), vllm("end")])
    assert stats.lines == 3 and stats.cr_splits == len(lines) - 1
    assert [r.line for r in recs if r.kind == "lmcache"] == [2] * len(lines)


def test_lines_with_an_inner_cr_reach_the_records_path_in_both_scanners(tmp_path: Path, monkeypatch) -> None:
    """A hot-looking line after a CR is split by the records path, not taken (or lost) by a scanner."""
    line = "Loading 10%\r" + retrieve("chatcmpl-b", 256, 512, 512, proc="Worker_TP3 pid=9")
    hot = retrieve("chatcmpl-c", 512, 512, 512, proc="Worker_TP3 pid=9")
    block = (line + "\n" + hot + "\r\n").encode()
    results = [scan.scan_block_py(block, 0), scan_fast.scan_block_fast(block, 0)]
    if scan._compiled is not None:
        results.append(scan.scan_block_c(block, 0))
    assert all(r == results[0] for r in results) and list(results[0].rare["line"]) == [1]
    for forced in ("python", "c"):
        monkeypatch.setenv("SPECDIAG_SCANNER", forced)
        log = tmp_path / f"{forced}.log"
        log.write_bytes(block)
        report = analyze([str(log)])
        assert [f.rule for f in report.findings if f.rule == "KV001"] == ["KV001"], forced


# ---- cost --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("piece", [b"\r", b"\rINFO 05-06 ", b"\r(", b"\r[2026-05-06 ", b"\r\x1b[", b"\r\x1b[32m(W pid=1) x"])
def test_splitting_a_hostile_1mb_line_at_its_crs_is_linear(piece: bytes) -> None:
    line = piece * (1024 * 1024 // len(piece))
    from regex_budget import budget  # 50 ms on the machine it was set on, scaled to this one

    t = time.thread_time()
    pieces = cr_records(line)
    assert time.thread_time() - t < budget()
    assert b"".join(pieces) == line and len(pieces) <= MAX_CR_TRIES + 1


def test_the_terminal_report_says_a_file_was_read_with_cr_line_ends(tmp_path: Path, run_cli) -> None:
    cr = tmp_path / "serve.log"
    cr.write_bytes(_lf_only(ROOT / "examples/tp8-shortfall/serve.log").replace(b"\n", b"\r"))
    code, out, _ = run_cli("analyze", str(cr))
    assert code == 1 and "lines (line ends: CR):" in out and "KV001" in out
    code, out, _ = run_cli("analyze", str(ROOT / "examples/healthy-ngram/serve.log"))
    assert "line ends" not in out
