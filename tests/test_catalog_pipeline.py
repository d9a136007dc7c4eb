"""Every catalogued message, rendered with sample values in the envelope of its era and read by the whole
ingest + matcher path, is recognised as that message.

The envelope is the one the release prints: LMCache's ``[time] LMCache LEVEL: msg (file:line:logger)``,
vLLM's ``LEVEL MM-DD HH:MM:SS [file:line] msg`` (behind ``(EngineCore_DP0 pid=N)`` from 0.31 on, where the
process prefix became part of vLLM's own record; every line of a multi-line message carries the header, as
vLLM's NewLineFormatter writes it). A line a hand-written template reads counts when the catalog entry
behind that event is the message (or one with the same format).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from specdiag.catalog import catalog
from specdiag.catalog.coverage import indistinguishable
from specdiag.events import CATALOG_EVENT, default_matcher, entry_of
from specdiag.ingest import expand_inputs, iter_records

PROBLEM = ("WARNING", "ERROR", "CRITICAL")


def _release_key(release: str) -> tuple:
    nums = [int(p) if p.isdigit() else 0 for p in release.split(" ")[-1].replace("rc", ".").split(".")[:4]]
    return tuple(nums)


def _vllm_era(release: str) -> bool:
    """Whether this vLLM release prints the process prefix as part of its own record (0.31 on)."""
    return _release_key(release) >= (0, 31)


def _render(entry, release: str, line: int, sample: str) -> list[str]:
    file = entry.module.rsplit("/", 1)[-1]
    level = entry.level
    if entry.project == "lmcache":
        logger = "lmcache." + entry.module[:-3].replace("/", ".")
        return f"[2026-05-06 15:56:03,745] LMCache {level}: {sample} ({file}:{line}:{logger})".split("\n")
    head = f"{level} 05-06 15:56:03 [{file}:{line}] "
    if _vllm_era(release):
        head = "(EngineCore_DP0 pid=7) " + head
    return [head + part for part in sample.split("\n")]


def _recognised_as(ev, entry, line: int) -> bool:
    if ev is None:
        return False
    return indistinguishable(ev.f.get("entry") if ev.id == CATALOG_EVENT else entry_of(ev), entry, line)


def _check(tmp_path, project: str) -> tuple[Counter, Counter, list[str]]:
    cat = catalog()
    cases, text = [], []
    for e in cat.entries:
        if e.project != project:
            continue
        for release in {e.releases[0], e.releases[-1]}:  # oldest first, as the catalog keeps them
            lines = _render(e, release, e.lines[release], cat.sample(e) if e.fmt else "x1")
            cases.append((e, len(text) + 1, e.lines[release]))
            text.extend(lines)
    path = tmp_path / f"{project}.log"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    matcher = default_matcher()
    by_line = {}
    for rec in iter_records(expand_inputs([str(path)])[0]):
        by_line[rec.line] = matcher.match(rec)
    total, ok, misses = Counter(), Counter(), []
    for e, line, printed in cases:
        key = "problem" if e.level in PROBLEM else "all"
        total[key] += 1
        if _recognised_as(by_line.get(line), e, printed):
            ok[key] += 1
        elif len(misses) < 20:
            misses.append(f"{e.id} {e.level} {e.module}: {text[line - 1][:140]!r}")
    return total, ok, misses


@pytest.mark.parametrize("project", ["lmcache", "vllm"])
def test_every_catalogued_message_is_recognised_as_itself_in_its_envelope(tmp_path, project):
    total, ok, misses = _check(tmp_path, project)
    assert total["problem"] > 100
    problem_rate = ok["problem"] / total["problem"]
    overall = (ok["problem"] + ok["all"]) / (total["problem"] + total["all"])
    assert problem_rate == 1.0, (problem_rate, misses)
    assert overall >= 0.99, (overall, misses)


def test_every_hand_written_row_is_a_catalogued_message_or_says_why_not():
    """The hand-written rows annotate catalog entries (field names, routing): each row's sample must be a
    message some release prints at the row's location, so no row describes a line upstream never logged."""
    cat = catalog()
    missing = []
    for t in default_matcher().templates:
        if t.source not in ("lmcache", "vllm") or t.outside:
            continue
        m = re.search(r"([\w/]+\.py):(\d+)", t.location)
        file, line = (m.group(1), int(m.group(2))) if m else (None, None)
        entry = cat.match(t.sample, project=t.source, file=file, line=line) or \
            cat.match(t.sample.split("\n")[0], project=t.source)
        if entry is None:
            missing.append(f"{t.id}: {t.sample[:80]!r}")
    assert missing == []
