"""The per-template and foreign-noise benchmark logs (``scripts/gen_template_logs.py``) say what they claim.

A per-template row is only a measurement of that template if its lines are well-formed lines of that very
message: read by the whole ingest + matcher path, each must come out as the intended hand-written template
or catalog entry. And the noise log must still hold the one incident it is built around.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from specdiag.catalog import catalog
from specdiag.catalog.coverage import indistinguishable
from specdiag.engine import analyze
from specdiag.events import CATALOG_EVENT, default_matcher, entry_of
from specdiag.ingest import expand_inputs, iter_records
from specdiag.ingest.scan import TEMPLATES, scan_block_py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import gen_template_logs as g  # noqa: E402

SPECS = g.high_volume()


def _records(path: Path) -> list:
    return [r for r in iter_records(expand_inputs([str(path)])[0]) if hasattr(r, "kind")]


def test_the_rule_selects_the_known_high_volume_messages() -> None:
    names = " ".join(s.name for s in SPECS)
    for hand in ("L1:", "S1:", "R4:", "S3:", "V_SPEC:", "V_STATS", "UACCESS"):
        assert hand in names, hand
    fmts = [s.fmt for s in SPECS]
    assert any(f.startswith("Received request %s") for f in fmts)
    assert any(f.startswith("Poller") for f in fmts)                     # shm_broadcast DEBUG
    assert any(f.startswith("Stored %d out of total") for f in fmts)     # LMCache 0.3.x per-store line
    assert not any(g.FAILURE.search(f) for f in fmts)
    assert all(s.level in ("INFO", "DEBUG") for s in SPECS)
    assert 20 <= len(SPECS) <= 120


def test_every_template_line_is_read_as_that_template(tmp_path: Path) -> None:
    cat, matcher = catalog(), default_matcher()
    lines, owner = [], []
    for spec in SPECS:
        if spec.name == "UACCESS":
            continue   # ingest counts 1xx-4xx access lines without a record; the scanner test reads them
        got = g.dominant_lines(spec, 3)
        lines += got
        owner += [spec] * len(got)
    path = tmp_path / "all.log"
    path.write_text("".join(lines), encoding="utf-8")
    recs = _records(path)
    assert [r.line for r in recs] == list(range(1, len(lines) + 1))   # one record per line: well-formed
    wrong = []
    for rec, spec in zip(recs, owner, strict=True):
        ev = matcher.match(rec)
        if spec.entry_id is None:
            ok = ev is not None and ev.id == spec.name
        else:
            got = ev.f.get("entry") if ev is not None and ev.id == CATALOG_EVENT else entry_of(ev) if ev else None
            ok = indistinguishable(got, cat.by_id(spec.entry_id), spec.line)
        if not ok:
            wrong.append(f"{spec.name}: {ev.id if ev else None} {rec.msg[:100]!r}")
    assert wrong == []


def test_the_scanner_counts_the_hot_templates_as_hot() -> None:
    """The scanner's own templates must take the fast path, so their rows measure it."""
    for spec in SPECS:
        hand = spec.name.split(":")[0]
        current = spec.release in ("-", "0.32.0", "0.34.0") or spec.name.startswith(("S1:lmc.8a4", "R4:lmc.72a"))
        if hand in TEMPLATES and current:   # the current wording of each scanner template (older ones may be rare)
            res = scan_block_py("".join(g.dominant_lines(spec, 4)).encode(), 0)
            assert sum(res.counts.values()) == 4, spec.name


def test_generated_template_log_is_dominated_by_its_template() -> None:
    spec = next(s for s in SPECS if s.name.startswith("S3:"))
    buf = io.BytesIO()
    st = g.generate_template(buf, spec, 200_000)
    assert st["bytes"] == len(buf.getvalue()) >= 200_000
    assert 0.85 < st["dominant_lines"] / (st["dominant_lines"] + st["other_lines"]) < 0.95


def test_noise_log_keeps_its_incident(tmp_path: Path) -> None:
    path = tmp_path / "noise.log"
    with open(path, "wb") as fh:
        st = g.generate_noise(fh, 300_000)
    text = path.read_text(encoding="utf-8")
    for marker in (" NCCL INFO ", " - myapp.", " DEBUG ", "GET /health", "UserWarning", "warnings.warn("):
        assert marker in text, marker
    report = analyze([str(path)], jobs=1)
    kv001 = [f for f in report.findings if f.rule == "KV001"]
    assert kv001 and st["incidents"][0] in str([f.measurements for f in kv001] + [f.evidence for f in kv001])


@pytest.mark.parametrize("name", ["vll.9c57b017", "UACCESS"])
def test_template_cli_writes_a_file_of_the_asked_size(tmp_path: Path, name: str) -> None:
    out = tmp_path / "t.log"
    assert g.main([str(out), "--template", name, "--size-mb", "0.1"]) == 0
    assert out.stat().st_size >= 0.1 * 2**20


@pytest.mark.parametrize("name", ["tp1-kubectl-prefix", "tp1-journald", "tp1-docker-json"])
def test_the_benchmark_wraps_each_line_as_the_collector_it_names(name: str) -> None:
    """A wrapped row measures that collector's shape: the per-line unwrapper reads each of its lines as that
    wrapper and gives the line back (docker's without its colour, as the unwrapper strips it)."""
    import bench_templates

    from specdiag.ingest.wrappers import ANSI_BYTES, LineUnwrapper

    style = {"tp1-kubectl-prefix": "kubectl-prefix", "tp1-journald": "journald", "tp1-docker-json": "docker-json"}[name]
    lines = (Path(__file__).resolve().parent.parent / "examples" / "tp8-shortfall" / "serve.log").read_bytes()
    _, wrap = bench_templates.WRAPPERS[name]
    for i, line in enumerate(lines.splitlines()[:300]):
        text = line.decode("utf-8", "surrogateescape")
        unwrapper = LineUnwrapper()
        inner = unwrapper.strip(wrap(text, i * 997).encode("utf-8", "surrogateescape"))
        want = ANSI_BYTES.sub(b"", line) if style == "docker-json" and b"\x1b" in line else line
        assert inner == want and unwrapper.seen == {style}, (i, line)


def test_the_plain_row_is_the_log_without_colour() -> None:
    import bench_templates

    _, wrap = bench_templates.WRAPPERS["tp1-plain"]
    assert wrap("\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO x", 0) == "(APIServer pid=1) INFO x"
