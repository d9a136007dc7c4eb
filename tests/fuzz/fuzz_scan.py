#!/usr/bin/env python3
"""Coverage-guided fuzz target: the compiled scanner (when built) and the Python fallback must agree with
the reference.

    pip install atheris                      # optional; the target skips cleanly without it
    python tests/fuzz/fuzz_scan.py -runs=20000 -max_len=4096 [corpus_dir]

Each input is split by a FuzzedDataProvider into a base line number, one of the generated hot-line
seeds (so that mutations start deep inside the grammar, not at random bytes) and free bytes spliced
into it. Coverage comes from the Python reference, which mirrors the C parser branch for branch, so a
new branch of either is reached by the same inputs. For native (C) coverage and AddressSanitizer, build
the extension with clang first (docs/scanner.md, "Fuzzing"). Without atheris, ``--smoke N`` runs N
seeded random inputs through the same check (what CI does when atheris cannot be installed).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ for scan_cases
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, when run from a checkout

from scan_cases import VLLM, VLLM_HEAD, adversarial_block, hot_line, mutate  # noqa: E402

try:
    import atheris
except ImportError:  # the smoke mode and the skip below work without it
    atheris = None

if atheris is not None:
    with atheris.instrument_imports():  # Python coverage of the reference guides the mutations
        from specdiag.ingest import scan
        from specdiag.ingest.scan_fast import scan_block_fast
else:
    from specdiag.ingest import scan
    from specdiag.ingest.scan_fast import scan_block_fast

#: generated hot lines, plus every vLLM stats / SpecDecoding shape of the cases (the V_STATS / V_SPEC grammar)
SEEDS = [hot_line(random.Random(i)) for i in range(64)] + [VLLM_HEAD[kind] + msg for kind, msg in VLLM]


def check(block: bytes, base: int) -> None:
    """The one property: both implementations return the same ScanResult (and neither raises)."""
    ref = scan.scan_block_py(block, base)
    if scan.IMPLEMENTATION == "c" and scan.scan_block_c(block, base) != ref:
        raise AssertionError(f"compiled scanner differs from the reference on {block[:300]!r}")
    if scan_block_fast(block, base) != ref:
        raise AssertionError(f"Python fallback differs from the reference on {block[:300]!r}")


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    base = fdp.ConsumeIntInRange(0, 1 << 40)
    seed = SEEDS[fdp.ConsumeIntInRange(0, len(SEEDS) - 1)]
    pos = fdp.ConsumeIntInRange(0, len(seed))
    cut = fdp.ConsumeIntInRange(0, 16)
    extra = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 256))
    tail = fdp.ConsumeBytes(fdp.remaining_bytes())
    check(seed[:pos] + extra + seed[pos + cut:] + b"\n" + tail, base)


def smoke(n: int, seed: int = 0) -> int:
    """Random mutations of the seeds, without atheris; returns the number of inputs checked."""
    rng = random.Random(seed)
    for i in range(n):
        if i % 50 == 0:
            check(adversarial_block(rng.randrange(1 << 30), 50), rng.randrange(1 << 40))
            continue
        line = rng.choice(SEEDS)
        for _ in range(rng.randint(1, 4)):
            line = mutate(rng, line)
        check(line + rng.choice([b"", b"\n", b"\n\n"]), rng.randrange(1 << 40))
    return n


def main(argv: list[str]) -> int:
    if len(argv) > 2 and argv[1] == "--smoke":  # without the extension the fallback is still compared
        same = "compiled == reference" if scan.IMPLEMENTATION == "c" else "fallback == reference"
        print(f"fuzz_scan: {smoke(int(argv[2]))} inputs, {same}", file=sys.stderr)
        return 0
    if atheris is None:
        print("fuzz_scan: atheris is not installed; skipping (use --smoke N for a random run)", file=sys.stderr)
        return 0
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
