"""Ingest: wrappers, colours, prefixes of every era, multi-line joins, compression and damaged input."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import pytest
from logbuilder import lmc, vllm

from specdiag.ingest import InputError, expand_inputs, iter_records
from specdiag.ingest.origin import OriginCache


def records(path) -> list:
    src = expand_inputs([str(path)])[0]
    return list(iter_records(src)), src.stats


def test_lmcache_line_with_colours_is_one_record_with_suffix_removed(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_text(lmc("Num retrieved tokens: 1, num expected tokens: 2", level="ERROR", proc="Worker_TP2 pid=767") + "\n")
    (rec,), stats = records(p)
    assert rec.kind == "lmcache" and rec.level == "ERROR"
    assert rec.msg == "Num retrieved tokens: 1, num expected tokens: 2"
    assert (rec.file, rec.src_line, rec.logger) == ("vllm_v1_adapter.py", 882, "lmcache.integration.vllm.vllm_v1_adapter")
    assert rec.origin.rank_label == "TP2" and rec.origin.pid == 767
    assert stats.recognized == 1


def test_escless_colour_residue_is_stripped(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_text(lmc("Reqid: r1, Total tokens 10, LMCache hit tokens: 0, need to load: 0", residue=True,
                     proc="EngineCore_DP0 pid=1") + "\n")
    (rec,), _ = records(p)
    assert rec.kind == "lmcache" and rec.msg.startswith("Reqid: r1")


@pytest.mark.parametrize("prefix,label,role", [
    ("(VllmWorker rank=3 pid=11) ", "TP3", "Worker"),          # 0.8.5-0.9.x
    ("(VllmWorker TP1 pid=11) ", "TP1", "Worker"),             # 0.10.1
    ("(VllmWorker PP1_TP0 pid=11) ", "PP1_TP0", "Worker"),     # 0.10.1
    ("(Worker_TP5 pid=11) ", "TP5", "Worker"),                 # 0.10.2+
    ("(Worker_PP1_TP0 pid=11) ", "PP1_TP0", "Worker"),
    ("(Worker_DP1_TP2 pid=11) ", "DP1_TP2", "Worker"),
    ("(Worker pid=11) ", "TP0", "Worker"),                     # single worker
    ("(EngineCore_DP0 pid=11) ", None, "EngineCore"),
    ("(EngineCore pid=11) ", None, "EngineCore"),
    ("(APIServer pid=11) ", None, "APIServer"),
])
def test_process_prefixes_of_every_era(prefix, label, role) -> None:
    origin, rest = OriginCache().peel((prefix + "INFO 05-06 15:56:03 [x.py:1] hello").encode())
    assert origin.rank_label == label and origin.role == role
    assert rest == b"INFO 05-06 15:56:03 [x.py:1] hello"


def test_ray_nested_prefix_keeps_host_and_worker() -> None:
    origin, rest = OriginCache().peel(b"(EngineCore_DP0 pid=2210) (RayWorkerWrapper pid=731, ip=10.4.0.17) [2026")
    assert origin.host == "10.4.0.17" and origin.pid == 731 and origin.role == "Worker"
    assert rest == b"[2026"


@pytest.mark.parametrize("wrap", [
    lambda s: "2026-05-06T15:56:03.745518223Z " + s,                                   # docker/kubectl --timestamps
    lambda s: "[pod/vllm-0/vllm] 2026-05-06T15:56:03.745Z " + s,                       # kubectl --prefix --timestamps
    lambda s: "2026-05-06T15:56:03+0100 gpu-node-3 vllm[88213]: " + s,                # journald short-iso
    lambda s: "mai 06 15:56:03 gpu-node-3 bash[88213]: " + s,                          # journald short (localised)
    lambda s: "vllm-1  | " + s,                                                        # docker compose
    lambda s: json.dumps({"log": s + "\r\n", "stream": "stderr", "time": "2026-05-06T15:56:03.745Z"}),  # json-file
])
def test_outer_wrappers_are_stripped(tmp_path, wrap) -> None:
    lines = [wrap(vllm("Recovered from KV load failure: 1 request(s) rescheduled (768 tokens affected).",
                       level="WARNING", proc="EngineCore_DP0 pid=5")) for _ in range(5)]
    p = tmp_path / "w.log"
    p.write_text("\n".join(lines) + "\n")
    recs, stats = records(p)
    assert [r.kind for r in recs] == ["vllm"] * 5
    assert recs[0].msg.startswith("Recovered from KV load failure")
    assert recs[0].origin.role == "EngineCore"


def test_vllm_031_lines_without_prefix_and_lmcache_lines_unprefixed(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_text("\n".join([
        "(APIServer pid=4410) INFO 03-14 09:15:02 [loggers.py:335] Engine 000: Avg prompt throughput: 1.0 tokens/s",
        lmc("Retrieved 4096 tokens", loc="vllm_v1_adapter.py:992"),
    ]) + "\n")
    recs, stats = records(p)
    assert [r.kind for r in recs] == ["vllm", "lmcache"]
    assert recs[1].origin.pid is None


def test_multiline_lmcache_message_joins_until_suffix(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_text("\n".join([
        "[2026-11-30 00:23:17,394] LMCache ERROR: Failed to initialize LMCacheManager components: Traceback (most recent call last):",
        '  File "/x/lmcache/v1/gpu_connector/__init__.py", line 247, in CreateGPUConnector',
        '    raise RuntimeError(f"No supported {torch_device_type} connector found.")',
        "RuntimeError: No supported cpu connector found.",
        ". System will operate in degraded mode (recompute). (manager.py:107:lmcache.v1.manager)",
        "[2026-11-30 00:23:18,098] LMCache WARNING: Skipping post_init due to previous initialization failure (manager.py:189:lmcache.v1.manager)",
    ]) + "\n")
    recs, _ = records(p)
    assert len(recs) == 2
    assert recs[0].line == 1 and recs[0].end_line == 5 and recs[0].src_line == 107
    assert "No supported cpu connector found" in recs[0].text


def test_raw_traceback_is_one_record(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_text("\n".join([
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "IndexError: index 2 is out of bounds for dimension 1 with size 2",
        "INFO:     127.0.0.1:5 - \"POST /v1/completions HTTP/1.1\" 200 OK",
    ]) + "\n")
    recs, stats = records(p)
    assert recs[0].kind == "traceback" and recs[0].end_line == 3
    assert "IndexError" in recs[0].text
    assert stats.recognized == 4


def test_year_is_inferred_from_lmcache_lines_and_wraps_at_new_year(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_text("\n".join([
        lmc("x", ts="2025-12-31 23:59:59,000"),
        vllm("a", ts="12-31 23:59:59"),
        vllm("b", ts="01-01 00:00:01"),
    ]) + "\n")
    recs, _ = records(p)
    assert recs[1].year == 2025 and recs[2].year == 2026


@pytest.mark.parametrize("opener,name", [(gzip.open, "a.log.gz"), (bz2.open, "a.log.bz2"), (lzma.open, "a.log.xz"),
                                         (gzip.open, "rotated.1")])
def test_compressed_inputs_by_magic_bytes(tmp_path, opener, name) -> None:
    p = tmp_path / name
    with opener(p, "wt") as fh:
        fh.write(lmc("Retrieved 4096 tokens") + "\n")
    recs, stats = records(p)
    assert len(recs) == 1 and stats.errors == []


def test_zstd_input(tmp_path) -> None:
    zstd = pytest.importorskip("zstandard")
    p = tmp_path / "a.log.zst"
    p.write_bytes(zstd.ZstdCompressor().compress((lmc("Retrieved 4096 tokens") + "\n").encode()))
    recs, stats = records(p)
    assert len(recs) == 1


def test_truncated_gzip_keeps_what_was_read_and_says_so(tmp_path) -> None:
    data = gzip.compress(("\n".join(lmc(f"Retrieved {i} tokens") for i in range(20000)) + "\n").encode())
    p = tmp_path / "cut.log.gz"
    p.write_bytes(data[: len(data) // 2])
    recs, stats = records(p)
    assert 0 < len(recs) < 20000
    assert any("truncated" in e for e in stats.errors)


def test_binary_junk_and_nul_bytes_are_skipped_and_counted(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes((lmc("Retrieved 1 tokens") + "\n").encode() + b"\x00\x01\x02junk\x00\n" + bytes(range(128, 256)) * 4 + b"\n")
    recs, stats = records(p)
    assert len(recs) == 1 and stats.skipped == 2
    assert any("skipped" in e for e in stats.errors)


def test_non_utf8_bytes_inside_a_line_do_not_break_parsing(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes((lmc("Retrieved 1 tokens") + "\n").encode().replace(b"Retrieved", b"Retrieved") + b"caf\xe9 latin-1 text\n")
    recs, stats = records(p)
    assert recs[0].kind == "lmcache"


def test_a_50mb_line_is_cut_not_held(tmp_path) -> None:
    p = tmp_path / "long.log"
    with open(p, "wb") as fh:
        fh.write((lmc("Retrieved 1 tokens") + "\n").encode())
        fh.write(b"x" * (50 * 1024 * 1024) + b"\n")
        fh.write((lmc("Retrieved 2 tokens") + "\n").encode())
    recs, stats = records(p)
    assert [r.msg for r in recs if r.kind == "lmcache"] == ["Retrieved 1 tokens", "Retrieved 2 tokens"]
    assert any("cut" in e for e in stats.errors)
    assert stats.lines == 3


def test_empty_file_is_reported(tmp_path) -> None:
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    recs, stats = records(p)
    assert recs == [] and stats.errors == ["empty input"]


def test_missing_file_and_empty_folder_raise_input_errors(tmp_path) -> None:
    with pytest.raises(InputError, match="no such file"):
        expand_inputs([str(tmp_path / "nope.log")])
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="no log files"):
        expand_inputs([str(tmp_path / "d")])
    with pytest.raises(InputError, match="matches no file"):
        expand_inputs([str(tmp_path / "*.zzz")])


def test_folders_recurse_sorted_and_globs_expand(tmp_path) -> None:
    (tmp_path / "b").mkdir()
    for name in ("b/2.log", "1.log", "b/.hidden.log", "expected.json"):
        (tmp_path / name).write_text("x\n")
    assert [s.display for s in expand_inputs([str(tmp_path)])] == [str(tmp_path / "1.log"), str(tmp_path / "b/2.log")]
    assert len(expand_inputs([str(tmp_path / "**" / "*.log")])) == 2


def test_vllm_json_logging_lines_become_vllm_records(tmp_path) -> None:
    obj = {"asctime": "2026-03-14 09:15:02,123", "levelname": "WARNING", "name": "vllm.v1.core.sched.scheduler",
           "processName": "EngineCore", "process": 77, "filename": "scheduler.py", "lineno": 3426,
           "message": "Recovered from KV load failure: 1 request(s) rescheduled (768 tokens affected)."}
    p = tmp_path / "j.log"
    p.write_text((json.dumps(obj) + "\n") * 3)
    recs, _ = records(p)
    assert recs[0].kind == "vllm" and recs[0].level == "WARNING" and recs[0].year == 2026
    assert recs[0].origin.pid == 77 and recs[0].msg.startswith("Recovered from KV load failure")


def test_rotated_files_are_read_oldest_first(tmp_path) -> None:
    for name in ("serve.log", "serve.log.1", "serve.log.2.gz", "other.log"):
        (tmp_path / name).write_text("x\n")
    names = [s.display.rsplit("/", 1)[-1] for s in expand_inputs([str(tmp_path)])]
    assert names == ["other.log", "serve.log.2.gz", "serve.log.1", "serve.log"]


def test_formats_seen_are_reported(tmp_path) -> None:
    p = tmp_path / "a.log"
    p.write_text("\n".join([lmc("Retrieved 1 tokens"), vllm("hello", proc="APIServer pid=1"),
                            'INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK']) + "\n")
    _, stats = records(p)
    assert stats.formats == {"lmcache", "vllm", "uvicorn"}


@pytest.mark.parametrize("ts", ["2026-05-06T15:56:03.745123+00:00", "2026-05-06 15:56:03", "2026-05-06 15:56:03.7"])
def test_lmcache_lines_with_other_timestamp_shapes(tmp_path, ts) -> None:
    p = tmp_path / "a.log"
    p.write_text(f"[{ts}] LMCache ERROR: Num retrieved tokens: 1, num expected tokens: 2 (vllm_v1_adapter.py:882:lmcache.x)\n")
    (rec,), _ = records(p)
    assert rec.kind == "lmcache" and rec.level == "ERROR" and rec.ts.startswith("2026-05-06 15:56:03,")
    assert rec.msg == "Num retrieved tokens: 1, num expected tokens: 2"


def test_a_vllm_header_whose_level_is_padded_is_read(tmp_path) -> None:
    """aws-samples/aws-do-eks #84: a logging format that pads the level (``%(levelname)-8s``) left ``ERROR   08-16 …``
    unread."""
    p = tmp_path / "a.log"
    p.write_text("ERROR   08-16 08:09:28 [worker.py:3004] Potentially invalid KV blocks for unrecognized request r1 "
                 "were retrieved by a decode worker. They may have expired.\n")
    (rec,), _ = records(p)
    assert rec.kind == "vllm" and rec.level == "ERROR" and rec.src_line == 3004


def test_an_lmcache_header_whose_bracket_a_paste_lost_is_read(tmp_path) -> None:
    """vllm-project/production-stack #923: the line pasted in a code span without its opening '['."""
    p = tmp_path / "a.log"
    p.write_text("`2026-04-17 14:52:34,143] LMCache ERROR: Put task failed for key k1: [Errno 32] Broken pipe "
                 "(remote_backend.py:220:lmcache.v1.storage_backend.remote_backend)`\n")
    (rec,), _ = records(p)
    assert rec.kind == "lmcache" and rec.level == "ERROR" and rec.msg.startswith("Put task failed for key k1")


def test_a_line_under_a_vllm_prefix_read_by_another_parser_is_counted_once(tmp_path) -> None:
    """vLLM on Ray: '(EngineCore pid=1879) (raylet) A worker died …' was counted twice ('7 of 6 lines recognised'):
    once for the vLLM prefix, once for the raylet's line."""
    from specdiag.engine import analyze

    p = tmp_path / "a.log"
    p.write_text("(EngineCore pid=1879) (raylet) A worker died or was killed while executing a task by an unexpected "
                 "system error. Worker PID: 5191\n"
                 "(Worker_TP0 pid=7) [rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
                 "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600059 milliseconds\n")
    stats = analyze([str(p)]).inputs[0]
    assert stats["recognized"] == stats["lines"] == 2
