"""Coverage-guided fuzzing (atheris) of the parser: ingest → events → rules, and the number/config parsers.

Run: ``python tests/fuzz/fuzz_analyze.py -max_total_time=120`` (CI: ``.ci/run`` fuzz step). Seeds are real
corpus lines and template samples (``corpus_lines.py``), mutated. A crash is an exception that escapes, or
one the engine's last line of defence had to catch (a skipped record other than an unusable number, a
failed rule): both are bugs to fix, so both stop the fuzzer with the input saved as ``crash-*``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

with atheris.instrument_imports(include=["specdiag"]):
    from specdiag.context import Context, ContextBuilder
    from specdiag.engine import analyze
    from specdiag.events import FieldError, default_matcher
    from specdiag.ingest import InputError
    from specdiag.metrics.parse import parse_spec_body, parse_stats_body
    from specdiag.observe import RunState
    from specdiag.pyrepr import parse_call_kwargs, parse_dict, value_after
    from specdiag.report.json_report import render_json

from corpus_lines import hostile_log  # noqa: E402
from test_hostile_fuzz import unexpected_failures  # noqa: E402

_DIR = tempfile.mkdtemp(prefix="specdiag-fuzz-")
_LOG = os.path.join(_DIR, "fuzz.log")
TEMPLATES = default_matcher().templates


def _parsers(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    parse_stats_body(text)
    parse_spec_body(text)
    parse_dict(text)
    parse_call_kwargs(text)
    value_after(text, "speculative_config")
    ctx = Context()
    b = ContextBuilder(ctx)
    b._from_args(text)
    b._spec_from_repr(text)
    b.finish(ctx, RunState("fuzz"))
    for t in TEMPLATES:
        try:
            t.match(data)
        except FieldError:
            pass


def test_one_input(data: bytes) -> None:
    if data[:1] == b"\x00":
        _parsers(data[1:])
        return
    with open(_LOG, "wb") as fh:
        fh.write(data)
    try:
        report = analyze([_LOG])
    except InputError:
        return
    bad = unexpected_failures(report)
    if bad:
        raise RuntimeError(bad[0])
    render_json(report)


def main() -> None:
    seeds = tempfile.mkdtemp(prefix="specdiag-seeds-")
    for i in range(24):
        Path(seeds, f"seed{i}").write_bytes(hostile_log(i, 30))
    args = [a for a in sys.argv if a != "--"]
    if not any(not a.startswith("-") for a in args[1:]):
        args.append(seeds)
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
