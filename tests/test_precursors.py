"""A paste that holds only a precursor of a short load (KV007 in a paste, KV011–KV013): a warning naming the cause.

Each line is built from LMCache's own message template (the shared reference's ``log-formats.md`` §6 and
§8, ``log-catalog-by-version.tsv``), pasted as users paste it: with and without the vLLM process prefix,
indented, after ``grep -n``. Beside a complete retrieve history the same lines claim no loss; beside a short
load KV001 reports it and weighs them.
"""

from __future__ import annotations

import pytest
from logbuilder import ACCESS_LINE, config_dump, lmc, lookup, retrieve, shortfall_pair, vllm, write

from specdiag.engine import analyze

PROC = "Worker_TP2 pid=767"

# (template id, message, level, upstream file:line) — LMCache 0.5.6 locations
PIN_TIMEOUT = ("Pin timeout detected for MemoryObj 0x7f3a2c00. Pin count: 1, Elapsed time: 312.48s. Forcing unpin to 0.",
               "WARNING", "pin_monitor.py:179", "lmcache.v1.pin_monitor")
FORCE_UNPIN = ("Force unpinned 6 timeout objects in 31 pinned_objects within 300 seconds", "WARNING", "pin_monitor.py:151",
               "lmcache.v1.pin_monitor")
ALLOC_FAIL = ("Failed to allocate memory block of size 4194304 because no memory is available", "WARNING",
              "memory_management.py:1452", "lmcache.v1.memory_management")
PARTIAL_STORE = ("Local cpu memory under pressure so choosing to store only  3 total chunks of KV cache.", "WARNING",
                 "cache_engine.py:519", "lmcache.v1.cache_engine")
NO_CANDIDATES = ("No eviction candidates found in local cpu backend. Local cpu memory is under pressure. Waiting for "
                 "0.1 seconds before retrying.", "WARNING", "local_cpu_backend.py:724",
                 "lmcache.v1.storage_backend.local_cpu_backend")
#: LMCache 0.3.1-0.3.3's store dropped under pressure: two lines, the location suffix on the second
OLD_DROP = ("Failed to allocate memory for the KV cache.\nThe KV cache will not be stored.", "WARNING", "cache_engine.py:221",
            "lmcache.v1.cache_engine")
REDIS_EVICTED = ("Key exists but KV cache does not exist.Might happen when the cache is evicted by redis.", "WARNING",
                 "redis_connector.py:308", "lmcache.v1.storage_backend.connector.redis_connector")
GET_TIMEOUT = ("get blocking timeout, trigger cancel the future task", "WARNING", "remote_backend.py:370",
               "lmcache.v1.storage_backend.remote_backend")
MOONCAKE_GET = ("batch_get_into failed for key CacheEngineKey(model_name='m', chunk_hash=77), error code: -600", "ERROR",
                "mooncakestore_connector.py:402", "lmcache.v1.storage_backend.connector.mooncakestore_connector")
DISK_READ = ("Failed to load chunk from disk for key k9: [Errno 5] Input/output error", "ERROR", "local_disk_backend.py:590",
             "lmcache.v1.storage_backend.local_disk_backend")
PIN_NEG = ("Pin count of MemoryObj 19885326336is negative: -1.Double unpin occurred somewhere.Setting pin count back to 0 "
           "as a hack but please find the bug.", "WARNING", "memory_management.py:1010", "lmcache.v1.memory_management")

# (case id, lines, the rule, its top cause)
CASES = [
    ("pin-timeout", [PIN_TIMEOUT], "KV012", "pin-timeout"),
    ("pin-timeouts-and-summary", [PIN_TIMEOUT, PIN_TIMEOUT, FORCE_UNPIN], "KV012", "pin-timeout"),
    ("force-unpin", [FORCE_UNPIN], "KV012", "pin-timeout"),
    ("alloc-fail", [ALLOC_FAIL], "KV007", "cache-too-small"),
    ("partial-stores", [PARTIAL_STORE, PARTIAL_STORE], "KV007", "cache-too-small"),
    ("no-eviction-candidates", [NO_CANDIDATES], "KV007", "pinned-chunks-block-eviction"),
    ("old-store-dropped", [OLD_DROP], "KV007", "cache-too-small"),
    ("redis-evicted", [REDIS_EVICTED], "KV013", "remote-backend-loss"),
    ("remote-get-timeout", [GET_TIMEOUT, GET_TIMEOUT], "KV013", "backend-read-failure"),
    ("mooncake-get", [MOONCAKE_GET], "KV013", "backend-read-failure"),
    ("disk-read", [DISK_READ], "KV013", "backend-read-failure"),
    ("negative-pin", [PIN_NEG], "KV011", "pin-accounting-bug"),
]
FORMS = ["prefix", "bare", "indented", "grep-n"]


def pasted(msgs: list[tuple], form: str, first_line: int = 812) -> list[str]:
    """The lines as a user pastes them into an issue (no colour codes)."""
    out = []
    for i, (msg, level, loc, logger) in enumerate(msgs):
        ln = lmc(msg, level=level, loc=loc, logger=logger, proc=None if form == "bare" else PROC, color=False,
                 ts=f"2026-05-06 15:56:{3 + i:02d},745")
        out.append({"indented": "    " + ln, "grep-n": f"{first_line + i}:{ln}"}.get(form, ln))
    return out


def found(tmp_path, lines: list[str], name: str = "paste.log") -> dict[str, dict]:
    rep = analyze([write(tmp_path / name, lines)]).to_dict()
    return {f["rule"]: f for f in rep["findings"]}


def healthy_history() -> list[str]:
    """Two requests looked up and loaded in full on the same rank."""
    return [lookup("cmpl-a1", 2100, 2048), retrieve("cmpl-a1", 2048, 2048, 2048, proc=PROC),
            lookup("cmpl-b2", 900, 768, 512), retrieve("cmpl-b2", 256, 256, 768, proc=PROC)]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("case", "msgs", "rule", "cause"), CASES, ids=[c[0] for c in CASES])
def test_a_pasted_precursor_alone_is_a_warning_naming_its_cause(tmp_path, case, msgs, rule, cause, form) -> None:
    by_rule = found(tmp_path, pasted(msgs, form))
    assert set(by_rule) == {rule}, f"{case}/{form}: {sorted(by_rule)}"
    f = by_rule[rule]
    assert f["severity"] == "warning" and f["count"] == len(msgs)
    assert f["causes"][0]["id"] == cause and all(c["confidence"] <= 0.6 for c in f["causes"])
    assert len(f["evidence"]) == len(msgs) and f["measurements"]["input_coverage"] == "fragment"
    assert "No short load is in the input" in f["summary"]
    assert any("Retrieved X out of Y required tokens" in s for s in f["next_steps"])
    if form == "bare":
        assert "TP2" not in f["summary"] + " ".join(f["next_steps"])  # a rank the paste does not show is not invented
    else:
        assert f["measurements"]["by_rank"] == {"TP2": len(msgs)}


@pytest.mark.parametrize(("case", "msgs", "rule", "cause"), CASES, ids=[c[0] for c in CASES])
def test_the_same_lines_beside_complete_loads_claim_no_loss(tmp_path, case, msgs, rule, cause) -> None:
    hist = healthy_history()
    by_rule = found(tmp_path, hist[:2] + pasted(msgs, "prefix") + hist[2:])
    assert "KV001" not in by_rule and rule in by_rule
    f = by_rule[rule]
    assert f["severity"] == "warning" and "No short load" not in f["summary"]
    assert "2 retrieve(s) in the input loaded all they were asked for" in f["summary"]
    if rule != "KV007":  # the precursor rules lower their ceiling beside loads that completed
        assert all(c["confidence"] <= 0.4 for c in f["causes"])
        assert f["measurements"]["complete_retrieves"] == 2


@pytest.mark.parametrize(("case", "msgs", "rule", "cause"),
                         [c for c in CASES if c[2] != "KV007"], ids=[c[0] for c in CASES if c[2] != "KV007"])
def test_beside_a_short_load_kv001_reports_it_and_weighs_the_lines(tmp_path, case, msgs, rule, cause) -> None:
    lines = pasted(msgs, "prefix") + shortfall_pair("cmpl-9", 49664, 55808, proc=PROC, color=False,
                                                    ts="2026-05-06 15:56:09,100")
    by_rule = found(tmp_path, lines)
    assert rule not in by_rule and "KV001" in by_rule
    assert by_rule["KV001"]["causes"][0]["id"] == cause


def test_pressure_lines_beside_a_short_load_are_left_to_kv001(tmp_path) -> None:
    lines = pasted([ALLOC_FAIL, PARTIAL_STORE], "prefix") + shortfall_pair("cmpl-9", 49664, 55808, proc=PROC, color=False)
    by_rule = found(tmp_path, lines)
    assert "KV007" not in by_rule and by_rule["KV001"]["causes"][0]["id"] == "lookup-retrieve-eviction"


@pytest.mark.parametrize("msg", [REDIS_EVICTED, PIN_TIMEOUT, PIN_NEG], ids=["KV013", "KV012", "KV011"])
def test_lmcache_s_own_failed_read_line_is_kv001_s_and_the_precursor_rule_stands_down(tmp_path, msg) -> None:
    r7 = ("The cache block is in the storage, but it can't be retrieved", "WARNING", "cache_engine.py:1793",
          "lmcache.v1.cache_engine")
    by_rule = found(tmp_path, pasted([msg, r7], "prefix"))
    assert set(by_rule) == {"KV001"}


def test_backend_lines_of_the_store_path_are_no_read_failure(tmp_path) -> None:
    """'Key … not found in put tasks' (disk store bookkeeping) and a Mooncake put failure lose no read."""
    lines = [("Key k1 not found in put tasks.", "WARNING", "local_disk_backend.py:85", "lmcache.v1.storage_backend.x"),
             ("batch_put_from failed for key k2, error code: -600", "ERROR", "mooncakestore_connector.py:500",
              "lmcache.v1.storage_backend.connector.mooncakestore_connector")]
    assert "KV013" not in found(tmp_path, pasted(lines, "prefix"))


def test_a_pin_timeout_beside_pressure_on_the_same_rank_says_eviction_follows(tmp_path) -> None:
    by_rule = found(tmp_path, pasted([ALLOC_FAIL, PIN_TIMEOUT], "prefix"))
    assert {"KV007", "KV012"} <= set(by_rule)
    assert any("memory-pressure line" in w for w in by_rule["KV012"]["causes"][0]["for"])


def test_a_pressure_line_or_two_in_a_log_is_a_passing_moment(tmp_path) -> None:
    """In a log with its startup lines, or one longer than a paste, KV007 still wants ``min_events`` lines."""
    one = pasted([ALLOC_FAIL], "prefix")
    assert "KV007" not in found(tmp_path, [config_dump(PROC), *[ACCESS_LINE] * 60] + one, "startup.log")
    filler = [lmc(f"Reqid: cmpl-{i}, Total tokens 300, Inference Engine computed tokens: 0, LMCache hit tokens: 0, need to "
                  "load: 0", loc="vllm_v1_adapter.py:1476", proc="EngineCore_DP0 pid=203", color=False) for i in range(80)]
    # the pressure line sits near the top: only the input's own line count tells this log from a paste
    assert "KV007" not in found(tmp_path, one + filler, "long.log")
    assert "KV007" in found(tmp_path, one, "paste.log")



@pytest.mark.parametrize(("case", "msgs", "rule", "cause"),
                         [c for c in CASES if c[2] != "KV007"], ids=[c[0] for c in CASES if c[2] != "KV007"])
def test_beside_vllm_s_load_failure_outcome_alone_the_precursor_is_the_candidate(tmp_path, case, msgs, rule, cause) -> None:
    """vLLM's 'Recovered from KV load failure' (KV003) says a load failed, not why; KV001 needs LMCache's lines."""
    outcome = vllm("Recovered from KV load failure: 1 request(s) rescheduled (2048 tokens affected).", level="WARNING",
                   proc="EngineCore_DP0 pid=203")
    by_rule = found(tmp_path, pasted(msgs, "prefix") + [outcome])
    assert {rule, "KV003"} <= set(by_rule) and "KV001" not in by_rule
    f = by_rule[rule]
    assert f["causes"][0]["id"] == cause and f["causes"][0]["confidence"] <= 0.6
    assert "vLLM reported 1 KV load failure(s)" in f["summary"] and "No short load" not in f["summary"]


def test_a_pin_monitor_report_that_forced_nothing_is_no_precursor(tmp_path) -> None:
    quiet = ("Force unpinned 0 timeout objects in 12 pinned_objects within 300 seconds",) + FORCE_UNPIN[1:]
    assert "KV012" not in found(tmp_path, pasted([quiet], "prefix"))


def test_the_old_dropped_store_line_is_pressure_for_kv001_too(tmp_path) -> None:
    """Beside a short load, LMCache 0.3.1-0.3.3's 'will not be stored' line weighs as memory pressure."""
    lines = pasted([OLD_DROP], "prefix") + shortfall_pair(None, 3840, 4096, proc=PROC, r1=574, r2=575, color=False)
    f = found(tmp_path, lines)["KV001"]
    top = f["causes"][0]
    assert top["id"] == "lookup-retrieve-eviction" and any("memory-pressure line" in w for w in top["for"])


def test_a_negative_pin_count_after_the_forced_unpin_is_the_timeout_s_consequence(tmp_path) -> None:
    """The monitor sets the count to 0; the request's own unpin then goes negative: one finding, KV012's."""
    by_rule = found(tmp_path, pasted([PIN_TIMEOUT, PIN_NEG], "prefix"))
    assert set(by_rule) == {"KV012"}
    assert any("negative pin count(s) after the forced unpin" in w for w in by_rule["KV012"]["causes"][0]["for"])
    # before the forced unpin, or on another rank, the negative count is a double unpin of its own
    assert set(found(tmp_path, pasted([PIN_NEG, PIN_TIMEOUT], "prefix"), "b.log")) == {"KV011", "KV012"}
    other = pasted([PIN_TIMEOUT], "prefix") + [pasted([PIN_NEG], "prefix")[0].replace("Worker_TP2", "Worker_TP5")]
    assert set(found(tmp_path, other, "c.log")) == {"KV011", "KV012"}
