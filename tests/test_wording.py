"""The scanned messages' wording is written once (``specdiag/catalog/wording.py``) and read by every reader.

Readers: the scanner's reference and fallback, the compiled scanner (through the generated ``_wording.h``),
the events templates of those messages, the look-backs and the repro parser. A reader that spells one of
the distinctive literals itself fails here; so does a compiled scanner naming a literal the header lacks.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from specdiag.catalog import wording

ROOT = Path(__file__).resolve().parents[1]
PY_READERS = ["specdiag/ingest/scan.py", "specdiag/ingest/scan_fast.py", "specdiag/ingest/hot.py",
              "specdiag/ingest/blocks.py", "specdiag/repro/verdict.py", "specdiag/analyzers/kv_shortfall/detect.py",
              "specdiag/metrics/parse.py"]
C_READER = ROOT / "specdiag/ingest/_scan.c"
#: the templates of these messages in the events layer (their samples are data, not wording)
TEMPLATES = {"specdiag/events/lmcache.py": ("L1", "R4", "S1"),
             "specdiag/events/vllm.py": ("V_STATS", "V_STATS_V0", "V_SPEC")}
SAMPLE_ARG = 7  # T(id, source, first, needle, pattern, since, location, sample, ...)
#: literals distinctive enough that no other message of these readers holds them (plain words such as
#: "Running" or "Accepted", and separators, are read from the same place but not searched for here)
DISTINCTIVE = ("TAG_OPEN", "STORED", "OUT_OF_TOTAL", "RETRIEVED", "REQUIRED_FROM", "TOTAL_TOKENS_CLOSE", "REQID",
               "TOTAL_TOKENS", "COMPUTED", "HIT", "NEED", "ENGINES_AGGREGATED", "PROMPT_TPS", "GEN_TPS", "PREEMPTIONS",
               "KV_USAGE", "PREFIX_HIT", "EXT_HIT", "SPEC", "SPEC_OLD", "SPEC_MEAN_LENGTH", "SPEC_ACCEPTED_TPS",
               "SPEC_DRAFTED_TPS", "SPEC_PER_POSITION", "SPEC_AVG_RATE", "SPEC_RATE")
#: what the compiled scanner does not read: the line before 0.8.5 stays with the per-line path
NOT_COMPILED = {"SPEC_OLD"}


def _literals() -> dict[str, str]:
    return {name: getattr(wording, name) for name in DISTINCTIVE}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _code_constants(tree: ast.AST, skip: set[int]) -> list[tuple[int, str]]:
    """Every str or bytes constant of the code (no docstring, nothing in ``skip``), as text with its line."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in skip:
            value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            out.append((node.lineno, value))
    return out


def _spelled(constants: list[tuple[int, str]]) -> list[str]:
    return [f"line {line}: {name} in {text!r}" for line, text in constants
            for name, lit in _literals().items() if lit in text]


@pytest.mark.parametrize("path", PY_READERS)
def test_no_python_reader_spells_the_wording_itself(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    assert _spelled(_code_constants(tree, _docstrings(tree))) == []


@pytest.mark.parametrize(("path", "ids"), TEMPLATES.items())
def test_the_events_templates_of_the_scanned_messages_take_their_wording_from_the_one_place(path: str,
                                                                                             ids: tuple) -> None:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "T"
             and c.args and isinstance(c.args[0], ast.Constant) and c.args[0].value in ids]
    assert sorted(c.args[0].value for c in calls) == sorted(ids)
    for call in calls:
        skip = {id(n) for n in ast.walk(call.args[SAMPLE_ARG])} | {id(call.args[0])}
        assert _spelled(_code_constants(call, skip)) == [], call.args[0].value


def _c_literals(source: str) -> list[tuple[int, str]]:
    """The string literals of C code, comments removed (line numbers kept)."""
    code = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), source, flags=re.S)
    code = re.sub(r"//[^\n]*", "", code)
    return [(code.count("\n", 0, m.start()) + 1, m.group(1)) for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', code)]


def test_the_compiled_scanner_spells_no_literal_and_names_only_what_the_header_defines() -> None:
    source = C_READER.read_text(encoding="utf-8")
    assert _spelled(_c_literals(source)) == []
    header = _header_of_setup()
    defined = set(re.findall(r"#define (W_\w+) ", header))
    used = set(re.findall(r"\bW_[A-Z_]+\b", source))
    assert used and used <= defined, used - defined
    assert {f"W_{name}" for name in set(DISTINCTIVE) - NOT_COMPILED} <= used  # each literal from the header


def _header_of_setup() -> str:
    """The header ``setup.py`` writes from ``wording.py`` (its ``wording_header``, run without ``setup()``)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("wording_header", "_c_string")]
    scope: dict = {"ast": ast}
    exec(compile(ast.Module(fns, []), "setup.py", "exec"), scope)  # noqa: S102 - our own build script's functions
    return scope["wording_header"]((ROOT / "specdiag/catalog/wording.py").read_text(encoding="utf-8"))


def test_the_generated_header_holds_every_literal_and_is_not_stale() -> None:
    header = _header_of_setup()
    for name in (n for n in vars(wording) if n.isupper() and isinstance(getattr(wording, n), str)):
        value = getattr(wording, name)
        assert value.isascii() and value.isprintable(), name  # what the header's escaping covers
        assert f'#define W_{name} "{value}"' in header.replace('\\"', '"').replace("\\\\", "\\")
    for name in (n for n in vars(wording) if n.isupper() and isinstance(getattr(wording, n), tuple)):
        items = ", ".join(f'"{v}"' for v in getattr(wording, name))
        assert f"#define W_{name} {items}" in header.replace('\\"', '"').replace("\\\\", "\\"), name
    built = ROOT / "specdiag/ingest/_wording.h"
    if built.exists():  # a build from this tree: the compiled scanner read these literals
        assert built.read_text(encoding="utf-8") == header


def _fresh_copy(module: str):
    """A private copy of ``module`` executed now (its import-time patterns built from today's wording),
    leaving the imported module as it is."""
    spec = importlib.util.find_spec(module)
    copy = importlib.util.module_from_spec(importlib.util.spec_from_file_location(f"_copy_of_{module}", spec.origin))
    copy.__spec__.loader.exec_module(copy)
    return copy


def test_the_python_readers_follow_a_changed_wording(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reworded in the one place, the reference scanner, its fallback and the template read the new wording."""
    from specdiag.ingest import scan

    monkeypatch.setattr(wording, "STORED", "Saved ")
    monkeypatch.setattr(wording.BYTES, "STORED", b"Saved ")
    monkeypatch.setattr(wording.REGEX, "STORED", re.escape("Saved "))
    monkeypatch.setattr(wording.BYTES_REGEX, "STORED", re.escape(b"Saved "))
    line = b"[2026-03-14 09:26:53,589] LMCache INFO: Saved 5 out of total 7 tokens (cache_engine.py:588:lmcache)\n"
    assert scan.scan_block_py(line, 0).counts == {(b"", "S1"): 1}  # reads the literals when it runs
    fast = _fresh_copy("specdiag.ingest.scan_fast")  # its patterns are built when it is imported
    assert fast.scan_block_fast(line, 0).counts == {(b"", "S1"): 1}
    assert fast.scan_block_fast(line.replace(b"Saved", b"Stored"), 0).counts == {}
    s1 = next(t for t in _fresh_copy("specdiag.events.lmcache").LMCACHE_TEMPLATES if t.id == "S1")
    assert s1.first == "Saved"
    assert s1.match(b"Saved 5 out of total 7 tokens") == {"req_id": None, "stored": 5, "total": 7}


def test_every_shape_the_wording_spells_is_a_format_upstream_prints() -> None:
    """The pieces are the catalog's formats (generated from LMCache's and vLLM's source): each shape the
    scanners accept, spelled from the wording, begins a catalogued format (vLLM's newer stats lines are built
    from parts at run time; the 0.9-0.11 format holds the same parts)."""
    from specdiag.catalog import catalog

    w = wording
    tag = f"{w.TAG_OPEN}%s{w.TAG_CLOSE} "
    lookup = f"{w.REQID}%s,{w.TOTAL_TOKENS}%d{w.SEP}"
    shapes = [f"{w.STORED}%d{w.OUT_OF_TOTAL}%d{w.TOKENS}", f"{tag}{w.STORED}%d{w.OUT_OF_TOTAL}%d{w.TOKENS}",
              f"{w.RETRIEVED}%d{w.OUT_OF}%d{w.REQUIRED_FROM}%d{w.TOTAL_TOKENS_CLOSE}",
              f"{tag}{w.RETRIEVED}%d{w.OUT_OF}%d{w.REQUIRED_FROM}%d{w.TOTAL_TOKENS_CLOSE}",
              f"{w.RETRIEVED}%d{w.OUT_OF}{w.LEGACY_TOTAL}%d{w.OUT_OF_TOTAL}%d{w.TOKENS}",
              f"{tag}{w.RETRIEVED}%d{w.OUT_OF}%d{w.OUT_OF_TOTAL}%d{w.TOKENS}",
              f"{lookup}{w.HIT}%d{w.SEP}{w.NEED}%d", f"{lookup}{w.HIT}{w.NO_HIT}",
              f"{lookup}{w.COMPUTED}%d{w.SEP}{w.HIT}%d{w.SEP}{w.NEED}%d",
              f"{lookup}{w.COMPUTED}%d{w.SEP}{w.HIT}%d{w.SEP}{w.BELOW_MIN}{w.NEED}%d",
              f"{w.ENGINE}%03d{w.KEY_END}{w.PROMPT_TPS}{w.KEY_END}%.1f{w.PER_SECOND}{w.SEP}{w.GEN_TPS}{w.KEY_END}%.1f"
              f"{w.PER_SECOND}{w.SEP}{w.RUNNING}{w.KEY_END}%d{w.REQS}{w.SEP}{w.WAITING}{w.KEY_END}%d{w.REQS}{w.SEP}"
              f"{w.KV_DEVICE_GPU}{w.KV_USAGE}{w.KEY_END}%.1f%%{w.SEP}{w.PREFIX_HIT}{w.KEY_END}%.1f%%",
              f"{w.SPEC}{w.KEY_END}{w.SPEC_RATE}{w.KEY_END}%.1f%%{w.SEP}{w.SPEC_MEAN_LENGTH}{w.KEY_END}%.2f{w.SEP}"
              f"{w.SPEC_ACCEPTED}{w.KEY_END}%d{w.TOKENS}{w.SEP}{w.SPEC_DRAFTED}{w.KEY_END}%d{w.TOKENS}{w.SEP}"
              f"{w.SPEC_PER_POSITION}{w.KEY_END}%s",
              f"{w.SPEC}{w.KEY_END}{w.SPEC_MEAN_LENGTH}{w.KEY_END}%.2f{w.SEP}{w.SPEC_ACCEPTED_TPS}{w.KEY_END}%.2f"
              f"{w.PER_SECOND}{w.SEP}{w.SPEC_DRAFTED_TPS}{w.KEY_END}%.2f{w.PER_SECOND}{w.SEP}{w.SPEC_ACCEPTED}"
              f"{w.KEY_END}%d{w.TOKENS}{w.SEP}{w.SPEC_DRAFTED}{w.KEY_END}%d{w.TOKENS}{w.SEP}{w.SPEC_PER_POSITION}"
              f"{w.KEY_END}%s{w.SEP}{w.SPEC_AVG_RATE}{w.KEY_END}%.1f%%"]
    formats = {e.fmt for e in catalog().entries if e.fmt}
    for shape in shapes:
        assert any(f.startswith(shape) for f in formats), shape


def test_a_stats_line_of_either_kv_device_is_read_by_every_scanner():
    """A stats line of either KV device gives the same row in every scanner, with that device's code."""
    from specdiag.ingest import scan
    from specdiag.ingest.scan_fast import scan_block_fast

    for i, dev in enumerate((wording.KV_DEVICE_GPU, wording.KV_DEVICE_CPU)):
        line = (b"INFO 05-06 08:00:00 [loggers.py:335] " + wording.BYTES.ENGINE + b"000" + scan.S_PROMPT + b"1.0"
                + scan.S_GEN + b"2.0" + scan.S_RUNNING + b"3" + scan.S_WAITING + b"4" + scan.S_AFTER_WAITING
                + dev.encode() + scan.S_KV_USAGE + b"5.0%\n")
        results = [scan.scan_block_py(line, 0), scan_block_fast(line, 0)]
        if scan._compiled is not None:
            results.append(scan.scan_block_c(line, 0))
        assert all(r == results[0] for r in results)
        assert list(results[0].columns["stats"]["kv_dev"]) == [i], dev


def test_every_word_that_keeps_a_raw_text_line_is_an_anchor_the_prefilter_reads_it_for() -> None:
    """The reader keeps a line of raw text holding one of ``KEPT_TEXT_WORDS`` (``records``); the prefilter must
    read such a line, which it does for any of its anchors: both copies take them from one tuple."""
    from specdiag.ingest import prefilter

    assert set(wording.KEPT_TEXT_WORDS) <= set(wording.PREFILTER_ANCHORS)
    assert prefilter.ANCHORS == tuple(a.encode() for a in wording.PREFILTER_ANCHORS)
    assert len(wording.PREFILTER_ANCHORS) <= 64  # the compiled copy's bitmask of anchors per first byte
    for word in wording.KEPT_TEXT_WORDS:
        assert prefilter.inert_kind(b"x " + word.encode() + b" y", 0) != prefilter.INERT


def test_the_anchors_fit_the_compiled_prefilters_masks():
    """_prefilter.c keeps, per first byte, the anchors starting with it as bits of a uint64_t: a 65th anchor would
    silently never be searched."""
    from specdiag.catalog.wording import PREFILTER_ANCHORS

    assert len(PREFILTER_ANCHORS) <= 64
