"""Every template row carries a synthetic sample: it must parse, and dispatch must find that very row."""

from __future__ import annotations

import pytest

from specdiag.events import default_matcher
from specdiag.ingest.envelope import Record
from specdiag.ingest.origin import NO_ORIGIN

MATCHER = default_matcher()
TEMPLATES = MATCHER.templates


@pytest.mark.parametrize("t", TEMPLATES, ids=[t.id for t in TEMPLATES])
def test_template_sample_parses_with_its_own_pattern(t) -> None:
    assert t.match(t.sample) is not None, f"{t.id}: sample does not match its regex"
    assert t.needle in t.sample, f"{t.id}: the literal prefilter is not in the sample"


@pytest.mark.parametrize("t", TEMPLATES, ids=[t.id for t in TEMPLATES])
def test_dispatch_returns_the_template_for_its_sample(t) -> None:
    kind = {"text": "text"}.get(t.source, t.source)
    rec = Record("x.log", 1, NO_ORIGIN, kind, t.level or "INFO", None, None, None, None, None, t.sample.encode())
    ev = MATCHER.match(rec)
    assert ev is not None, f"{t.id}: no template matched its own sample"
    # rows may legitimately shadow each other only if they share the same meaning; say which one won
    assert ev.id == t.id, f"{t.id}: dispatched to {ev.id}"


def test_template_ids_are_unique() -> None:
    ids = [t.id for t in TEMPLATES]
    assert len(ids) == len(set(ids))


def test_lazy_templates_parse_fields_on_first_access() -> None:
    rec = Record("x.log", 1, NO_ORIGIN, "lmcache", "INFO", None, None, None, None, None,
                 b"Reqid: cmpl-1, Total tokens 4113, Inference Engine computed tokens: 0, LMCache hit tokens: 3840, need to load: 3840")
    ev = MATCHER.match(rec)
    assert ev.id == "L1"
    assert ev._f is None  # not parsed yet
    assert ev.f["hit"] == "3840" and ev.f["total"] == 4113


def _vllm(text: str) -> Record:
    return Record("x.log", 1, NO_ORIGIN, "vllm", "INFO", None, None, None, None, None, text.encode())


def test_a_template_of_several_first_words_is_dispatched_on_each_and_only_on_those() -> None:
    """V_SPEC's two forms begin with different words; other loggers' ``… metrics: `` lines (KV Transfer,
    DiffusionDecoding, every stats interval) are not its candidates, so the prefilter may count them unread."""
    new = "SpecDecoding metrics: Draft acceptance rate: 48.1%, Mean acceptance length: 2.41, Accepted: 582 tokens, " \
          "Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455"
    old = "Speculative metrics: Draft acceptance rate: 0.481, System efficiency: 0.602, Number of speculative tokens: 3"
    assert MATCHER.match(_vllm(new)).id == "V_SPEC"
    assert MATCHER.match(_vllm(old)).id == "V_SPEC"
    words = MATCHER.dispatch("vllm")
    assert b"SpecDecoding" in words and b"Speculative" in words
    assert not any(b"metrics" in n for n in MATCHER.needles("vllm"))
    for other in ("KV Transfer metrics: {'num_successful_transfers': 3}",
                  "DiffusionDecoding metrics: Committed token throughput: 12.00 tokens/s"):
        ev = MATCHER.match(_vllm(other))
        assert ev is None or ev.id != "V_SPEC"
