"""``repro`` plans from hostile or careless hands: validated against the plan schema, one-line errors, exit 2,
bounded memory (no alias expansion), never code execution."""

from __future__ import annotations

import json
import subprocess

import pytest
from peak_rss import run_cli

from specdiag.repro.plan import PlanError, build_plan

#: nine levels of nine aliases inside an accepted section: 9**9 strings once expanded (plan.json, --dry-run)
BILLION_LAUGHS = "preset: eviction\nworkload:\n  kind: distinct_prefixes\n" + "\n".join(
    ["  a: &a [x, x, x, x, x, x, x, x, x]"]
    + [f"  {chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]) + "\n"

BAD_PLANS = {
    "python-object": ("!!python/object/apply:os.system ['echo pwned']\n", "not a valid plan"),
    "python-name": ("toggles: {spec: !!python/name:os.system }\n", "not a valid plan"),
    "repeat-word": ("preset: eviction\nrepeat: many\n", "repeat must be a whole number"),
    "repeat-huge": ("preset: eviction\nrepeat: 100000000\n", "repeat must be between"),
    "toggles-string": ("toggles: x\n", "toggles: expected a mapping"),
    "toggles-list": ("toggles: [a, b]\n", "toggles: expected a mapping"),
    "base-list": ("base: [1, 2]\n", "base: expected a mapping"),
    "base-nested-value": ("base: {chunk_size: {a: 1}}\n", "expected a single value"),
    "toggle-nested-value": ("toggles: {chunk_size: [[1, 2], 3]}\n", "expected a single value"),
    "name-mapping": ("name: {a: 1}\npreset: eviction\n", "name: expected a single value"),
    "workload-nested": ("preset: eviction\nworkload: {kind: multi_turn, turns: {a: {b: 1}}}\n",
                        "expected a single value"),
    "unclosed-flow": ("toggles: {chunk_size: [256, 512\n", "not a valid plan"),
    "top-level-list": ("- 1\n- 2\n", "expected a mapping at the top level"),
    "billion-laughs": (BILLION_LAUGHS, "aliases"),
    "too-many-cells": ("toggles:\n" + "".join(f"  lmcache.k{i}: [a, b, c, d]\n" for i in range(6)), "cells"),
    "huge-int": ("base: {chunk_size: " + "9" * 5000 + "}\n", "not a valid plan|out of range"),
    "bad-schedule": ("base: {spec: ngram, dynamic_k: [[1, inf, 3]]}\n", "schedule"),
}


@pytest.mark.parametrize("name", sorted(BAD_PLANS))
def test_a_malformed_plan_is_one_plan_error(name: str) -> None:
    text, why = BAD_PLANS[name]
    with pytest.raises(PlanError, match=why) as exc:
        build_plan(plan_yaml=text)
    assert "\n" not in str(exc.value)


def test_non_utf8_plan_bytes_are_a_plan_error() -> None:
    with pytest.raises(PlanError, match="not UTF-8"):
        build_plan(plan_yaml=b"preset: eviction\nname: \xff\xfe\n")


def test_an_oversized_plan_is_refused_before_parsing() -> None:
    with pytest.raises(PlanError, match="larger than"):
        build_plan(plan_yaml="preset: eviction\n" + "#" * (1024 * 1024) + "\n")


@pytest.mark.parametrize("arg,why", [
    ("dynamic_k=[unclosed", "not valid JSON"),
    ("lmcache.extra={\"a\": ", "not valid JSON"),
    ("chunk_size=" + ",".join(str(i) for i in range(200)), "more than"),
])
def test_bad_set_and_toggle_arguments_are_plan_errors(arg: str, why: str) -> None:
    with pytest.raises(PlanError, match=why):
        build_plan(toggles=[arg])


def test_good_plans_still_build() -> None:
    plan = build_plan(plan_yaml="preset: eviction\nrepeat: 2\nbase: {spec: ngram, dynamic_k: [[1, 1, 3], [2, 8, 0]]}\n"
                                "toggles: {max_local_cpu_size: [0.004, 1.0]}\n")
    assert plan.repeat == 2 and plan.base["dynamic_k"] == "[[1, 1, 3], [2, 8, 0]]"
    assert [c.toggled for c in plan.cells()] == [{"max_local_cpu_size": "0.004"}, {"max_local_cpu_size": "1.0"}]


def _repro(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return run_cli(["repro", *args], text=True, cwd=cwd)


@pytest.mark.parametrize("name", ["billion-laughs", "python-object", "repeat-word", "toggles-string"])
def test_the_cli_gives_one_line_and_exit_2_with_bounded_memory(tmp_path, name: str) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(BAD_PLANS[name][0])
    r = _repro("--plan", str(plan), "--dry-run", "--out", str(tmp_path / "out"))
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("MAXRSS_KB=")]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert int(r.stderr.rsplit("MAXRSS_KB=", 1)[1]) < 300 * 1024


def test_the_cli_refuses_a_non_utf8_plan(tmp_path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_bytes(b"preset: \xff\n")
    r = _repro("--plan", str(plan), "--dry-run", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "not UTF-8" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("content", ["", "[]", "{\"toggles\": \"x\"}", "{\"base\": [1]}", "null"])
def test_from_run_with_a_damaged_plan_json_is_one_line_exit_2(tmp_path, content: str) -> None:
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    (run / "plan.json").write_text(content)
    r = _repro("--from-run", str(run))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "--from-run" in r.stderr


def test_from_run_with_a_damaged_verdict_json_is_one_line_exit_2(tmp_path) -> None:
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps(build_plan(preset="eviction").to_dict()))
    (run / "verdict.json").write_text("{not json")
    r = _repro("--from-run", str(run))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
