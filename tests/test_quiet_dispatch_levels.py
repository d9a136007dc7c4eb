"""A template bound to INFO never reads a DEBUG record, but the prefilter keeps every DEBUG and INFO record with a
template's first word and needle for reading (its dispatch is per project, not per level). A template at INFO whose
first word and needle a catalogued DEBUG message also has would keep that DEBUG flood out of the count: the
noise log went 0.37 -> 0.40-0.44 s when SRV003's template took 'block found' from a DEBUG wording."""

from __future__ import annotations

from specdiag.catalog import catalog
from specdiag.events import default_matcher, first_word


def test_no_info_template_keeps_a_catalogued_debug_message_from_the_count():
    matcher = default_matcher()
    info = [t for (src, _w), ts in matcher.by_first.items() if src in ("vllm", "lmcache") for t in ts
            if t.level == "INFO"]
    cat = catalog()
    clashes = []
    for entry in cat.entries:
        if entry.level != "DEBUG" or entry.project not in ("vllm", "lmcache") or not entry.fmt:
            continue
        text = cat.sample(entry).encode()
        word = first_word(text)
        clashes += [(t.id, entry.fmt[:60]) for t in info
                    if t.source == entry.project and word in t.first.encode().split(b"|") and t.bneedle in text]
    assert not clashes
