#!/usr/bin/env python3
"""Generate ``examples/dynamic-k-stale-draft/serve.log`` (synthetic, deterministic).

A vLLM 0.28 server on the vllm-metal platform plugin before its PR #716: ``draft_model`` speculation with a
dynamic-K schedule ``[[1, 1, 3], [2, 64, 0]]`` (K=3 for a single request, no speculation from two up).
Traffic alternates between one request and bursts of 2–4; after each burst (K=0: no SpecDecoding line)
the draft model's KV cache is stale and acceptance drops until the prompts turn over.

    python scripts/gen_sd_example.py [OUT] [--steady]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "sd"))

import sdgen  # noqa: E402


def build(steady: bool = False, seed: int = 23) -> str:
    rng = random.Random(seed)
    rates, running = [], []
    for cycle in range(5):
        n_before = 5 + cycle % 3
        rates += sdgen.noisy(rng, 0.71, n_before, 0.04)
        running += [1] * n_before
        burst = 2 + cycle % 3
        rates += [None] * burst
        running += [rng.randint(2, 4) for _ in range(burst)]
        stale = [0.31, 0.27, 0.36] if not steady else [0.70, 0.72, 0.69]
        rates += [max(0.0, x + rng.uniform(-0.03, 0.03)) for x in stale]
        running += [1] * 3
        rates += sdgen.noisy(rng, 0.71, 4, 0.04)
        running += [1] * 4
    sc = sdgen.Scenario(era="0.25", method="draft_model", model="/models/Qwen3-4B", draft="/models/Qwen3-0.6B", k=3,
                        schedule=[[1, 1, 3], [2, 64, 0]], rates=rates, running=running, drafted=420, seed=seed,
                        prefix=[0.0] * len(rates), start=(9, 4, 14, 30, 0))
    text = sdgen.make_log(sc).replace("v0.25.0", "v0.28.0").replace("version 0.25.0", "version 0.28.0")
    text = text.replace("[loggers.py:273]", "[loggers.py:310]")
    lines = text.splitlines()
    head, body = lines[:4], lines[4:]
    t0 = sdgen.ts(sc, 0, -55)
    head += [
        f"(APIServer pid=4410) WARNING {t0} [vllm.py:920] Dynamic speculative decoding changes the target verification "
        "length at runtime. Overriding cudagraph_mode from FULL_AND_PIECEWISE to PIECEWISE for reliability.",
        f"(EngineCore pid=4500) INFO {t0} [draft_model_proposer.py:230] Draft model loaded for speculative decoding: "
        "/models/Qwen3-0.6B (layers=28, kv_heads=8, head_dim=128, patched=28, committed_blocks=512, scratch_blocks=16)",
        f"(APIServer pid=4410) INFO {sdgen.ts(sc, 0, -20)} [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000",
    ]
    out = []
    port = 51000
    for ln in body:
        out.append(ln)
        if "SpecDecoding" in ln or ("Running: " in ln and rng.random() < 0.5):
            for _ in range(rng.randint(0, 2)):
                port += rng.randint(1, 9)
                out.append(f'(APIServer pid=4410) INFO:     127.0.0.1:{port} - "POST /v1/completions HTTP/1.1" 200 OK')
    return "\n".join(head + out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "examples" / "dynamic-k-stale-draft" / "serve.log"))
    ap.add_argument("--steady", action="store_true", help="the control: acceptance unaffected by K=0 stretches")
    a = ap.parse_args()
    Path(a.out).write_text(build(a.steady))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
