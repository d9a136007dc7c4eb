"""KV014: LMCache's own warning that it shares KV across processes while the chunk hash is salted per process
is a finding, not 'no problem found' (the excerpt of LMCache issue #2581's kind: three startup lines)."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule, write_paste

W = "(Worker_TP1 pid=180863) [2026-02-10 10:49:06,460] LMCache "
BUILTIN = (W + "WARNING: Using builtin hash without PYTHONHASHSEED set. For production environments (non-testing "
           "scenarios), you MUST set PYTHONHASHSEED to ensure consistent hashing across processes. Example: export "
           "PYTHONHASHSEED=0 (token_database.py:143:lmcache.v1.token_database)")
SHARED = (W + "WARNING: Centralized cache sharing detected but PYTHONHASHSEED not set. For consistent caching, set: "
          "export PYTHONHASHSEED=0 before the engine starts. (token_database.py:257:lmcache.v1.token_database)")


def _findings(tmp_path: Path, lines: list[str]) -> dict:
    return findings_by_rule(write_paste(tmp_path, lines))


def test_shared_caching_without_a_hash_seed_is_a_warning_with_the_fix(tmp_path):
    found = _findings(tmp_path, [BUILTIN, W + "INFO: Using hash algorithm: builtin (token_database.py:84:x)", SHARED])
    kv = found["KV014"]
    assert kv.severity == "warning" and kv.causes[0].id == "hash-inconsistency"
    assert [e.line for e in kv.evidence] == [1, 3]
    assert "PYTHONHASHSEED" in kv.next_steps[0]
    assert "LOG002" not in found  # both warnings are read by the finding


def test_the_builtin_hash_warning_alone_is_no_sharing(tmp_path):
    assert "KV014" not in _findings(tmp_path, [BUILTIN])


TRACE = ("(EngineCore_DP0 pid={pid}) [2026-01-28 04:45:46,523] LMCache DEBUG: [HASH_GENERATION] "
         "prefix_hash=-5282990986457227702, tokens_len=256, tokens_preview=(39165, 99212, 101537), extra_keys=None, "
         "PYTHONHASHSEED={seed}, result_hash={result} (token_database.py:246:lmcache.v1.token_database)")


def test_two_processes_hashing_the_same_chunk_differently_is_the_proof(tmp_path):
    """LMCache issue #2511's kind: prefill and decode traced the same inputs, same seed, different results."""
    kv = _findings(tmp_path, [TRACE.format(pid=83274, seed=0, result=-1983622685967036160),
                              TRACE.format(pid=83411, seed=0, result=-3755946580118951140)])["KV014"]
    assert kv.causes[0].id == "hash-inconsistency" and kv.causes[0].confidence == 0.9
    assert kv.measurements["results"] == ["-1983622685967036160", "-3755946580118951140"]
    assert "hash(None)" in kv.summary and kv.next_steps[0].startswith("The seed is already the same (0)")


def test_the_same_result_in_two_processes_is_no_finding(tmp_path):
    lines = [TRACE.format(pid=pid, seed=0, result=-1983622685967036160) for pid in (83274, 83411)]
    assert "KV014" not in _findings(tmp_path, lines)
