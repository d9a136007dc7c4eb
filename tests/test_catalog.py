"""The shipped message catalog: well-formed data, families, matching coverage, linear time, lazy loading."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from specdiag.catalog import catalog
from specdiag.catalog.families import FAMILIES
from specdiag.catalog.store import DATA

LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
SEVERE = {"WARNING", "ERROR", "CRITICAL"}


@pytest.fixture(scope="module")
def cat():
    return catalog()


def _basename(module: str) -> str:
    return module.rsplit("/", 1)[-1]


def test_shipped_catalog_is_well_formed_with_both_projects_releases(cat):
    with open(DATA, encoding="utf-8") as f:
        header = json.loads(f.readline())
    assert header["schema"] == 1 and "Apache-2.0" in header["licence"] and len(header["attribution"]) == 2
    assert len([r for r in cat.releases["vllm"] if r[0].isdigit()]) >= 30
    assert len([r for r in cat.releases["lmcache"] if r[0].isdigit()]) >= 25
    ids = [e.id for e in cat.entries]
    assert len(ids) == len(set(ids)) > 5000
    for e in cat.entries:
        assert e.level in LEVELS, e
        assert e.id.startswith({"lmcache": "lmc.", "vllm": "vll."}[e.project]), e
        assert e.releases and all(isinstance(e.lines[r], int) and e.lines[r] > 0 for r in e.releases), e
        assert set(e.releases) <= set(cat.releases[e.project]), e
        assert e.fmt is not None or e.expr, e
        assert cat.by_id(e.id) is e


def test_every_warning_or_worse_entry_has_a_known_family(cat):
    bad = [e for e in cat.entries if e.level in SEVERE and e.family not in FAMILIES]
    assert not bad, bad[:5]
    below = [e for e in cat.entries if e.level not in SEVERE and e.family is not None]
    assert not below, below[:5]


def test_shipped_families_are_what_the_family_table_assigns(cat):
    """A change to the family table without ``gen_catalog.py --refamily`` leaves the data behind it."""
    from specdiag.catalog.families import assign

    stale = [e.id for e in cat.entries if e.family != assign(e.project, e.module, e.level, e.fmt)]
    assert not stale, stale[:5]


@pytest.mark.parametrize("module, family", [
    ("model_executor/layers/quantization/fp8.py", "kernels"),
    ("model_executor/model_loader/weight_utils.py", "model-loading"),
    ("model_executor/models/qwen2.py", "model-loading"),
    ("model_executor/guided_decoding/__init__.py", "structured-output"),
    ("v1/structured_output/backend_xgrammar.py", "structured-output"),
    ("executor/multiproc_worker_utils.py", "worker"),
    ("v1/executor/multiproc_executor.py", "worker"),
])
def test_model_executor_modules_are_not_filed_as_executor_warnings(module, family):
    from specdiag.catalog.families import assign

    assert assign("vllm", module, "WARNING", "a message about nothing in particular") == family


def _indistinguishable(cat, e, got, sample: str, line: int) -> bool:
    """``got`` is as good an answer as ``e``: same level and file, ever at that line, its format fits the
    text and is exactly as specific (the same message copied to two modules, or twice in one module)."""
    from specdiag.catalog.pattern import compile_fmt

    if got is None or got.fmt is None or got.level != e.level or _basename(got.module) != _basename(e.module):
        return False
    a, b = compile_fmt(e.fmt), compile_fmt(got.fmt)
    return (line in got.lines.values() and cat.values(got, sample) is not None
            and (a.weight, a.typed) == (b.weight, b.typed))


def _coverage(cat, with_location: bool) -> tuple[Counter, Counter, Counter, list]:
    """Per (project, level): (entry, release) pairs tried, matched back as that entry, or as an equal one."""
    tried, ok, same, misses = Counter(), Counter(), Counter(), []
    for e in cat.entries:
        if e.fmt is None:
            continue
        sample = cat.sample(e)
        if with_location:  # every envelope prints the level: it is part of the location
            for r in e.releases:
                line = e.lines[r]
                got = cat.match(sample, project=e.project, file=_basename(e.module), line=line, level=e.level)
                tried[e.project, e.level] += 1
                if got is e:
                    ok[e.project, e.level] += 1
                elif _indistinguishable(cat, e, got, sample, line):
                    same[e.project, e.level] += 1
                elif len(misses) < 20:
                    misses.append((e.id, r, sample, got and got.id))
        else:
            tried[e.project, e.level] += 1
            got = cat.match(sample, project=e.project)
            if got is not None and got.fmt == e.fmt:
                ok[e.project, e.level] += 1
            elif len(misses) < 20:
                misses.append((e.id, sample, got and got.fmt))
    return tried, ok, same, misses


def _report(title: str, tried: Counter, ok: Counter, same: Counter) -> None:
    print(f"\n{title} (exact, + indistinguishable)")
    for key in sorted(tried):
        n = tried[key]
        print(f"  {key[0]:8} {key[1]:8} {ok[key]:6}/{n:6} = {100 * ok[key] / n:6.2f} %  "
              f"{100 * (ok[key] + same[key]) / n:6.2f} %")


def test_every_sample_matches_back_to_its_entry_at_every_release_location(cat):
    tried, ok, same, misses = _coverage(cat, with_location=True)
    _report("coverage with file:line", tried, ok, same)
    severe_tried = sum(n for k, n in tried.items() if k[1] in SEVERE)
    severe_ok = sum(n + same[k] for k, n in ok.items() if k[1] in SEVERE)
    assert severe_ok == severe_tried, misses
    # exact alone is 98.9 %: the rest are copies of one message under one file name and line (moved
    # modules, lmcache-cli's inprocess tree), which no log line can tell apart
    assert sum(ok.values()) + sum(same.values()) >= 0.99 * sum(tried.values()), misses
    assert sum(ok.values()) >= 0.985 * sum(tried.values()), misses


def test_text_alone_finds_an_identical_format_for_warnings(cat):
    from specdiag.catalog.pattern import compile_fmt

    tried, ok, same, misses = _coverage(cat, with_location=False)
    _report("coverage by text alone", tried, ok, same)
    location_only = sum(1 for e in cat.entries if e.fmt is not None and compile_fmt(e.fmt).longest < 4)
    print(f"  ({location_only} entries have no literal of 4+ characters: location only)")
    textual = [e for e in cat.entries if e.level in SEVERE and e.fmt is not None and compile_fmt(e.fmt).longest >= 4]
    good = sum(1 for e in textual if (got := cat.match(cat.sample(e), project=e.project)) and got.fmt == e.fmt)
    assert good >= 0.97 * len(textual), misses


def test_matching_time_is_linear_on_adversarial_lines(cat):
    severe = [e for e in cat.entries if e.fmt and e.level in SEVERE]
    picks = severe[:: max(1, len(severe) // 60)]
    worst = 0.0
    for e in picks:
        sample = cat.sample(e)
        for line in (sample * 2000)[:100_000] + "\x01", sample[:-1] * 2000 + "\x01":
            t = time.perf_counter()
            cat.match(line)
            cat.match(line, project=e.project, file=_basename(e.module), line=e.lines[e.releases[-1]])
            cat.values(e, line)
            worst = max(worst, time.perf_counter() - t)
    assert worst < 0.05, worst


def test_importing_specdiag_reads_no_catalog_data():
    code = ("import sys, specdiag, specdiag.catalog as c; "
            "assert not c.loaded(), 'loaded'; assert 'specdiag.catalog.store' not in sys.modules, 'store'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("message", "project", "file", "line", "needle", "level"), [
    ("Num retrieved tokens: 49664, num expected tokens: 55808", "lmcache", "vllm_v1_adapter.py", 882,
     "Num retrieved tokens: %d", "ERROR"),
    ("Num retrieved tokens: 49664, num expected tokens: 55808", "lmcache", None, None,
     "Num retrieved tokens: %d", "ERROR"),
    ("Engine core proc EngineCore_0 died unexpectedly, shutting down client.", "vllm", "core_client.py", 667,
     "died unexpectedly, shutting down client", "ERROR"),
    ("Engine core proc EngineCore_0 died unexpectedly, shutting down client.", None, None, None,
     "died unexpectedly, shutting down client", "ERROR"),
    ("Centralized cache sharing detected but PYTHONHASHSEED not set. For consistent caching, set: export "
     "PYTHONHASHSEED=0 before the engine starts.", "lmcache", "token_database.py", 313, "Centralized cache", "WARNING"),
])
def test_known_real_lines_match_their_entry(cat, message, project, file, line, needle, level):
    got = cat.match(message, project=project, file=file, line=line)
    assert got is not None and needle in got.fmt and got.level == level, got
    assert cat.values(got, message) is not None


def test_entry_location_and_release_range_name_the_newest_release(cat):
    (e,) = [x for x in cat.find_format("lmcache", "Num retrieved tokens: %d") if x.level == "ERROR"]
    assert e.location() == f"integration/vllm/vllm_v1_adapter.py:{e.lines[e.releases[-1]]}"
    assert e.lines["0.5.6"] == 882
    assert e.release_range().startswith("0.3.0–")  # the first release on the registry
    assert cat.values(e, "Num retrieved tokens: 49664, num expected tokens: 55808") == ["49664", "55808"]
    assert cat.values(e, "Num retrieved tokens: many, num expected tokens: 55808") is None


def test_the_stored_dispatch_keys_are_those_the_formats_give_today():
    """The generator stores each format's index key and specificity so loading compiles nothing; a change
    to the matcher's rules without regenerating the data would file formats under stale keys."""
    import json

    from specdiag.catalog.store import DATA, dispatch

    with open(DATA, encoding="utf-8") as f:
        rows = [json.loads(line) for line in list(f)[3:]]  # after the header, the index, the text candidates
    stale = [r["id"] for r in rows if r["fmt"] is not None
             and {k: r[k] for k in ("w", "t", "ix") if k in r} != dispatch(r["fmt"])]
    assert len(rows) > 10_000 and stale == []


def test_the_stored_index_is_the_one_its_rows_give():
    """Loading reads the index line instead of every row; an index out of step with its rows would file
    entries under the wrong keys or rows."""
    import json

    from specdiag.catalog.store import DATA, build_index, build_text_candidates

    with open(DATA, encoding="utf-8") as f:
        lines = list(f)
    rows = [json.loads(line) for line in lines[3:]]
    assert json.loads(lines[1])["index"] == build_index(rows)
    assert json.loads(lines[2])["text_candidates"] == build_text_candidates(rows)


def test_a_catalog_without_its_index_line_is_indexed_on_load_and_matches_the_same(tmp_path):
    from specdiag.catalog.store import DATA, load

    lines = DATA.read_bytes().split(b"\n")
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(b"\n".join([lines[0], *lines[3:]]))  # no index, no text candidates: built from the rows
    a, b = load(), load(bare)
    msgs = ["Num retrieved tokens: 49664, num expected tokens: 55808", "Poller timed out",
            "Reqid: cmpl-1, Total tokens 10, LMCache hit tokens: 0, need to load: 0"]
    assert [a.match(m) for m in msgs] == [b.match(m) for m in msgs] and a.match(msgs[0]) is not None
    assert [e.id for e in a.entries] == [e.id for e in b.entries]
    assert a.text_candidate_lines("vllm") == b.text_candidate_lines("vllm") != []


def test_the_rows_printing_at_a_place_are_found_from_the_line_lists_as_from_the_decoded_rows():
    """``_rows_at`` reads the index's line lists and leaves a file's other rows undecoded. At every printed
    line of every seventh file, and at lines no release prints at, it names exactly the rows whose decoded
    entry prints there, and finding them decodes nothing."""
    import json

    from specdiag.catalog.store import DATA, Catalog

    with open(DATA, "rb") as f:
        raw = f.read().split(b"\n")
    header, index = json.loads(raw[0]), json.loads(raw[1])["index"]
    rows = [line for line in raw[3:] if line.strip()]
    fast, decoded = Catalog(header, rows, index), Catalog(header, rows, index)
    bases = sorted(index["base"])
    assert len(bases) > 500
    for base in bases[::7]:
        printed = {int(x) for i in index["base"][base] for x in index["lines"][i].split(",")}
        for line in sorted(printed) + [0, -1, max(printed) + 1]:
            want = [i for i in index["base"][base] if decoded._entry(i).prints_at(line)]
            assert fast._rows_at(base, line) == want, (base, line)
    assert sum(e is not None for e in fast._built) == 0  # nothing decoded to find them
    assert [e.id for e in fast.at("cache_engine.py", 985)] != []


def test_a_line_without_its_place_is_never_a_benchmark_tools_by_text(cat):
    """LMCache #651: 'Error in LMCache lookup server: …' (a release before the catalog) was said to be printed by
    ``tools/controller_benchmark/benchmark.py`` ('Error in %s: %s'); with that place given it still is."""
    msg = "Error in LMCache lookup server: unpack requires a buffer of 32 bytes"
    assert cat.match(msg, project="lmcache") is None
    tool = [e for e in cat.entries if e.module == "tools/controller_benchmark/benchmark.py" and e.fmt == "Error in %s: %s"]
    assert tool
    line = tool[0].runs[-1]  # (first release, last release, line) triples, flat
    here = cat.match(msg, project="lmcache", file="tools/controller_benchmark/benchmark.py", line=line)
    assert here is not None and here.module == "tools/controller_benchmark/benchmark.py"
