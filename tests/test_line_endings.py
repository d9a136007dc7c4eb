"""Line endings real users paste: CR-only files, CRLF, and records after a carriage return inside a line.

A bare CR that ends a line is made an LF where the blocks are read (``sources.LineEnds``), so the scanner
and the per-line stages see the lines the writer meant; a tqdm redraw keeps its line (and the line numbers
of everything after it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdiag import engine
from specdiag.engine import analyze
from specdiag.ingest import scan, sources
from specdiag.ingest.records import iter_records
from specdiag.ingest.sources import LineEnds, expand_inputs
from specdiag.report.json_report import render_json

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tp8-shortfall" / "serve.log"
BAR = b"Loading safetensors checkpoint shards:  %d%% Completed | %d/4 [00:01<00:01,  1.20it/s]"


def _lines() -> list[bytes]:
    return EXAMPLE.read_bytes().split(b"\n")[:-1]


def _report(path: Path) -> dict:
    return json.loads(render_json(analyze([str(path)], jobs=1)))


def _findings(doc: dict) -> list[tuple]:
    """What a finding says, without where its evidence sits in the file."""
    return [(f["rule"], f["severity"], f["title"], json.dumps(f["measurements"], sort_keys=True),
             [(c["id"], c["confidence"]) for c in f["causes"]]) for f in doc["findings"]]


def _evidence_lines(doc: dict) -> list[tuple[int, str]]:
    return [(e["line"], e["text"]) for f in doc["findings"] for e in f["evidence"]]


@pytest.fixture(scope="module")
def lf_report() -> dict:
    return _report(EXAMPLE)


def _without_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    real = engine.iter_records
    monkeypatch.setattr(engine, "iter_records", lambda src, hot=None, window=None, scan_threads=0: real(src, None, window))


READERS = ["compiled", "python", "no-scanner"]


def _reader(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if kind == "python":
        monkeypatch.setattr(scan, "_compiled", None)
    elif kind == "no-scanner":
        _without_scanner(monkeypatch)


@pytest.mark.parametrize("block_size", [sources.BLOCK_SIZE, 2048])
def test_cr_only_file_gives_the_findings_of_its_lf_version(tmp_path, lf_report, block_size, monkeypatch) -> None:
    """``tr '\\n' '\\r'`` of the example was one 1.5 MB "line" and a false 'no problem found'."""
    monkeypatch.setattr(sources, "BLOCK_SIZE", block_size)
    data = EXAMPLE.read_bytes().replace(b"\n", b"\r")
    path = tmp_path / "cr.log"
    path.write_bytes(data)
    doc = _report(path)
    assert _findings(doc) == _findings(lf_report)
    # a line of a CR-only file is a CR-ended line: evidence line N is the N-th piece between CRs
    pieces = data.split(b"\r")
    for line, text in _evidence_lines(doc):
        assert text.encode()[-40:] in pieces[line - 1]
    assert doc["inputs"][0]["lines"] == data.count(b"\r")


def test_crlf_file_reads_exactly_as_its_lf_version(tmp_path, lf_report) -> None:
    path = tmp_path / "crlf.log"
    path.write_bytes(b"".join(s.rstrip(b"\r") + b"\r\n" for s in _lines()))
    doc = _report(path)
    assert _findings(doc) == _findings(lf_report)
    assert _evidence_lines(doc) == _evidence_lines(lf_report)
    assert doc["inputs"][0]["lines"] == lf_report["inputs"][0]["lines"]


@pytest.mark.parametrize("kind", READERS)
def test_records_after_a_carriage_return_inside_a_line_are_read(tmp_path, lf_report, kind, monkeypatch) -> None:
    """Every seventh record glued to the line before with a CR (a terminal capture): the scanner must not
    read two records as one (a retrieve and the lookup after it would be one counted retrieve)."""
    out: list[bytes] = []
    for i, line in enumerate(_lines()):
        if i % 7 == 3 and out:
            out[-1] += b"\r" + line
        else:
            out.append(line)
    path = tmp_path / "glued.log"
    path.write_bytes(b"\n".join(out) + b"\n")
    _reader(kind, monkeypatch)
    doc = _report(path)
    assert _findings(doc) == _findings(lf_report)
    assert doc["inputs"][0]["recognized"] == lf_report["inputs"][0]["recognized"]


@pytest.mark.parametrize("kind", READERS)
def test_tqdm_redraws_keep_their_line_and_the_records_around_them_are_read(tmp_path, lf_report, kind,
                                                                          monkeypatch) -> None:
    """A bar redrawn with CRs inside one line stays that line (numbers stay those of ``grep -n``); a record
    written before a CR and a bar is read whole, not glued to the bar."""
    out = []
    for i, line in enumerate(_lines()):
        if i % 5 == 0:
            line = b"\r" + b"\r".join(BAR % (25 * k, k) for k in range(5)) + b"\n" + line
        if i % 11 == 0:
            line += b"\r" + BAR % (50, 2)
        out.append(line)
    path = tmp_path / "bars.log"
    path.write_bytes(b"\n".join(out) + b"\n")
    _reader(kind, monkeypatch)
    doc = _report(path)
    assert _findings(doc) == _findings(lf_report)
    numbered = path.read_bytes().split(b"\n")
    for line, text in _evidence_lines(doc):
        assert text.encode()[-40:] in numbered[line - 1].split(b"\r")[0]


def _lines_read(data: bytes, block_size: int, tmp_path: Path, monkeypatch) -> list[tuple[int, str]]:
    monkeypatch.setattr(sources, "BLOCK_SIZE", block_size)
    path = tmp_path / "x.log"
    path.write_bytes(data)
    (src,) = expand_inputs([str(path)])
    return [(r.line, r.msg) for r in iter_records(src) if hasattr(r, "msg")]


def _vllm(i: int) -> bytes:
    return b"INFO 05-06 10:00:%02d [core.py:1] record %d" % (i, i)


@pytest.mark.parametrize("block_size", [7, 64, 1024 * 1024])
def test_crlf_cut_between_two_reads_is_one_line_end(tmp_path, block_size, monkeypatch) -> None:
    data = b"".join(_vllm(i) + b"\r\n" for i in range(30))
    got = _lines_read(data, block_size, tmp_path, monkeypatch)
    assert got == [(i + 1, f"record {i}") for i in range(30)]


@pytest.mark.parametrize("block_size", [7, 64, 1024 * 1024])
def test_cr_only_stretch_after_lf_lines_counts_its_cr_lines(tmp_path, block_size, monkeypatch) -> None:
    """``cat mac.log linux.log``: each part keeps its own line ends; a blank CR line is a line too."""
    data = b"".join(_vllm(i) + b"\n" for i in range(10)) + b"".join(_vllm(i) + b"\r" for i in range(10, 40)) + b"\r"
    got = _lines_read(data, block_size, tmp_path, monkeypatch)
    assert got == [(i + 1, f"record {i}") for i in range(40)]


def test_a_cr_that_opens_a_record_ends_the_line_and_other_crs_do_not() -> None:
    ends = LineEnds()
    bar = BAR % (25, 1)
    block = b"x\n" * 50 + bar + b"\r" + bar + b"\r" + _vllm(1) + b"\r" + bar + b"\n\r" + _vllm(2) + b"\r\n"
    out = ends.convert(block)
    assert len(out) == len(block)  # byte for byte: offsets do not move
    assert out.split(b"\n")[50:] == [bar + b"\r" + bar, _vllm(1) + b"\r" + bar, b"\r" + _vllm(2) + b"\r", b""]


def test_a_cr_at_the_end_of_a_read_waits_for_the_next_byte() -> None:
    ends = LineEnds()
    first = b"y\n" * 20 + BAR % (25, 1) + b"\r"
    assert ends.convert(first) == first[:-1]
    assert ends.convert(_vllm(3) + b"\n") == b"\n" + _vllm(3) + b"\n"
    assert ends.convert(b"z\r") == b"z" and ends.flush() == b"\r"


def test_a_line_counts_once_as_recognised_however_many_pieces_it_has(tmp_path) -> None:
    line = _vllm(1) + b"\r" + BAR % (50, 2) + b"\r" + b'  File "a.py", line 1, in f\n'
    path = tmp_path / "p.log"
    path.write_bytes(b"z\n" * 30 + line)
    (src,) = expand_inputs([str(path)])
    list(iter_records(src))
    assert (src.stats.lines, src.stats.recognized) == (31, 1)
