"""Preset conditions: a phase or cell whose condition did not happen is reported, not folded into the result."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

from specdiag.repro.server import redis_evicted_keys
from specdiag.repro.verdict import CellResult, build_verdict, max_in_flight

PLAN_DK = {"name": "dynamic-k", "toggles": {"dynamic_k": ["off", "on"]},
           "workload": {"kind": "alternating_batch", "params": {"max_tokens": 64}}}


def phases(drafted_k0: int, in_flight: int = 2) -> list[dict]:
    """Five phases 1,2,1,2,1 with full acceptance; the batch-2 phases draft ``drafted_k0`` tokens."""
    out = []
    for i, b in enumerate([1, 2, 1, 2, 1]):
        d = 48 if b == 1 else drafted_k0
        out.append({"phase": i, "batch": b, "drafted": d, "accepted": d if b == 1 else 0,
                    "acceptance_pct": 100.0 if d and b == 1 else (0.0 if d else None),
                    "in_flight": 1 if b == 1 else in_flight})
    return out


def dk_cell(schedule: str, ph: list[dict]) -> CellResult:
    return CellResult(cell=f"dynamic_k={schedule}", toggled={"dynamic_k": schedule}, repeat=0, status="ok",
                      log={"lines": 10}, workload={"requests": 8, "ok": 8, "failed": 0}, phases=ph)


def test_a_k0_phase_that_drafted_fully_is_a_failed_condition_not_an_after_k0_result() -> None:
    on = dk_cell("on", phases(drafted_k0=192))
    v = build_verdict(PLAN_DK, {"kind": "cpu"}, [("dynamic_k=on", {"dynamic_k": "on"})], [on])
    failed = [c for c in on.conditions if c["ok"] is False]
    assert any("192 draft tokens in a K=0 phase" in c["detail"] for c in failed)
    assert on.k0["acceptance_batch1_after_batch2_pct"] is None and on.k0["phases_left_out"] == [1, 3]
    assert any("condition failed" in n and "schedule was not applied" in n for n in v["notes"])
    assert on.symptom("acceptance_after_k0_pct") is None


def test_a_k0_phase_with_a_few_tail_drafts_holds() -> None:
    on = dk_cell("on", phases(drafted_k0=6))
    build_verdict(PLAN_DK, {"kind": "cpu"}, [], [on])
    assert all(c["ok"] for c in on.conditions)
    assert on.k0["acceptance_batch1_after_batch2_pct"] == 100.0


def test_a_batch2_phase_with_one_request_in_flight_fails_its_condition() -> None:
    off = dk_cell("off", phases(drafted_k0=192, in_flight=1))
    build_verdict(PLAN_DK, {"kind": "cpu"}, [], [off])
    assert any("at most 1 request(s) in flight" in c["detail"] for c in off.conditions if c["ok"] is False)
    assert any(c["scope"] == "cell" and c["ok"] is False for c in off.conditions)


def test_max_in_flight_from_request_windows() -> None:
    r = [SimpleNamespace(phase=0, started=0.0, latency_s=1.0), SimpleNamespace(phase=1, started=2.0, latency_s=3.0),
         SimpleNamespace(phase=1, started=2.5, latency_s=1.0), SimpleNamespace(phase=2, started=9.0, latency_s=1.0),
         SimpleNamespace(phase=2, started=10.5, latency_s=1.0)]
    assert max_in_flight(r, 4) == [1, 2, 1, None]


def test_a_small_local_tier_that_never_evicted_is_excluded() -> None:
    plan = {"name": "eviction", "toggles": {"max_local_cpu_size": ["0.004", "1.0"]}}
    cells = [CellResult(cell=f"max_local_cpu_size={v}", toggled={"max_local_cpu_size": v}, repeat=0, status="ok",
                        log={"lines": 100, "lookups": 10, "loads": 5, "shortfalls": 0, "markers": m},
                        workload={"requests": 64, "ok": 64, "failed": 0})
             for v, m in (("0.004", {}), ("1.0", {}))]
    v = build_verdict(plan, {"kind": "cpu"}, [(c.cell, c.toggled) for c in cells], cells)
    assert any("meant to evict and did not" in n for n in v["notes"])
    sf = next(d for d in v["differential"] if d["symptom"] == "shortfalls")
    assert "excluded, condition failed" in sf["conclusion"]
    cells[0].log["markers"] = {"alloc_failures": 12}
    build_verdict(plan, {"kind": "cpu"}, [], cells)
    assert cells[0].conditions[-1]["ok"] is True


def test_redis_evicted_keys_is_read_from_info_stats() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer() -> None:
        conn, _ = srv.accept()
        conn.recv(64)
        body = b"# Stats\r\ntotal_connections_received:3\r\nevicted_keys:17\r\nkeyspace_hits:2\r\n"
        conn.sendall(b"$%d\r\n" % len(body) + body + b"\r\n")
        conn.close()

    t = threading.Thread(target=answer)
    t.start()
    assert redis_evicted_keys(srv.getsockname()[1]) == 17
    t.join()
    srv.close()
