"""Plans: toggles, --set, presets, YAML plan files, the matrix, and materialised configs."""

from __future__ import annotations

import pytest

from specdiag.repro.materialise import (
    DeviceSpec,
    RuntimeValues,
    lmcache_config,
    materialise,
    speculative_config,
)
from specdiag.repro.plan import PRESETS, PlanError, build_plan, parse_assignment

DEV = DeviceSpec("cuda", "py", "/m")


def test_parse_assignment() -> None:
    assert parse_assignment("save_decode_cache=true,false") == ("save_decode_cache", ["true", "false"])
    assert parse_assignment(" max_local_cpu_size = 0.5 , 20 ") == ("max_local_cpu_size", ["0.5", "20"])
    # a JSON schedule keeps its commas
    assert parse_assignment("dynamic_k=[[1,1,3],[2,8,0]]") == ("dynamic_k", ["[[1,1,3],[2,8,0]]"])
    assert parse_assignment("lmcache.blocking_timeout_secs=3") == ("lmcache.blocking_timeout_secs", ["3"])


@pytest.mark.parametrize("bad", ["save_decode_cache", "nope=1", "spec=", "spec=ngram,,off", "spec=off,off",
                                 "lmcache.=1"])
def test_parse_assignment_rejects(bad: str) -> None:
    with pytest.raises(PlanError):
        parse_assignment(bad)


def test_matrix_order_and_merge() -> None:
    plan = build_plan(toggles=["spec=off,ngram", "save_decode_cache=false,true"],
                      sets=["max_local_cpu_size=2"])
    cells = plan.cells()
    assert [c.name for c in cells] == [
        "spec=off,save_decode_cache=false", "spec=off,save_decode_cache=true",
        "spec=ngram,save_decode_cache=false", "spec=ngram,save_decode_cache=true",
    ]
    assert all(c.settings["max_local_cpu_size"] == "2" for c in cells)
    assert cells[3].settings["chunk_size"] == "256"  # untouched default
    assert cells[2].slug == "c02-spec=ngram__save_decode_cache=false"


def test_toggle_overrides_preset_toggle_and_set_removes_it() -> None:
    plan = build_plan(preset="eviction", toggles=["max_local_cpu_size=0.5,20"])
    assert plan.toggles == {"max_local_cpu_size": ["0.5", "20"]}
    plan = build_plan(preset="remote-eviction", sets=["save_decode_cache=true"])
    assert list(plan.toggles) == ["redis_maxmemory"]
    assert all(c.settings["save_decode_cache"] == "true" for c in plan.cells())


def test_presets_exist_with_expected_shapes() -> None:
    assert set(PRESETS) == {"save-decode-cache", "dynamic-k", "eviction", "remote-eviction", "pin-timeout"}
    assert build_plan(preset="pin-timeout").workload.kind == "pin_window"
    assert len(build_plan(preset="save-decode-cache").cells()) == 4
    assert len(build_plan(preset="dynamic-k").cells()) == 2
    assert build_plan(preset="dynamic-k").workload.kind == "alternating_batch"
    assert build_plan(preset="remote-eviction").workload.kind == "distinct_prefixes"


def test_yaml_plan_file() -> None:
    text = """
preset: eviction
name: my-eviction
set:
  chunk_size: 128
  save_decode_cache: true
toggles:
  max_local_cpu_size: [0.01, 2]
  kv_load_failure_policy: [fail, recompute]
workload:
  kind: distinct_prefixes
  prompts: 4
  prompt_words: 100
repeat: 2
"""
    plan = build_plan(plan_yaml=text)
    assert plan.name == "my-eviction" and plan.repeat == 2
    assert plan.base["chunk_size"] == "128" and plan.base["save_decode_cache"] == "true"
    assert plan.toggles == {"max_local_cpu_size": ["0.01", "2"], "kv_load_failure_policy": ["fail", "recompute"]}
    assert plan.workload.params == {"prompts": 4, "prompt_words": 100}
    assert len(plan.cells()) == 4
    # the command line repeat wins over the file
    assert build_plan(plan_yaml=text, repeat=3).repeat == 3


@pytest.mark.parametrize("text, msg", [
    ("- a\n- b\n", "mapping at the top level"),
    ("toggles: {bogus: [1, 2]}\n", "unknown setting 'bogus'"),
    ("workload: {kind: fork_bomb}\n", "unknown workload kind"),
    ("toggles: {spec: [off, ngram]}\nextra: 1\n", "unknown top-level keys"),
    ("preset: nope\n", "unknown preset"),
    ("toggles: {spec: []}\n", "has no values"),
])
def test_yaml_plan_errors(text: str, msg: str) -> None:
    with pytest.raises(PlanError, match=msg):
        build_plan(plan_yaml=text)


def test_yaml_plan_is_safe_loaded() -> None:
    with pytest.raises(PlanError, match="not a valid plan"):  # safe_load refuses the tag; one-line error
        build_plan(plan_yaml="!!python/object/apply:os.system ['true']\n")


def test_nothing_to_run() -> None:
    with pytest.raises(PlanError, match="nothing to run"):
        build_plan()


def test_speculative_config_variants() -> None:
    s = {"spec": "ngram", "num_speculative_tokens": "5", "dynamic_k": "off"}
    assert speculative_config(s, "/m") == {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
    s = {"spec": "draft_model", "num_speculative_tokens": "3", "dynamic_k": "[[1,4,3],[5,64,1]]"}
    assert speculative_config(s, "/m")["num_speculative_tokens_per_batch_size"] == [[1, 4, 3], [5, 64, 1]]
    with pytest.raises(PlanError, match="dynamic_k needs"):
        speculative_config({"spec": "off", "num_speculative_tokens": "3", "dynamic_k": "on"}, "/m")
    with pytest.raises(PlanError, match="triples"):
        speculative_config({"spec": "ngram", "num_speculative_tokens": "3", "dynamic_k": "[1,2]"}, "/m")


def test_lmcache_yaml_typed_values_and_pin_timeout() -> None:
    plan = build_plan(sets=["pin_timeout_sec=1", "lmcache.blocking_timeout_secs=3", "lmcache.extra_flag=true",
                            "redis_maxmemory=8mb"])
    cfg = lmcache_config(plan.cells()[0].settings, RuntimeValues(redis_port="6390"))
    assert cfg["pin_timeout_sec"] == 1.0 and cfg["pin_check_interval_sec"] == 1.0
    assert cfg["blocking_timeout_secs"] == 3 and cfg["extra_flag"] is True
    assert cfg["remote_url"] == "redis://127.0.0.1:6390"


def test_materialise_runtime_values_and_passthrough() -> None:
    plan = build_plan(sets=["vllm.max-num-seqs=4", "vllm.enable-chunked-prefill=false", "num_gpu_blocks=36",
                            "kv_load_failure_policy=recompute", "tp=2", "env.FOO=bar"])
    spec = materialise(plan.cells()[0], DEV, RuntimeValues(port="8123", tmpdir="/tmp/sdr-x", cell_dir="/r/c"))
    a = spec.argv
    assert a[a.index("--port") + 1] == "8123"
    assert a[a.index("--max-num-seqs") + 1] == "4"
    assert "--no-enable-chunked-prefill" in a
    assert a[a.index("--num-gpu-blocks-override") + 1] == "36"
    assert a[a.index("--tensor-parallel-size") + 1] == "2"
    assert '"kv_load_failure_policy":"recompute"' in a[a.index("--kv-transfer-config") + 1]
    assert spec.env["FOO"] == "bar" and spec.env["TMPDIR"] == "/tmp/sdr-x"
    assert spec.env["LMCACHE_CONFIG_FILE"] == "/r/c/lmcache.yaml"
    assert all(isinstance(x, str) for x in a)  # an argument list, never a shell string


def test_redis_without_lmcache_is_an_error() -> None:
    plan = build_plan(sets=["lmcache=off", "redis_maxmemory=4mb"])
    with pytest.raises(PlanError, match="redis_maxmemory needs lmcache=on"):
        materialise(plan.cells()[0], DEV)
