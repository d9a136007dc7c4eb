"""Causes on pasted fragments: preconditions, inferred deaths, P2P zero retrieves, MP store and NIXL lines."""

from __future__ import annotations

from pathlib import Path

from specdiag.engine import analyze
from specdiag.findings import CauseBoard

HERE = Path(__file__).resolve().parent / "fragments_causes"


def findings(name: str, rule: str) -> list:
    return [f for f in analyze([str(HERE / name)]).findings if f.rule == rule]


def by_id(f) -> dict:
    return {c.id: c for c in f.causes}


# ---- 1. a precondition the input disproves or cannot show ---------------------------------------------------
def test_board_rules_out_a_cause_whose_precondition_is_disproved() -> None:
    b = CauseBoard()
    b.add("needs-connector", 0.9)
    b.add("free", 0.1)
    b.require("needs-connector", "KV connector", False, "the args line")
    top = b.ranked()[0]
    assert top.id == "free"
    assert any("precondition not met" in a for a in by_id_list(b.ranked())["needs-connector"].against)


def by_id_list(causes: list) -> dict:
    return {c.id: c for c in causes}


def test_board_keeps_an_unshown_precondition_below_unconditional_causes() -> None:
    b = CauseBoard()
    b.add("needs-connector", 0.9)
    b.add("free", 0.1)
    b.require("needs-connector", "KV connector", None, "the args line")
    causes = b.ranked()
    assert [c.id for c in causes] == ["free", "needs-connector"]
    assert "collect the args line" in causes[1].against[0]
    assert ("needs-connector", "the args line") in b.unobserved


def test_mtp_drop_without_connector_rejects_the_restore_cause() -> None:
    (f,) = findings("mtp-drop-no-connector.log", "SD001")
    causes = by_id(f)
    assert f.causes[0].id == "workload-shift"
    restore = causes["draft-state-not-restored"]
    assert restore.confidence <= 0.01
    assert any("precondition not met" in a for a in restore.against)


def test_mtp_drop_fragment_without_args_caps_the_restore_cause_and_says_what_to_collect() -> None:
    (f,) = findings("mtp-drop-unknown-connector.log", "SD001")
    restore = by_id(f)["draft-state-not-restored"]
    assert f.causes[0].id == "workload-shift"
    assert restore.confidence < f.causes[0].confidence
    assert any("non-default args" in a for a in restore.against)


# ---- 2. an engine death whose header was cut ----------------------------------------------------------------
def test_cut_header_death_is_inferred_from_dump_and_traceback_body() -> None:
    (f,) = findings("engine-death-header-cut.log", "SRV001")
    assert f.severity == "error"
    m = f.measurements
    assert m["crashed"] is True and m["death_inferred"] is True
    assert "fatal error" in m["missing"]
    assert "Dumping input data" in f.evidence[0].text
    assert "Inferred, not read" in f.summary and "confidence high" in f.summary
    assert any("inferred" in a for a in f.causes[0].against)


def test_invalidated_object_before_an_inferred_death_counts_as_a_crash() -> None:
    (f,) = findings("engine-death-header-cut.log", "KV005")
    assert f.severity == "error" and f.measurements["crashed"] is True


# ---- 3. a P2P retrieve of 0 tokens --------------------------------------------------------------------------
def test_zero_p2p_retrieve_ranks_the_p2p_bug_over_the_unfull_chunk() -> None:
    (f,) = findings("p2p-retrieve-zero.log", "KV001")
    causes = by_id(f)
    assert f.causes[0].id == "p2p-retrieve-bug"
    unfull = causes["unfull-chunk-mismatch"]
    assert unfull.confidence < causes["p2p-retrieve-bug"].confidence
    assert any("chunk" in a for a in unfull.against)


def test_zero_retrieve_without_p2p_evidence_leaves_the_p2p_bug_unconfirmed(tmp_path: Path) -> None:
    lines = (HERE / "p2p-retrieve-zero.log").read_text().splitlines()[1:]
    p = tmp_path / "paste.log"
    p.write_text("\n".join(lines) + "\n")
    (f,) = [x for x in analyze([str(p)]).findings if x.rule == "KV001"]
    p2p = by_id(f)["p2p-retrieve-bug"]
    assert f.causes[0].id != "p2p-retrieve-bug"
    assert any("precondition not shown" in a for a in p2p.against)


# ---- 4. multi-process store task failures --------------------------------------------------------------------
def test_mp_store_task_failure_is_an_l2_adapter_store_not_a_failed_retrieve() -> None:
    """LMCache #5123: 'Store task 1 to adapter 0 failed for keys' led with mp-retrieve-failure beside '0 failed
    retrieve(s)': it is the server's L2 adapter failing a store; no request failed."""
    (f,) = findings("mp-store-task-failed.log", "KV009")
    assert f.measurements["adapter"] == 2 and f.measurements["retrieve"] == 0 and f.measurements["store"] == 0
    assert f.causes[0].id == "mp-l2-store-failure" and "0 failed retrieve" not in f.summary
    assert "store_controller.py" in f.evidence[0].text


# ---- 5. NIXL/PD allocation retries --------------------------------------------------------------------------
def test_nixl_allocation_retry_loop_is_the_transfer_buffer_with_a_count() -> None:
    """The receiver's P/D buffer, not the CPU tier (KV019; this test asserted KV007 before)."""
    assert not findings("nixl-alloc-retry.log", "KV007")
    (f,) = findings("nixl-alloc-retry.log", "KV019")
    assert f.measurements["retries"] == 4 and f.count == 4
    assert any("pd_buffer_size" in s for s in f.next_steps)


def test_a_start_up_traceback_cut_above_its_header_is_a_death_inferred_from_where_it_was_printed() -> None:
    """Frames under the header of the place where vLLM 0.34 prints 'EngineCore failed to start.' (core.py:1757)
    are that call's traceback: the engine failed, though neither the header nor the exception is in the paste.
    The traceback's other lines are the death's, not errors left unexplained (LOG001)."""
    report = analyze([str(HERE / "engine-start-traceback-cut.log")])
    (f,) = [x for x in report.findings if x.rule == "SRV001"]
    m = f.measurements
    assert m["death_inferred"] is True and m["root_error"] == "not in the excerpt"
    assert "core.py:1757, where vLLM prints 'EngineCore failed to start.'" in f.summary
    assert f.causes[0].id == "cause-not-in-excerpt"
    assert not [x for x in report.findings if x.rule == "LOG001"]


def test_frames_where_releases_print_different_errors_name_no_message_there(tmp_path) -> None:
    """At core.py:1584 vLLM 0.33 prints 'EngineCore failed to start.' and 0.27 'Invocation of %s method
    failed': without the version, the place names no message. The frames still show the engine core's
    construction (``_initialize_kv_caches``, run only while it starts) failing at ERROR: that is the death."""
    src = (HERE / "engine-start-traceback-cut.log").read_text().replace("[core.py:1757]", "[core.py:1584]")
    (tmp_path / "x.log").write_text(src)
    [death] = [x for x in analyze([str(tmp_path / "x.log")]).findings if x.rule == "SRV001"]
    assert death.measurements["fatal_frame"] == "_initialize_kv_caches"
    assert death.measurements["failed_at_start"] is True
    assert "where vLLM prints" not in death.summary
