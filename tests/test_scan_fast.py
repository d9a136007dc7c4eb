"""The pure-Python fallback's shortcuts, each attacked where it could go wrong.

``scan_fast`` decides once per line *key* (digits → ``1``, request-id contents emptied) and reads the
numbers from slices; these blocks put lines that share a key with a canonical hot line — or almost do —
beside it, so a shortcut that trusted the key too far gives a different result from the reference.
Every block is scanned with a cold cache and again with the cache warmed by the block itself.
"""

from __future__ import annotations

import pytest
from scan_cases import ENV, SUFFIX, VLLM_HEAD

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
    for values in scan_fast._VALUES:
        values.clear()
    assert scan_block_fast(block, base) == ref
    fast = scan_block_fast(block, base)
    assert fast == ref
    lk = ref.columns["lookups"]  # the lookup lines the fallback joined are those the block holds at the rows' offsets
    if fast.lookup_text is not None:  # None where the fallback handed the block to the reference
        assert fast.lookup_text == scan.pack_rows_py(block, 0, lk["start"], lk["end"], 0, len(lk["start"]))
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



# --- stats and SpecDecoding lines: one decision per key, the fields sliced per line ------------------------

STATS = (b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m " + VLLM_HEAD["stats"] + b"Engine 000: Avg prompt throughput: 2095.4 "
         b"tokens/s, Avg generation throughput: 444.4 tokens/s, Running: 25 reqs, Waiting: 5 reqs, Preemptions: 2, "
         b"GPU KV cache usage: 49.1%, Prefix cache hit rate: 12.2%, External prefix cache hit rate: 55.4%")
SPEC = (b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m " + VLLM_HEAD["spec"] + b"SpecDecoding metrics: Mean acceptance length: "
        b"2.71, Accepted throughput: 105.30 tokens/s, Drafted throughput: 184.50 tokens/s, Accepted: 1053 tokens, "
        b"Drafted: 1845 tokens, Per-position acceptance rate: 0.750, 0.567, 0.395, Avg Draft acceptance rate: 57.1%")
SPEC_OLD = (VLLM_HEAD["spec"] + b"SpecDecoding metrics: Draft acceptance rate: 48.1%, Mean acceptance length: 2.41, "
            b"Accepted: 582 tokens, Drafted: 1211 tokens, Per-position acceptance rate: 0.702, 0.455")


def _decision(line: bytes) -> tuple:
    return key_decision(line_keys(line + b"\n", 1)[0])


def _digits(line: bytes, seed: int) -> bytes:
    """The same line with other digit values (the same key): what the fields must be read from per line."""
    import random

    rng = random.Random(seed)
    return bytes(rng.choice(b"0123456789") if 0x30 <= c <= 0x39 else c for c in line)


def test_canonical_metric_lines_are_decided_by_their_key_and_read_per_line() -> None:
    for line, tid in ((STATS, scan.STATS), (SPEC, scan.SPEC), (SPEC_OLD, scan.SPEC)):
        assert _decision(line)[0] == tid
    lines = [_digits(line, i) for i in range(30) for line in (STATS, SPEC, SPEC_OLD)]
    res = _same(*lines)
    tally = {t: sum(n for (_p, tt), n in res.counts.items() if tt == t) for t in ("V_STATS", "V_SPEC")}
    assert tally == {"V_STATS": 30, "V_SPEC": 60} and not res.rare["line"] and len(res.prefixes) > 5  # pids vary
    assert len(set(res.columns["stats"]["prompt_tps"])) > 20 and len(res.columns["positions"]["rate"]) == 150


def test_engine_index_and_aggregated_engine_count_are_their_own_fields() -> None:
    aggregated = STATS.replace(b"Engine 000", b"2 Engines Aggregated")
    res = _same(STATS, aggregated, STATS.replace(b"Engine 000", b"Engine 007"), aggregated.replace(b"2 E", b"12 E"))
    cols = res.columns["stats"]
    assert list(cols["engine"]) == [0, scan.NA, 7, scan.NA] and list(cols["n_engines"]) == [scan.NA, 2, scan.NA, 12]


def test_optional_stats_fields_missing_are_missing_values_line_by_line() -> None:
    no_preempt = STATS.replace(b"Preemptions: 2, ", b"")
    no_prefix = STATS.replace(b", Prefix cache hit rate: 12.2%", b"")
    bare = no_preempt.replace(b", Prefix cache hit rate: 12.2%", b"").replace(b", External prefix cache hit rate: 55.4%", b"")
    cpu = bare.replace(b"GPU KV", b"CPU KV")
    res = _same(STATS, no_preempt, no_prefix, bare, cpu, STATS)
    cols = res.columns["stats"]
    assert list(cols["preempt"]) == [2, scan.NA, 2, scan.NA, scan.NA, 2] and list(cols["kv_dev"]) == [0, 0, 0, 0, 1, 0]
    assert [v == v for v in cols["prefix"]] == [True, True, False, False, False, True]
    assert [v == v for v in cols["ext"]] == [True, True, True, False, False, True]


def test_nan_fields_are_nan_and_a_nan_spec_rate_is_derived_per_line_by_the_reference() -> None:
    """``nan%`` as the SpecDecoding rate means accepted / drafted (when drafted > 0): the key cannot
    know the counts, so its lines take the reference's per-line code, between fast rows."""
    nan_stats = STATS.replace(b"2095.4", b"nan").replace(b"49.1%", b"nan%").replace(b"12.2%", b"nan%")
    nan_rate = SPEC.replace(b"57.1%", b"nan%")
    assert _decision(nan_stats)[0] == scan.STATS and _decision(nan_rate) == scan_fast._SLOW_INFO
    res = _same(SPEC, nan_rate, nan_rate.replace(b"Drafted: 1845", b"Drafted: 0000"), SPEC.replace(b"2.71", b"nan"),
                nan_stats, SPEC_OLD.replace(b"48.1%", b"nan%"), SPEC)
    assert list(res.columns["spec"]["pos_off"]) == [0, 3, 6, 9, 12, 14]


def test_spec_rows_of_both_paths_keep_their_rates_in_line_order() -> None:
    """A row read by the reference per line (here: a colour code inside a rate) between fast rows: the
    flat rates table must stay in row order, each row's ``pos_off`` pointing at its own rates."""
    odd = SPEC.replace(b"0.567", b"0.5\x1b[0m67")
    assert _decision(odd) == scan_fast._SLOW_INFO
    five = SPEC.replace(b"0.750, 0.567, 0.395", b"0.1, 0.2, 0.3, 0.4, 0.5")
    res = _same(SPEC, odd, five, odd.replace(b"0.750", b"0.999"), SPEC_OLD)
    assert list(res.columns["spec"]["pos_n"]) == [3, 3, 5, 3, 2]
    assert list(res.columns["positions"]["rate"])[3:6] == [0.75, 0.567, 0.395]


def test_lines_of_one_key_always_have_the_same_rate_count() -> None:
    """Why a decision may carry ``pos_n``: a rate count is the number of ``, `` separators, which digits do
    not change; lines with another count (or ``nan`` for a number) have another key."""
    import random

    rng = random.Random(5)
    lines = []
    for _ in range(300):
        k = rng.randint(1, 6)
        rates = b", ".join(rng.choice([b"0.%d" % rng.randrange(1000), b"1.0", b"nan"]) for _ in range(k))
        lines.append(SPEC.replace(b"0.750, 0.567, 0.395", rates))
    res = _same(*lines)
    keys = line_keys(b"\n".join(lines) + b"\n", len(lines))
    count_of: dict[bytes, set[int]] = {}
    for key, n in zip(keys, res.columns["spec"]["pos_n"], strict=True):
        count_of.setdefault(key, set()).add(n)
    assert len(count_of) > 6 and all(len(n) == 1 for n in count_of.values())


def test_a_text_the_reader_rejects_on_one_line_only_sends_that_line_to_the_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcut must not guess: if a field reader refused a text (it cannot for a verified key), that
    row leaves the fast table for the per-line code, and the other rows of the key stay fast."""
    number, decimal, count, percent = scan_fast._CONVERTERS
    refused = {b"26", b"0.568", b"1054"}

    def picky(fn):
        def read(s: bytes, pos: int, end: int):
            if s in refused:
                raise scan._Reject
            return fn(s, pos, end)
        return read

    class PickyFloat(float):
        def __new__(cls, text: bytes) -> float:
            if text in refused:
                raise ValueError(text)
            return float(text)

    monkeypatch.setattr(scan_fast, "_CONVERTERS", (number, (picky(decimal[0]), decimal[1]), (picky(count[0]), count[1]),
                                                   percent))
    monkeypatch.setattr(scan_fast, "float", PickyFloat, raising=False)
    lines = [STATS, STATS.replace(b"Running: 25", b"Running: 26"), SPEC, SPEC.replace(b"0.567", b"0.568"),
             SPEC.replace(b"Accepted: 1053", b"Accepted: 1054"), STATS, SPEC]
    res = _same(*lines)
    assert list(res.columns["stats"]["running"]) == [25, 26, 25]
    assert list(res.columns["spec"]["accepted"]) == [1053, 1053, 1054, 1053]
    assert list(res.columns["positions"]["rate"])[3:6] == [0.75, 0.568, 0.395]


def test_a_locator_that_misplaces_a_field_is_caught_by_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decision is checked on a line of the key with varied digits against the reference's own row:
    a locator that took the prompt throughput for the generation throughput must not be trusted."""
    import re

    prompt, gen = re.escape(scan.S_PROMPT), re.escape(scan.S_GEN)  # the pattern holds the wording escaped
    swapped = scan_fast._STATS_MSG.pattern.replace(prompt + rb"(", prompt + rb"(?P<a>")
    swapped = re.compile(swapped.replace(gen + rb"(", gen + rb"(?P<b>"))
    assert _decision(STATS)[0] == scan.STATS
    groups = swapped.groupindex
    monkeypatch.setattr(scan_fast, "_STATS_MSG", _Swap(swapped, groups["a"], groups["b"]))
    assert _decision(STATS) == scan_fast._SLOW_INFO
    _same(STATS, _digits(STATS, 1))


class _Swap:
    """A regex whose match reports two groups' spans the wrong way round."""

    def __init__(self, pattern, a: int, b: int) -> None:
        self.pattern, self.a, self.b = pattern, a, b

    def fullmatch(self, s: bytes, pos: int):
        m = self.pattern.fullmatch(s, pos)
        return None if m is None else _SwappedMatch(m, self.a, self.b)


class _SwappedMatch:
    def __init__(self, m, a: int, b: int) -> None:
        self.m, self.swap = m, {a: b, b: a}

    def span(self, g: int):
        return self.m.span(self.swap.get(g, g))

    def group(self, g: int):
        return self.m.group(self.swap.get(g, g))


def _spec_of_width(width: int) -> bytes:
    """A hot-shaped 0.8.5 SpecDecoding line exactly ``width`` bytes long (rates and digits padded)."""
    for rates in range(1, 40):
        for digits in range(1, 12):
            line = SPEC_OLD.replace(b"0.702, 0.455", b", ".join([b"0.7"] * rates)).replace(b"2.41", b"2." + b"4" * digits)
            if len(line) == width:
                return line
    raise AssertionError(width)


@pytest.mark.parametrize("width", [w for w in sorted(scan.TERMINAL_WIDTHS) if w >= 200])  # metric lines are longer
def test_a_metric_line_at_a_terminal_width_raw_or_cleaned_is_rare(width: int) -> None:
    """Raw and cleaned widths are both properties of the key: a line that is a terminal's width raw, or
    once its colour is gone, is rare; one byte longer it is hot."""
    plain, shorter, longer = (_spec_of_width(w) for w in (width, width - 4, width + 1))
    res = _same(plain, b"\x1b[1m" + plain, b"\x1b[1m" + shorter, longer, b"\x1b[1m" + longer, _digits(plain, 1))
    assert list(res.rare["line"]) == [8, 9, 10, 13] and list(res.columns["spec"]["line"]) == [11, 12]


def test_an_emptied_id_in_a_metric_line_keeps_its_length_check_and_its_per_line_read() -> None:
    """A metric line holds no request id, but a prefix's ``ip=`` may hold a tag, which the key empties:
    lines of that key differ in length (so no slice holds), and a long one is over MAX_HOT_LINE."""
    tagged = STATS.replace(b"(APIServer pid=1)", b"(APIServer pid=1, ip=[req_id=abc])")
    long_tag = tagged.replace(b"abc", b"a" * (scan.MAX_HOT_LINE + 10))
    assert _decision(tagged) == scan_fast._SLOW_INFO and len(line_keys(long_tag + b"\n", 1)[0]) < 400
    res = _same(STATS, tagged, long_tag, tagged.replace(b"abc", b"abcdef"))
    assert list(res.rare["line"]) == [10] and len(res.prefixes) == 3


def test_a_crlf_cr_and_colour_beside_the_fields_are_cleaned_per_line_and_an_inner_cr_is_rare() -> None:
    """A CR before a line's last byte may end a record inside it (the records path splits there): rare."""
    cr_end, cr_mid = STATS + b"\r", STATS.replace(b"Running:", b"Run\rning:")
    cr_in_number = STATS.replace(b"2095.4", b"20\r95.4")
    residue = STATS.replace(b"\x1b[1;36m", b"[1;36m").replace(b"\x1b[0;0m", b"[0;0m")
    residue_in_text = residue.replace(b"Running:", b"Run[1mning:")
    residue_beside_esc = STATS.replace(b"Running:", b"Run[1mning:")  # an ESC line keeps the residue: not hot
    assert _decision(cr_end)[0] == _decision(residue_in_text)[0] == scan.STATS
    assert _decision(cr_mid) == _decision(cr_in_number) == _decision(residue_beside_esc) == scan_fast._REJECT_INFO
    res = _same(STATS, cr_end, cr_mid, cr_in_number, residue, residue_in_text, residue_beside_esc,
                *(_digits(x, 3) for x in (cr_end, cr_mid, cr_in_number, residue_in_text)))
    assert list(res.rare["line"]) == [10, 11, 14, 16, 17] and len(res.columns["stats"]["line"]) == 6


def test_a_prefix_that_cleans_otherwise_on_its_own_is_read_per_line() -> None:
    """The prefix is cleaned apart from its line (cached per raw prefix): ``[1m`` inside an ``ip=`` is
    residue on its own but kept in a line with ESC elsewhere."""
    head = VLLM_HEAD["stats"].replace(b"[loggers.py:335]", b"\x1b[2m[loggers.py:335]\x1b[0m")  # ColoredFormatter
    line = b"(APIServer pid=1, ip=[1m) " + head + STATS.split(b"] ")[1]
    assert _decision(line) == scan_fast._SLOW_INFO
    res = _same(line, _digits(line, 2))
    assert res.prefixes[0] == b"(APIServer pid=1, ip=[1m) " and len(res.columns["stats"]["line"]) == 2


@pytest.mark.parametrize("digits", [b"9" * 18, b"1" + b"0" * 17, b"9" * 19, b"0" * 19, b"7" * 5000])
def test_long_numbers_in_metric_fields_are_read_or_rejected_like_the_reference(digits: bytes) -> None:
    """18 digits are hot (a count of 10^18 after the float is NA); 19 make the line rare."""
    res = _same(STATS, STATS.replace(b"Waiting: 5", b"Waiting: " + digits), STATS.replace(b"444.4", digits + b"." + digits),
                SPEC.replace(b"Drafted: 1845", b"Drafted: " + digits), STATS.replace(b"Engine 000", b"Engine " + digits),
                SPEC.replace(b"0.395", digits))
    assert len(res.rare["line"]) == (5 if len(digits) > 18 else 0)


def test_metric_keys_carry_over_from_block_to_block() -> None:
    """A key decided in one block reads the next block's lines at their own offsets and line numbers;
    a block's rates table starts at 0; a last line without a newline is read too."""
    first = b"\n".join((STATS, SPEC, ACCESS)) + b"\n"
    second = b"\n".join((SPEC.replace(b"0.750", b"0.111"), _digits(STATS, 4), _digits(SPEC, 5)))
    scan_fast._CACHE.clear()
    for block, base in ((first, 0), (second, 3), (second + b"\n", 3), (first + second, 0)):
        ref = scan_block_py(block, base)
        assert scan_block_fast(block, base) == ref
    assert list(scan_block_fast(second, 3).columns["spec"]["pos_off"]) == [0, 3]


def test_the_value_caches_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_fast, "_VALUES_MAX", 3)
    _same(*(_digits(line, i) for i in range(20) for line in (STATS, SPEC)))
    assert all(len(values) <= 3 for values in scan_fast._VALUES)


def test_float_reads_a_decimal_field_bit_for_bit_as_the_reference_reader() -> None:
    """The decimal columns use ``float(text)`` on the texts a verified key lets through: ``nan`` and
    ``D[.D]`` with 1-18 digits each side (long runs, exact binary ties, leading zeros)."""
    import random
    import struct

    rng = random.Random(9)
    texts = [b"nan", b"0", b"0.0", b"007.50", b"9" * 18 + b"." + b"9" * 18, b"0.5", b"2.675", b"1" * 17 + b".5"]
    for _ in range(3000):
        whole = bytes(rng.choice(b"0123456789") for _ in range(rng.randint(1, 18)))
        frac = bytes(rng.choice(b"0123456789") for _ in range(rng.randint(0, 18)))
        texts.append(whole + (b"." + frac if frac else b""))
    for text in texts:
        assert struct.pack("d", float(text)) == struct.pack("d", scan._decimal(text, 0, len(text))[0]), text


def test_a_metric_key_too_long_to_cache_is_read_per_line_not_decided_per_line() -> None:
    many = SPEC.replace(b"0.750, 0.567, 0.395", b", ".join([b"0.5"] * 200))
    assert len(line_keys(many + b"\n", 1)[0]) > scan_fast._CACHE_KEY_MAX and _decision(many) == scan_fast._SLOW_INFO
    assert _decision(SPEC)[0] == scan.SPEC
    res = _same(many, SPEC, _digits(many, 1))
    assert list(res.columns["spec"]["pos_n"]) == [200, 3, 200]
