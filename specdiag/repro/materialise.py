"""Turn one cell's settings into the exact things a run uses: argument lists, environment, LMCache YAML.

Everything is computed from the cell, the device and a few run-time values (ports, temp dir). ``--dry-run``
prints the same objects with placeholders (``{port}``, ``{tmpdir}``, ``{redis_port}``) for the values only
known once a cell starts, so what the user reads is what will run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from specdiag.repro.plan import Cell, PlanError, as_bool

SERVED_MODEL_NAME = "repro"
CPU_CONNECTOR_ENV = "SPECDIAG_LMCACHE_CPU_CONNECTOR"


@dataclass(frozen=True)
class DeviceSpec:
    """Where and how servers run. ``kind`` is ``cuda`` or ``cpu``; ``python`` runs vLLM."""

    kind: str
    python: str
    model: str
    cache_dir: str = ""
    redis_server: str = "redis-server"


@dataclass(frozen=True)
class RuntimeValues:
    """Values chosen when the cell starts; strings so the dry run can show placeholders."""

    port: str = "{port}"
    redis_port: str = "{redis_port}"
    tmpdir: str = "{tmpdir}"
    cell_dir: str = "{cell_dir}"


@dataclass
class RedisSpec:
    argv: list[str]
    port: str


@dataclass
class CellSpec:
    """Everything needed to start one cell's processes; also the dry-run output."""

    argv: list[str]
    env: dict[str, str]
    lmcache_yaml: str | None
    lmcache_yaml_path: str | None
    redis: RedisSpec | None
    speculative_config: dict[str, Any] | None
    kv_transfer_config: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "env": dict(self.env),
            "lmcache_yaml_path": self.lmcache_yaml_path,
            "lmcache_yaml": self.lmcache_yaml,
            "redis_argv": list(self.redis.argv) if self.redis else None,
            "notes": list(self.notes),
        }


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _scalar(text: str) -> Any:
    """Type a passthrough value the way YAML would (``true`` → bool, ``8`` → int), safely."""
    import yaml

    return yaml.safe_load(text)


def speculative_config(settings: dict[str, str], model: str) -> dict[str, Any] | None:
    method = settings["spec"]
    if method == "off":
        if settings["dynamic_k"] != "off":
            raise PlanError("dynamic_k needs spec=ngram or spec=draft_model")
        return None
    k = int(settings["num_speculative_tokens"])
    if method == "ngram":
        cfg: dict[str, Any] = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4}
    elif method == "draft_model":
        # the target as its own draft: healthy acceptance is ~100 %, so any stale-draft-KV bug shows as a drop
        cfg = {"method": "draft_model", "model": model, "num_speculative_tokens": k}
    else:
        raise PlanError(f"spec: expected off, ngram or draft_model, got {method!r}")
    dyn = settings["dynamic_k"]
    if dyn == "on":
        cfg["num_speculative_tokens_per_batch_size"] = [[1, 1, k], [2, 256, 0]]
    elif dyn != "off":
        try:
            sched = json.loads(dyn)
        except json.JSONDecodeError as e:
            raise PlanError(f"dynamic_k: expected off, on or a JSON schedule, got {dyn!r}") from e
        if not (isinstance(sched, list) and all(isinstance(r, list) and len(r) == 3 for r in sched)):
            raise PlanError("dynamic_k: schedule must be a list of [start, end, K] triples")
        cfg["num_speculative_tokens_per_batch_size"] = sched
    return cfg


def lmcache_config(settings: dict[str, str], rt: RuntimeValues) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "chunk_size": int(settings["chunk_size"]),
        "local_cpu": as_bool(settings["local_cpu"], "local_cpu"),
        "max_local_cpu_size": float(settings["max_local_cpu_size"]),
        "save_decode_cache": as_bool(settings["save_decode_cache"], "save_decode_cache"),
        "enable_async_loading": as_bool(settings["async_loading"], "async_loading"),
    }
    if settings["pin_timeout_sec"] != "default":
        cfg["pin_timeout_sec"] = float(settings["pin_timeout_sec"])
        cfg["pin_check_interval_sec"] = min(1.0, float(settings["pin_timeout_sec"]))
    if settings["redis_maxmemory"] != "off":
        cfg["remote_url"] = f"redis://127.0.0.1:{rt.redis_port}"
    for k, v in settings.items():
        if k.startswith("lmcache."):
            cfg[k.split(".", 1)[1]] = _scalar(v)
    return cfg


def redis_spec(settings: dict[str, str], device: DeviceSpec, rt: RuntimeValues) -> RedisSpec | None:
    mm = settings["redis_maxmemory"]
    if mm == "off":
        return None
    # no persistence, loopback only: this Redis exists to evict, and only for this cell
    argv = [
        device.redis_server, "--port", rt.redis_port, "--bind", "127.0.0.1", "--protected-mode", "yes",
        "--save", "", "--appendonly", "no", "--maxmemory", mm, "--maxmemory-policy", settings["redis_policy"],
        "--dir", rt.tmpdir,
    ]
    return RedisSpec(argv=argv, port=rt.redis_port)


def _server_argv(settings: dict[str, str], device: DeviceSpec, rt: RuntimeValues) -> list[str]:
    """The vLLM server's base argument list: the flags every cell sets, before speculation, KV transfer and
    ``vllm.*`` pass-throughs are appended (in that order, so a pass-through can still override)."""
    s = settings
    argv = [
        device.python, "-m", "vllm.entrypoints.openai.api_server",
        "--model", device.model, "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", rt.port,
        "--max-model-len", s["max_model_len"],
        "--disable-uvicorn-access-log",
    ]
    if device.kind == "cpu":
        argv += ["--dtype", "bfloat16"]
    if as_bool(s["enforce_eager"], "enforce_eager"):
        argv.append("--enforce-eager")
    argv.append("--enable-prefix-caching" if as_bool(s["prefix_caching"], "prefix_caching")
                else "--no-enable-prefix-caching")
    if int(s["tp"]) > 1:
        argv += ["--tensor-parallel-size", s["tp"]]
    if s["num_gpu_blocks"] != "off":
        argv += ["--num-gpu-blocks-override", str(int(s["num_gpu_blocks"]))]
    return argv


def _server_env(device: DeviceSpec, rt: RuntimeValues) -> dict[str, str]:
    """Environment additions every cell gets: offline, deterministic hashing, and temp files kept inside the
    cell's own directory so cells never see each other's sockets."""
    env: dict[str, str] = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "PYTHONHASHSEED": "0",  # LMCache's default chunk hash is Python hash(): identical across processes
        "PYTHONUNBUFFERED": "1",
        "VLLM_LOGGING_LEVEL": "INFO",
        "VLLM_LOG_STATS_INTERVAL": "5",  # more stats lines per cell (default 10 s)
        "TMPDIR": rt.tmpdir,  # ZMQ IPC sockets and vLLM temp files land in the cell's own temp dir
        "VLLM_RPC_BASE_PATH": rt.tmpdir,
        "PROMETHEUS_MULTIPROC_DIR": f"{rt.tmpdir}/prometheus",
    }
    if device.kind == "cpu":
        env.update({
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CACHE_ROOT": f"{device.cache_dir}/vllm-cache",
            "TORCHINDUCTOR_CACHE_DIR": f"{device.cache_dir}/inductor-cache",
            "HF_HOME": f"{device.cache_dir}/hf-home",
        })
    return env


@dataclass
class _LMCacheWiring:
    """What turning LMCache on adds to a cell; all ``None`` when it is off."""

    kv_transfer_config: dict[str, Any] | None = None
    yaml_text: str | None = None
    yaml_path: str | None = None
    redis: RedisSpec | None = None


def _wire_lmcache(cell: Cell, device: DeviceSpec, rt: RuntimeValues, spec: dict[str, Any] | None,
                  argv: list[str], env: dict[str, str], notes: list[str]) -> _LMCacheWiring:
    """Append the KV-transfer flag and LMCache environment to ``argv``/``env`` when ``lmcache=on``.

    Kept in place (mutating the caller's lists) so the flags land at the same position as always: after
    speculation, before the ``vllm.*`` pass-throughs.
    """
    import yaml

    s = cell.settings
    if not as_bool(s["lmcache"], "lmcache"):
        if s["redis_maxmemory"] != "off":
            raise PlanError("redis_maxmemory needs lmcache=on")
        return _LMCacheWiring()
    kv: dict[str, Any] = {
        "kv_connector": "LMCacheConnectorV1",
        "kv_role": "kv_both",
        # distinct per cell so two servers on one host (Ray) do not share LMCache's RPC socket names
        "kv_connector_extra_config": {"lmcache_rpc_port": cell.index},
    }
    if s["kv_load_failure_policy"] != "default":
        kv["kv_load_failure_policy"] = s["kv_load_failure_policy"]
    argv += ["--kv-transfer-config", _compact(kv)]
    yaml_text = yaml.safe_dump(lmcache_config(s, rt), sort_keys=False)
    yaml_path = f"{rt.cell_dir}/lmcache.yaml"
    env["LMCACHE_CONFIG_FILE"] = yaml_path
    if device.kind == "cpu":
        env[CPU_CONNECTOR_ENV] = "1"  # activates specdiag's pure-torch LMCache CPU connector (vLLM plugin)
    redis = redis_spec(s, device, rt)
    if spec and spec["method"] == "draft_model":
        notes.append("LMCache 0.5.6 counts no draft layers for method=draft_model: expect an IndexError "
                     "at the first store (crash signature B)")
    return _LMCacheWiring(kv_transfer_config=kv, yaml_text=yaml_text, yaml_path=yaml_path, redis=redis)


def _apply_passthroughs(settings: dict[str, str], argv: list[str], env: dict[str, str]) -> None:
    """Append ``vllm.<flag>`` settings as server flags and ``env.<NAME>`` settings as environment, last, so a
    user's explicit pass-through wins over anything computed above."""
    for k, v in settings.items():
        if k.startswith("vllm."):
            flag = "--" + k.split(".", 1)[1]
            low = v.lower()
            if low in ("true", "on"):
                argv.append(flag)
            elif low in ("false", "off"):
                argv.append("--no-" + flag[2:])
            else:
                argv += [flag, v]
        elif k.startswith("env."):
            env[k.split(".", 1)[1]] = v


def materialise(cell: Cell, device: DeviceSpec, rt: RuntimeValues | None = None) -> CellSpec:
    """The argument list, environment additions and LMCache YAML for ``cell`` on ``device``."""
    rt = rt or RuntimeValues()
    s = cell.settings
    notes: list[str] = []
    argv = _server_argv(s, device, rt)
    spec = speculative_config(s, device.model)
    if spec:
        argv += ["--speculative-config", _compact(spec)]
    env = _server_env(device, rt)
    lm = _wire_lmcache(cell, device, rt, spec, argv, env, notes)
    _apply_passthroughs(s, argv, env)
    return CellSpec(argv=argv, env=env, lmcache_yaml=lm.yaml_text, lmcache_yaml_path=lm.yaml_path,
                    redis=lm.redis, speculative_config=spec, kv_transfer_config=lm.kv_transfer_config,
                    notes=notes)
