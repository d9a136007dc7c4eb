"""Metamorphic paste probe: every case with an expected.json, pasted as users paste it, still gives its findings.

The transformations are in ``tests/paste_probe.py`` (terminal wraps at 40-160 columns, indentation, grep
prefixes, kubectl --prefix with the wrap before or after it, markdown quotes and fences, CRLF, trailing
whitespace, and compositions). The default run covers the fragment cases and the short corpus cases, every
variant (about a thousand analyses of a few lines each); the sweep over the whole corpus is ``slow``. A
property test cuts LMCache lines at every width from 40 to 200 and compares the records with the originals.
"""

from __future__ import annotations

from pathlib import Path

import paste_probe as pp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdiag.engine import analyze
from specdiag.ingest import expand_inputs, iter_records

SMALL = pp.case_dirs(max_lines=20)
#: (case, paste) pairs known not to be rejoined, run as strict xfails (none at present)
KNOWN_GAPS: set[tuple[str, str]] = set()


def _params(cases: list[Path]) -> list:
    out = []
    for case in cases:
        for name in pp.variants(case):
            marks = [pytest.mark.xfail(strict=True, reason="cut inside a collector prefix")] \
                if (case.name, name) in KNOWN_GAPS else []
            out.append(pytest.param(case, name, marks=marks, id=f"{case.name}-{name}"))
    return out


_BASE: dict[Path, dict] = {}


def _base(case: Path) -> dict:
    if case not in _BASE:
        _BASE[case] = analyze([str(p) for p in pp.logs_of(case)]).to_dict()
    return _BASE[case]


@pytest.mark.parametrize(("case", "name"), _params(SMALL))
def test_pasted_case_keeps_its_findings_and_invents_nothing(tmp_path: Path, case: Path, name: str) -> None:
    assert pp.problems(case, name, tmp_path, _base(case)) == []


def test_probe_covers_every_shape_the_docs_name() -> None:
    names = set(pp.ALL)
    for w in pp.WIDTHS:
        assert {f"wrap{w}", f"app-wrap{w}+kubectl", f"kubectl+term-wrap{w}"} <= names
    assert {"indent2", "indent6", "tab", "grep-n", "grep-Hn", "md-quote", "fence", "crlf", "trailing"} <= names
    assert len(SMALL) >= 20 and sum(len(pp.variants(c)) for c in SMALL) > 900


def test_wrap_cuts_fall_inside_numbers_escapes_and_after_prefixes() -> None:
    """The cuts the probe makes are the hard ones: the generator is not accidentally kind."""
    lines = [line for c in SMALL for p in pp.logs_of(c) for line in pp.read_lines(p)]
    rows = [r for w in pp.WIDTHS for r in pp.wrap(w)(lines)]
    assert any(r[-1:].isdigit() and n[:1].isdigit() for r, n in zip(rows, rows[1:], strict=False))
    assert any(r.endswith(("\x1b[3", "\x1b[31;2", "\x1b")) for r in rows)  # an escape cut
    assert any(r.endswith("pid=767) [") for r in pp.ALL["kubectl+term-wrap40"](lines))  # just after the prefix


FULL = [c for c in pp.case_dirs(max_lines=None) if c not in SMALL]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "name"), _params(FULL))
def test_pasted_full_log_keeps_its_findings(tmp_path: Path, case: Path, name: str) -> None:
    assert pp.problems(case, name, tmp_path, _base(case)) == []


# ---- the joined records are the original ones, at any width ------------------------------------------------
_LMCACHE_LINES = [line for c in SMALL if "wrap" not in c.name for p in pp.logs_of(c) for line in pp.read_lines(p)
                  if "LMCache " in line[:90] and not pp._WRAPPED.match(line)]
_MODES = {"terminal": lambda w, ls: pp.wrap(w)(ls), "app-cut+kubectl": lambda w, ls: pp.kubectl(pp.wrap(w)(ls)),
          "kubectl+terminal": lambda w, ls: pp.wrap(w)(pp.kubectl(ls)),
          "terminal+indent": lambda w, ls: pp.indent("    ")(pp.wrap(w)(ls))}


def _records(path: Path, rows: list[str]) -> list[tuple]:
    path.write_bytes(("\n".join(rows) + "\n").encode("utf-8", "surrogateescape"))
    return [(r.kind, r.text, r.origin.proc, r.origin.pid, r.src_line)
            for r in iter_records(expand_inputs([str(path)])[0]) if hasattr(r, "text")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picked=st.lists(st.sampled_from(_LMCACHE_LINES), min_size=1, max_size=6),
       width=st.integers(min_value=40, max_value=200), mode=st.sampled_from(sorted(_MODES)))
def test_lmcache_records_cut_at_any_width_read_as_the_originals(tmp_path: Path, picked: list[str], width: int,
                                                                 mode: str) -> None:
    """Text, process, ``file:line``: a cut inside a number, an escape or the suffix changes none of them."""
    assert _records(tmp_path / "cut.log", _MODES[mode](width, picked)) == _records(tmp_path / "orig.log", picked)


@pytest.mark.parametrize("mode", sorted(_MODES))
def test_an_lmcache_record_cut_at_the_space_before_its_suffix_reads_as_the_original(tmp_path: Path, mode: str) -> None:
    """The row after the cut is `` (file.py:N:logger)``: a cut before the suffix (it is read as one), not a
    line of a multi-line message that would end the text with a line break (found by the property above)."""
    line = ("[2025-09-25 00:42:05,968] LMCache INFO: Reqid: chatcmpl-2c45aa08-405b-4d28-9d72-8ad3058f6852, Total "
            "tokens 32, LMCache hit tokens: 32, need to load: 31 (vllm_v1_adapter.py:1048:lmcache.integration.vllm."
            "vllm_v1_adapter)")
    width = line.index(" (vllm_v1")
    assert _records(tmp_path / "cut.log", _MODES[mode](width, [line])) == _records(tmp_path / "orig.log", [line])
