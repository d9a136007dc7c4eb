"""`specdiag repro --dry-run --device cuda`: exact commands, environment and LMCache YAML for every preset.

The expectations are written out literally (not recomputed with the code under test), so any change to a
flag, a JSON key order or a YAML key shows up here.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specdiag.cli import app

PY = "/opt/venv/bin/python"
MODEL = "/models/m"
OUT = "/runs/x"

HEAD = [PY, "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL, "--served-model-name", "repro",
        "--host", "127.0.0.1", "--port", "{port}", "--max-model-len", "4096", "--disable-uvicorn-access-log",
        "--enforce-eager"]
BASE_ENV = {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1", "VLLM_LOGGING_LEVEL": "INFO", "VLLM_LOG_STATS_INTERVAL": "5",
    "TMPDIR": "{tmpdir}", "VLLM_RPC_BASE_PATH": "{tmpdir}", "PROMETHEUS_MULTIPROC_DIR": "{tmpdir}/prometheus",
}


def kv(port: int) -> list[str]:
    return ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both",'
            '"kv_connector_extra_config":{"lmcache_rpc_port":' + str(port) + "}}"]


NGRAM = ["--speculative-config", '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}']


def lm_yaml(local_cpu: str, size: str, sdc: str, remote: bool = False, pin: bool = False) -> str:
    y = (f"chunk_size: 256\nlocal_cpu: {local_cpu}\nmax_local_cpu_size: {size}\nsave_decode_cache: {sdc}\n"
         "enable_async_loading: false\n")
    if pin:
        y += "pin_timeout_sec: 1.0\npin_check_interval_sec: 1.0\n"
    if remote:
        y += "remote_url: redis://127.0.0.1:{redis_port}\nremote_serde: naive\n"
    return y


def redis(mm: str) -> list[str]:
    return ["redis-server", "--port", "{redis_port}", "--bind", "127.0.0.1", "--protected-mode", "yes",
            "--save", "", "--appendonly", "no", "--maxmemory", mm, "--maxmemory-policy", "allkeys-lru",
            "--dir", "{tmpdir}"]


EXPECTED = {
    "save-decode-cache": [
        ("save_decode_cache=false,spec=off", ["--no-enable-prefix-caching", *kv(0)],
         lm_yaml("true", "0.05", "false"), None),
        ("save_decode_cache=false,spec=ngram", ["--no-enable-prefix-caching", *NGRAM, *kv(1)],
         lm_yaml("true", "0.05", "false"), None),
        ("save_decode_cache=true,spec=off", ["--no-enable-prefix-caching", *kv(2)],
         lm_yaml("true", "0.05", "true"), None),
        ("save_decode_cache=true,spec=ngram", ["--no-enable-prefix-caching", *NGRAM, *kv(3)],
         lm_yaml("true", "0.05", "true"), None),
    ],
    "dynamic-k": [
        ("dynamic_k=off", ["--enable-prefix-caching", "--speculative-config",
                           '{"method":"draft_model","model":"/models/m","num_speculative_tokens":3}'], None, None),
        ("dynamic_k=on", ["--enable-prefix-caching", "--speculative-config",
                          '{"method":"draft_model","model":"/models/m","num_speculative_tokens":3,'
                          '"num_speculative_tokens_per_batch_size":[[1,1,3],[2,256,0]]}'], None, None),
    ],
    "eviction": [
        ("max_local_cpu_size=0.004", ["--no-enable-prefix-caching", *kv(0)], lm_yaml("true", "0.004", "false"), None),
        ("max_local_cpu_size=1.0", ["--no-enable-prefix-caching", *kv(1)], lm_yaml("true", "1.0", "false"), None),
    ],
    "pin-timeout": [
        ("save_decode_cache=false", ["--no-enable-prefix-caching", "--num-gpu-blocks-override", "36", *kv(0)],
         lm_yaml("true", "0.001", "false", pin=True), None),
        ("save_decode_cache=true", ["--no-enable-prefix-caching", "--num-gpu-blocks-override", "36", *kv(1)],
         lm_yaml("true", "0.001", "true", pin=True), None),
    ],
    "remote-eviction": [
        ("redis_maxmemory=4mb,save_decode_cache=false", ["--no-enable-prefix-caching", *kv(0)],
         lm_yaml("false", "0.5", "false", True), redis("4mb")),
        ("redis_maxmemory=4mb,save_decode_cache=true", ["--no-enable-prefix-caching", *kv(1)],
         lm_yaml("false", "0.5", "true", True), redis("4mb")),
        ("redis_maxmemory=1gb,save_decode_cache=false", ["--no-enable-prefix-caching", *kv(2)],
         lm_yaml("false", "0.5", "false", True), redis("1gb")),
        ("redis_maxmemory=1gb,save_decode_cache=true", ["--no-enable-prefix-caching", *kv(3)],
         lm_yaml("false", "0.5", "true", True), redis("1gb")),
    ],
}


def dry_json(preset: str, *extra: str) -> dict:
    r = CliRunner().invoke(app, ["repro", "--preset", preset, "--device", "cuda", "--model", MODEL,
                                 "--python", PY, "--out", OUT, "--dry-run", "--format", "json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_dry_run_cuda_exact(preset: str) -> None:
    data = dry_json(preset)
    assert data["device"] == "cuda"
    cells = data["cells"]
    assert [c["cell"] for c in cells] == [e[0] for e in EXPECTED[preset]]
    for c, (name, tail, yaml_text, redis_argv) in zip(cells, EXPECTED[preset], strict=True):
        assert c["argv"] == HEAD + tail, name
        env = dict(BASE_ENV)
        if yaml_text is not None:
            slug = f"c{c['index']:02d}-" + name.replace(",", "__")
            env["LMCACHE_CONFIG_FILE"] = f"{OUT}/cells/{slug}-r{{repeat}}/lmcache.yaml"
        assert c["env"] == env, name
        assert c["lmcache_yaml"] == yaml_text, name
        assert c["redis_argv"] == redis_argv, name
        # nothing on CUDA may turn on specdiag's CPU connector
        assert "SPECDIAG_LMCACHE_CPU_CONNECTOR" not in c["env"]


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_dry_run_text_prints_each_exact_command(preset: str) -> None:
    r = CliRunner().invoke(app, ["repro", "--preset", preset, "--device", "cuda", "--model", MODEL,
                                 "--python", PY, "--out", OUT, "--dry-run"])
    assert r.exit_code == 0, r.output
    for name, tail, yaml_text, redis_argv in EXPECTED[preset]:
        assert f": {name}\n" in r.output
        assert "command: " + shlex.join(HEAD + tail) in r.output
        if redis_argv:
            assert "redis: " + shlex.join(redis_argv) in r.output
        if yaml_text:
            assert "\n".join("  " + ln for ln in yaml_text.splitlines()) in r.output


def test_dry_run_cpu_activates_connector_and_caches(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["repro", "--preset", "eviction", "--device", "cpu", "--python", PY,
                                 "--cache-dir", str(tmp_path), "--out", OUT, "--dry-run", "--format", "json"])
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)["cells"][0]
    assert c["argv"][4] == str(tmp_path / "models" / "tiny-llama-v1")
    assert "--dtype" in c["argv"] and c["argv"][c["argv"].index("--dtype") + 1] == "bfloat16"
    assert c["env"]["SPECDIAG_LMCACHE_CPU_CONNECTOR"] == "1"
    assert c["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert c["env"]["VLLM_CACHE_ROOT"] == f"{tmp_path}/vllm-cache"


def test_dry_run_draft_model_with_lmcache_warns() -> None:
    data = dry_json("dynamic-k", "--set", "lmcache=on")
    assert all("crash signature B" in " ".join(c["notes"]) for c in data["cells"])


def test_cuda_without_model_is_usage_error() -> None:
    r = CliRunner().invoke(app, ["repro", "--preset", "eviction", "--device", "cuda", "--dry-run"])
    assert r.exit_code == 2
    assert "--model" in r.output


def test_unknown_toggle_is_usage_error() -> None:
    r = CliRunner().invoke(app, ["repro", "--toggle", "save_decode_cahce=true,false", "--device", "cuda",
                                 "--model", MODEL, "--dry-run"])
    assert r.exit_code == 2
    assert "unknown setting 'save_decode_cahce'" in r.output
