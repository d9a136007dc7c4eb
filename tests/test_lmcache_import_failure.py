"""KV004's import failures: LMCache that cannot be imported stops the server; it is no degraded mode. The excerpt
is pasted from vLLM issue #36771 (LMCache built against another torch): it was 'degraded mode', exit 0, with the
fix 'drop use_native' although vLLM had not used its vendored adapter."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule as _by_rule
from pasted import write_paste as _write

HERE = Path(__file__).resolve().parent / "real_kv"
DEV = "(EngineCore_DP0 pid=5) INFO 05-01 10:00:00 [lmcache_connector.py:57] Initializing latest dev LMCache connector"


def _import_error(last: str) -> list[str]:
    return [DEV, "(EngineCore_DP0 pid=5) ERROR 05-01 10:00:01 [core.py:708] EngineCore failed to start.",
            "(EngineCore_DP0 pid=5) ERROR 05-01 10:00:01 [core.py:708] Traceback (most recent call last):",
            '(EngineCore_DP0 pid=5) ERROR 05-01 10:00:01 [core.py:708]   File "/usr/lib/python3/dist-packages/lmcache/'
            'integration/vllm/vllm_v1_adapter.py", line 23, in <module>',
            f"(EngineCore_DP0 pid=5) ERROR 05-01 10:00:01 [core.py:708] {last}"]


def test_an_undefined_torch_symbol_in_lmcaches_ops_is_a_build_for_another_torch():
    kv = _by_rule(HERE / "lmcache-c-ops-undefined-symbol.log")["KV004"]
    assert kv.severity == "error" and "does not start" in kv.summary and "degraded mode (recompute)" not in kv.summary
    assert kv.causes[0].id == "lmcache-torch-abi"


def test_a_missing_vllm_module_is_a_version_pair_and_the_dev_adapter_rules_out_the_vendored_one(tmp_path):
    kv = _by_rule(_write(tmp_path, _import_error("ModuleNotFoundError: No module named 'vllm.utils.torch_utils' "
                                                 "(lmcache)")))["KV004"]
    assert kv.causes[0].id == "lmcache-vllm-version"
    assert kv.measurements["adapter"] == "latest dev"
    vendored = next(c for c in kv.causes if c.id == "vendored-adapter-import")  # ruled out: use_native is off
    assert vendored.confidence <= 0.01 and "latest dev" in vendored.against[0]
