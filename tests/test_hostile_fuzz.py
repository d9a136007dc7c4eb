"""Property test over ingest → events → rules → renderers with mutated real lines (hypothesis).

Whatever the damage, ``analyze`` returns a report, no rule fails, no record is skipped by an unexpected
exception (a number nobody can use is the one expected reason), and every renderer produces valid output.
Short budget here (``SPECDIAG_FUZZ_EXAMPLES``, default 40); the CI fuzz step runs the atheris target longer.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fuzz"))
from corpus_lines import hostile_log  # noqa: E402

from specdiag.engine import analyze  # noqa: E402
from specdiag.ingest import InputError  # noqa: E402

EXAMPLES = int(os.environ.get("SPECDIAG_FUZZ_EXAMPLES", "40"))


def unexpected_failures(report) -> list[str]:
    """Skipped records and failed rules that an exception other than an unusable number caused."""
    bad = [f"rule {r['rule']}: {r['error']}" for r in report.rules_failed]
    for inp in report.inputs:
        for e in inp["errors"]:
            if "skipped (" in e and "skipped (FieldError" not in e:
                bad.append(e)
            if "reading stopped (" in e:
                bad.append(e)
    return bad


def check_log(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "fuzz.log")
        with open(p, "wb") as fh:
            fh.write(data)
        try:
            report = analyze([p])
        except InputError:  # e.g. zstd magic without the zstandard package: the contract's exit 2
            return
    assert unexpected_failures(report) == []
    from specdiag.report.github import render_github
    from specdiag.report.json_report import render_json
    from specdiag.report.junit import render_junit
    from specdiag.report.markdown import render_markdown
    from specdiag.report.sarif import render_sarif

    json.loads(render_json(report))
    json.loads(render_sarif(report))
    render_markdown(report)
    render_github(report)
    render_junit(report)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=1, max_value=60))
def test_mutated_real_lines_never_break_the_analysis(seed: int, n_lines: int) -> None:
    check_log(hostile_log(seed, n_lines))


def test_a_banner_version_with_thousands_of_digits_is_no_version_not_a_failed_rule() -> None:
    """Found by the test above in a clean-clone run (seed 9058, 25 lines): LMCache's banner mutated to
    'LMCache v0.999…' with 5,000 digits made the context builder fail (int() refuses over 4,300 digits)."""
    from specdiag.fingerprints import release_key

    assert release_key("0." + "9" * 5000 + ".7") == release_key("not a version")
    check_log(hostile_log(9058, 25))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_break_the_analysis(data: bytes) -> None:
    check_log(data)


#: the coverage-guided fuzzer's crash of this stop's CI (seed 1): nothing recognised, so the lines were read again
#: as bare pastes, and LMCache's suffix on the second held a byte beyond UTF-8 in its file name
FUZZ_BARE_SUFFIX = (b"\x1b[32;20m[2026-11-30 01:25:12,633 LMCache INFO:\x1b[0m Reqid: cmpl-b165f50f27327abe-0 od 2048\n"
                    b"Unknown configuration key: max_cpu_size (source: ff27327abe-0-a0ile: /etc/max_cpu_size (sourcfd2c65f, "
                    b"Total tokens 1159, Inference Engine computed tokens: 0, LMCache hit tokens: 0, need to load: 0 "
                    b"\x1b[3m(vllm_\xeev1_adapter.py:1476:lmcache.integration.vllm.vllm_v1_adapter)\x1b[0m\n"
                    b"INFO 05-0ce: fi6 15:56:03 [x.py:1]  le: /etc/max_   ascp")


def test_a_bare_lines_lmcache_suffix_with_a_byte_beyond_utf8_is_read_not_skipped() -> None:
    """A bare line's suffix names its file in bytes; it was decoded strictly ('line 2: skipped
    (UnicodeDecodeError …)', which the engine's last line of defence caught)."""
    check_log(FUZZ_BARE_SUFFIX)
