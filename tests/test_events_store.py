"""specdiag events: the Parquet store round-trips (DuckDB reads it) and fleet --from-events equals the raw run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.engine import AnalyzeOptions
from specdiag.fleet.run import run_fleet, run_fleet_from_events

pytest.importorskip("pyarrow")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fleet_and_store(tmp_path_factory) -> tuple[Path, Path, dict]:
    base = tmp_path_factory.mktemp("store")
    logs, store = base / "logs", base / "store"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_fleet.py"), str(logs), "--pods", "6",
                           "--size-mb", "3", "--kv001", "3", "--collapse", "0"],
                          capture_output=True, text=True, check=True)
    res = CliRunner().invoke(app, ["events", str(logs), "--out", str(store)])
    assert res.exit_code == 0, res.output
    return logs, store, json.loads(proc.stdout)


def test_store_has_every_table_for_every_pod(fleet_and_store):
    _logs, store, plan = fleet_and_store
    manifest = json.loads((store / "store.json").read_text())
    assert manifest["schema"] == "specdiag.events/1" and manifest["deployments"] == sorted(plan["pods"])
    for table in ("records", "counts", "series"):
        assert sorted(p.name for p in (store / table).iterdir()) == [f"deployment={p}" for p in sorted(plan["pods"])]


def test_duckdb_finds_the_planted_pods(fleet_and_store):
    duckdb = pytest.importorskip("duckdb")
    _logs, store, plan = fleet_and_store
    rows = duckdb.sql(f"""SELECT deployment, count(*) FROM read_parquet('{store}/records/**/*.parquet',
                          hive_partitioning=true) WHERE template = 'R2' GROUP BY 1 ORDER BY 1""").fetchall()
    assert [r[0] for r in rows] == sorted(p for p, k in plan["pods"].items() if k == "kv001")
    versions = dict(duckdb.sql(f"""SELECT deployment, json_extract_string(fields, '$.lmcache_version')
                                   FROM read_parquet('{store}/records/**/*.parquet', hive_partitioning=true)
                                   WHERE template = 'C18' GROUP BY 1, 2""").fetchall())
    assert {p for p, v in versions.items() if v == plan["affected_version"]} == {p for p, k in plan["pods"].items()
                                                                                 if k == "kv001"}


def test_fleet_from_events_equals_the_raw_run(fleet_and_store):
    logs, store, _plan = fleet_and_store
    opts = AnalyzeOptions(paths=(), jobs=1)
    raw, replayed = run_fleet([str(logs)], opts), run_fleet_from_events(str(store), opts)
    assert [r.id for r in raw.deployments] == [r.id for r in replayed.deployments]
    for a, b in zip(raw.deployments, replayed.deployments, strict=True):
        assert a.context == b.context
        assert {k: v["count"] for k, v in a.by_rule().items()} == {k: v["count"] for k, v in b.by_rule().items()}
    assert [s.to_dict() for s in raw.contrast] == [s.to_dict() for s in replayed.contrast] != []
    assert [rc.to_dict() for rc in raw.contrast_rules] == [rc.to_dict() for rc in replayed.contrast_rules]


def test_a_damaged_partition_is_a_row_with_its_error(fleet_and_store, tmp_path):
    _logs, store, plan = fleet_and_store
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    part = next((copy / "records" / "deployment=pod-03").rglob("*.parquet"))
    part.write_bytes(b"not parquet")
    rep = run_fleet_from_events(str(copy), AnalyzeOptions(paths=()))
    row = next(r for r in rep.deployments if r.id == "pod-03")
    assert row.error and len(rep.deployments) == len(plan["pods"])


def test_not_a_store_is_a_one_line_error(tmp_path):
    res = CliRunner().invoke(app, ["fleet", "--from-events", str(tmp_path)])
    assert res.exit_code == 2 and "not a specdiag events store" in res.output


def test_the_documented_duckdb_queries_answer_the_questions(fleet_and_store):
    import re

    duckdb = pytest.importorskip("duckdb")
    _logs, store, plan = fleet_and_store
    doc = (ROOT / "docs" / "fleet.md").read_text()
    queries = [q.strip() for q in re.findall(r"```sql\n(.*?)```", doc, re.S)[0].split(";") if q.strip()]
    assert len(queries) == 3
    shortfalls, configs, acceptance = (duckdb.sql(q.replace("'store/", f"'{store}/")).fetchall() for q in queries)
    kv001 = sorted(p for p, k in plan["pods"].items() if k == "kv001")
    assert sorted(r[0] for r in shortfalls) == kv001
    assert sorted(r[0] for r in configs if r[1] == plan["affected_version"] and r[2] == "20.0") == kv001
    assert {r[0] for r in acceptance} == set(plan["pods"]) and all(0 < r[2] < 1 for r in acceptance)
