"""``--repeat auto``: rounds of every cell until the comparison is decisive or the budget is spent."""

from __future__ import annotations

import threading

from specdiag.repro.executors import AutoBudget, decisive, run_auto
from specdiag.repro.plan import build_plan
from specdiag.repro.verdict import CellResult

PLAN = build_plan("remote-eviction", sets=["save_decode_cache=false"])


def fake(shortfall_with: dict[str, int], loads: int = 20):
    """A fake executor: a cell shows ``shortfall_with[value of redis_maxmemory]`` shortfalls, every run."""
    calls: list[tuple[str, int]] = []

    def run_one(cell, rep: int) -> CellResult:
        calls.append((cell.name, rep))
        n = shortfall_with[cell.toggled["redis_maxmemory"]]
        return CellResult(cell=cell.name, toggled=cell.toggled, repeat=rep, status="ok",
                          log={"lines": 50, "lookups": loads, "loads": loads, "shortfalls": n,
                               "markers": {"redis_key_evicted": 1}},
                          workload={"requests": 64, "ok": 64, "failed": 0})
    return run_one, calls


def test_auto_stops_at_the_first_decisive_round() -> None:
    run_one, calls = fake({"4mb": 3, "1gb": 0})
    results, why = run_auto(PLAN.cells(), run_one, lambda rs: decisive(PLAN.to_dict(), rs), AutoBudget(runs=40),
                            threading.Event())
    assert why == "decided"
    assert len(calls) == 8  # 4 rounds: 4/4 against 0/4 is the first split with p < 0.05 (p = 0.029)


def test_auto_stops_when_the_run_budget_is_spent() -> None:
    run_one, calls = fake({"4mb": 0, "1gb": 0})
    results, why = run_auto(PLAN.cells(), run_one, lambda rs: decisive(PLAN.to_dict(), rs), AutoBudget(runs=7),
                            threading.Event())
    assert why == "budget-runs" and len(calls) == 6  # a round never cut in half


def test_auto_stops_when_the_time_budget_is_spent() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 50.0  # every look at the clock: 50 s later
        return now[0]

    run_one, calls = fake({"4mb": 0, "1gb": 0})
    results, why = run_auto(PLAN.cells(), run_one, lambda rs: False, AutoBudget(minutes=2), threading.Event(),
                            clock=clock)
    assert why == "budget-minutes" and len(calls) == 6  # checks at 50 s and 100 s pass, 150 s is over 2 min
