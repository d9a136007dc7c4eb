"""The pure-Python fallback's shortcuts, each attacked where it could go wrong.

``scan_fast`` decides once per line *key* (digits → ``1``, request-id contents emptied) and reads the
numbers from slices; these blocks put lines that share a key with a canonical hot line — or almost do —
beside it, so a shortcut that trusted the key too far gives a different result from the reference.
Every block is scanned with a cold cache and again with the cache warmed by the block itself.
"""

from __future__ import annotations

import pytest
from scan_cases import ENV, SUFFIX

from specdiag.ingest import scan, scan_fast
from specdiag.ingest.scan import scan_block_py
from specdiag.ingest.scan_fast import key_decision, line_keys, scan_block_fast

ESC_ENV = b"\x1b[32;20m" + ENV[:-1] + b"\x1b[0m "
W0 = b"\x1b[1;36m(Worker_TP0 pid=765)\x1b[0;0m "
STORE = W0 + ESC_ENV + b"[req_id=chatcmpl-9a7a6604-b006c593] Stored 2304 out of total 2304 tokens. size: 0.0890 GB" \
    + b" \x1b[3m" + SUFFIX["store"][1:] + b"\x1b[0m"
RETRIEVE = W0 + ESC_ENV + b"[req_id=chatcmpl-6ca0a2cf-c6c93c2a] Retrieved 768 out of 1024 required tokens (from 1100" \
    + b" total tokens). size: 0.0297 gb" + b" \x1b[3m" + SUFFIX["retrieve"][1:] + b"\x1b[0m"
LOOKUP = b"(EngineCore pid=203) " + ENV + b"Reqid: chatcmpl-3e98-c7e0, Total tokens 3228, Inference Engine computed " \
    b"tokens: 0, LMCache hit tokens: 768, need to load: 768" + SUFFIX["lookup"]
ACCESS = b'(APIServer pid=1) INFO:     10.42.9.130:59293 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _same(*lines: bytes, base: int = 7) -> scan.ScanResult:
    """Cold cache, then warm: the fallback must return the reference's result both times."""
    block = b"\n".join(lines) + b"\n"
    ref = scan_block_py(block, base)
    scan_fast._CACHE.clear()
    assert scan_block_fast(block, base) == ref
    assert scan_block_fast(block, base) == ref
    return ref


def test_canonical_lines_are_decided_by_their_key_not_by_the_reference_per_line() -> None:
    for line, tid in ((STORE, scan.STORE), (RETRIEVE, scan.RETRIEVE), (LOOKUP, scan.LOOKUP), (ACCESS, scan.ACCESS)):
        assert key_decision(line_keys(line + b"\n", 1)[0])[0] == tid
    res = _same(STORE, RETRIEVE, LOOKUP, ACCESS)
    assert sum(res.counts.values()) == 4 and list(res.flagged["line"]) == [9]


def test_lines_of_one_key_keep_their_own_numbers_ids_and_prefixes() -> None:
    other_rank = STORE.replace(b"TP0 pid=765", b"TP3 pid=768").replace(b"2304", b"9999")
    other_id = LOOKUP.replace(b"3e98-c7e0", b"ffff-0000").replace(b"768", b"512")
    assert line_keys(STORE + b"\n" + other_rank + b"\n", 2)[0] == line_keys(STORE + b"\n" + other_rank + b"\n", 2)[1]
    res = _same(STORE, other_rank, LOOKUP, other_id)
    assert len(res.prefixes) == 3 and list(res.columns["stores"]["stored"]) == [2304, 9999]
    assert len(set(res.columns["lookups"]["rid_hash"])) == 2


@pytest.mark.parametrize("digits", [b"1" * 18, b"1" * 19, b"0" * 19, b"9" * 5000, b"007"])
def test_a_number_of_another_length_is_another_key(digits: bytes) -> None:
    _same(STORE, STORE.replace(b"Stored 2304", b"Stored " + digits), LOOKUP,
          LOOKUP.replace(b"need to load: 768", b"need to load: -" + digits))


@pytest.mark.parametrize("status", [b"099", b"100", b"404", b"499", b"500", b"503", b"599", b"600", b"999"])
def test_the_status_first_digit_is_checked_per_line_though_the_key_hides_it(status: bytes) -> None:
    res = _same(ACCESS, ACCESS.replace(b" 200 ", b" " + status + b" "), ACCESS)
    assert len(res.rare["line"]) == (0 if b"1" <= status[:1] <= b"5" else 1)


@pytest.mark.parametrize("tag", [
    b"[req_id=a b]", b'[req_id=a"b]', b"[req_id=a (x.py:1:y]", b"[req_id=a:b]", b"[req_id=\x1b[0m]", b"[req_id=a\rb]",
    b"[req_id=\xc3\xa9]", b"[req_id=]", b"[req_id=[5m]", b"[req_id=" + b"x" * 17000 + b"]", b"[req_id=" + b"1" * 40 + b"]",
])
def test_an_id_that_hides_something_the_reference_reads_is_not_emptied(tag: bytes) -> None:
    """Spaces, quotes, parentheses, colons, colour, CR and non-ASCII stay in the key; a long id still
    makes the raw line too long for the hot path even though the key is short."""
    _same(STORE, STORE.replace(b"[req_id=chatcmpl-9a7a6604-b006c593]", tag), RETRIEVE)


def test_a_quoted_suffix_in_the_tail_is_read_where_the_reference_reads_it() -> None:
    """An emptied tail tag must not hide a `` (`` that the suffix search would land on."""
    base = ENV + b"Stored 5 out of total 5 tokens [req_id=q] x)"
    _same(base, base.replace(b"[req_id=q]", b"[req_id= (a.py:1:b]"), base.replace(b"[req_id=q]", b"[req_id=(a.py:1:b]"))


def test_a_tag_in_the_tail_sends_its_key_to_the_reference_per_line() -> None:
    line = ENV + b"[req_id=a] Stored 5 out of total 7 tokens [req_id=b] tail" + SUFFIX["store"]
    assert key_decision(line_keys(line + b"\n", 1)[0]) == scan_fast._SLOW_INFO
    res = _same(line, line.replace(b"[req_id=b]", b"[req_id=bbbbbbbb]").replace(b"[req_id=a]", b"[req_id=aaaa]"), STORE)
    assert list(res.columns["stores"]["stored"]) == [5, 5, 2304]


def test_an_id_emptied_inside_a_kept_tag_moves_the_numbers_after_it() -> None:
    """A tag with a space keeps its content, but a ``Reqid: …`` inside it is emptied: the numbers after
    it are read from the line's end."""
    line = ENV + b"[req_id=Reqid: abc, x] Stored 5 out of total 7 tokens" + SUFFIX["store"]
    res = _same(line, line.replace(b"abc", b"abcdefgh"), line.replace(b"abc", b"a"))
    assert list(res.columns["stores"]["total"]) == [7, 7, 7]


@pytest.mark.parametrize("rid", [b"a,b,", b"~", b"x[0m", b"a]b", b"", b"q" * 300, b"1,2"])
def test_lookup_ids_that_the_key_empties_or_keeps_hash_like_the_reference(rid: bytes) -> None:
    _same(LOOKUP, LOOKUP.replace(b"chatcmpl-3e98-c7e0", rid), LOOKUP.replace(b"3e98", b"3e9"))


def test_lookups_of_different_optional_fields_in_one_block_keep_line_order() -> None:
    none = ENV + b"Reqid: r1, Total tokens 100, LMCache hit tokens: None" + SUFFIX["lookup"]
    bare = ENV + b"Reqid: r2, Total tokens 9, LMCache hit tokens: 5, but need to load: -3" + SUFFIX["lookup"]
    res = _same(LOOKUP, none, bare, LOOKUP, none)
    cols = res.columns["lookups"]
    assert list(cols["hit"]) == [768, scan.NA, 5, 768, scan.NA] and list(cols["below_min"]) == [0, 0, 1, 0, 0]


def test_residue_mode_lines_beside_coloured_ones_are_cleaned_per_line() -> None:
    residue = b"[1;36m(Worker_TP0 pid=765)[0;0m [32;20m" + ENV[:-1] + b"[0m Stored 5 out of total 5 tokens" + SUFFIX["store"]
    _same(STORE, residue, residue.replace(b"[0;0m", b"[0;0000m"), STORE.replace(b"\x1b[0;0m", b"[0;0m"))


def test_more_than_256_prefixes_in_one_block_are_left_to_the_reference() -> None:
    lines = [ACCESS.replace(b"pid=1", b"pid=%d" % (1000 + i)) for i in range(300)]
    res = _same(*lines)
    assert len(res.prefixes) == scan.MAX_PREFIXES and len(res.rare["line"]) == 300 - scan.MAX_PREFIXES


def test_a_full_cache_is_emptied_and_refilled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_fast, "_CACHE_MAX", 3)
    _same(STORE, RETRIEVE, LOOKUP, ACCESS, STORE.replace(b"2304", b"12"), LOOKUP.replace(b"768", b"1"))
    assert len(scan_fast._CACHE) <= 3


def test_blocks_without_a_final_newline_and_empty_lines_count_like_the_reference() -> None:
    for block in (b"", b"\n", b"\n\n", STORE, STORE + b"\n\n" + ACCESS, b"\r\n" + ACCESS + b"\r"):
        scan_fast._CACHE.clear()
        assert scan_block_fast(block, 3) == scan_block_py(block, 3)


def test_long_keys_are_decided_but_not_kept() -> None:
    long_store = STORE.replace(b"size: 0.0890 GB", b"size: " + b"x" * 2000)
    scan_fast._CACHE.clear()
    _same(long_store, long_store)
    assert all(len(k) <= scan_fast._CACHE_KEY_MAX for k in scan_fast._CACHE)


def test_a_block_whose_numbers_do_not_split_as_promised_is_left_to_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The region shortcut checks its own premise; should it ever fail, the block is the reference's."""
    monkeypatch.setattr(scan_fast, "_NOT_NUMBER", scan_fast._NOT_NUMBER + b" ")  # numbers run together
    block = b"\n".join((STORE, RETRIEVE, LOOKUP, STORE)) + b"\n"
    assert scan_block_fast(block, 0) == scan_block_py(block, 0)


def test_seeded_mutations_of_hot_lines_find_no_difference_with_a_warm_cache() -> None:
    """The fuzz target's property for the fallback alone (no extension needed): the cache carries over
    from input to input, as it does from block to block."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("fuzz_scan", Path(__file__).parent / "fuzz" / "fuzz_scan.py")
    fuzz_scan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz_scan)
    fuzz_scan.smoke(600, seed=11)
