"""What users paste: indented code blocks, grep prefixes, blank lines, terminal-wrapped records, wrappers
behind grep. Each is recognised per line and gives the records of the original log."""

from __future__ import annotations

import json

import pytest
from logbuilder import lmc, lookup, retrieve, shortfall_pair, vllm, write

from specdiag.engine import analyze
from specdiag.ingest import expand_inputs, iter_records
from specdiag.ingest.rows import esc_cut_at_end

REQ = "chatcmpl-6b7537a4f151245a"
PAIR = shortfall_pair(REQ, 0, 16, proc="Worker_TP2 pid=767", color=False)


def records(path) -> list:
    src = expand_inputs([str(path)])[0]
    return list(iter_records(src))


def digest(recs) -> list[tuple]:
    return [(r.kind, r.level, r.text, r.origin.key, r.file, r.src_line) for r in recs]


def original(tmp_path, lines) -> list[tuple]:
    return digest(records(write(tmp_path / "orig.log", lines)))


@pytest.mark.parametrize("paste", [
    lambda i, s: "    " + s,                              # chat code block
    lambda i, s: "\t" + s,
    lambda i, s: "> " + s,                                # quoted reply
    lambda i, s: f"{i + 120}:" + s,                       # grep -n
    lambda i, s: f"serve.log:{i + 120}:" + s,             # grep -H -n
    lambda i, s: f"logs/node-2.log-{i + 120}-" + s,       # grep -H -n context line
    lambda i, s: "serve.log:" + s,                        # grep -H
    lambda i, s: f"serve.log:{i + 7}:" + json.dumps({"log": s + "\n", "stream": "stderr", "time": "2025-12-19T02:07:16Z"}),
    lambda i, s: f"* `{s}`",                              # an issue's bullet list of inline-code lines
    lambda i, s: f"``{s}``  ",
    lambda i, s: f"> - ` {s} `",
])
def test_pasted_lines_give_the_records_of_the_original(tmp_path, paste) -> None:
    lines = [lookup(REQ, 5888, 5632, 5616, color=False), *PAIR]
    pasted = write(tmp_path / "paste.log", [paste(i, s) for i, s in enumerate(lines)])
    assert digest(records(pasted)) == original(tmp_path, lines)


def test_indented_two_line_paste_gives_the_arithmetic(tmp_path) -> None:
    rep = analyze([write(tmp_path / "p.log", ["    " + s for s in PAIR])]).to_dict()
    (f,) = [f for f in rep["findings"] if f["rule"] == "KV001"]
    assert (f["measurements"]["expected_tokens"], f["measurements"]["retrieved_tokens"]) == (16, 0)
    assert f["measurements"]["ranks"] == ["TP2"]


def test_blank_lines_between_records_change_nothing(tmp_path) -> None:
    lines = [lookup(REQ, 5888, 5632, 5616, color=False), *PAIR]
    spaced = write(tmp_path / "spaced.log", [x for s in lines for x in (s, "", "   ")])
    assert digest(records(spaced)) == original(tmp_path, lines)


def test_indented_traceback_keeps_its_frames(tmp_path) -> None:
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "3: not a grep prefix",
             "IndexError: index 2 is out of bounds for dimension 1 with size 2"]
    (rec,) = records(write(tmp_path / "t.log", ["    " + s for s in lines]))
    assert rec.kind == "traceback" and rec.end_line == 4
    assert '  File "a.py"' in rec.text and "3: not a grep prefix" in rec.text and "IndexError" in rec.text


def test_grep_context_lines_are_recognised_by_consecutive_numbers(tmp_path) -> None:
    lines = ["41:" + lmc("Failed to load: Traceback (most recent call last):", level="ERROR", loc=None, color=False),
             '42-  File "cache_engine.py", line 703, in retrieve',
             "43-ValueError: boom (cache_engine.py:703:lmcache.v1.cache_engine)"]
    (rec,) = records(write(tmp_path / "g.log", lines))
    assert rec.kind == "lmcache" and rec.src_line == 703 and rec.end_line == 3
    assert '  File "cache_engine.py"' in rec.text and not any(s[:3] in rec.text for s in ("42-", "43-"))


@pytest.mark.parametrize("width", [80, 100, 120])
def test_terminal_wrapped_prefixed_record_is_joined_to_its_process(tmp_path, width) -> None:
    full = retrieve(REQ, 0, 256, 5888, proc="Worker_TP2 pid=767", color=False)
    pieces = [full[i : i + width] for i in range(0, len(full), width)]
    (rec,) = records(write(tmp_path / "w.log", pieces))
    ((want,),) = [records(write(tmp_path / "o.log", [full]))]
    assert (rec.text, rec.origin.key, rec.src_line) == (want.text, want.origin.key, 985)
    assert rec.end_line == len(pieces)


def test_terminal_wrapped_unprefixed_lmcache_record_keeps_its_numbers(tmp_path) -> None:
    full = retrieve(REQ, 0, 256, 5888, proc=None, color=False).replace("proc", "")
    pieces = [full[i : i + 100] for i in range(0, len(full), 100)]
    (rec,) = records(write(tmp_path / "w.log", pieces))
    assert "Retrieved 0 out of 256 required tokens (from 5888 total tokens)" in rec.text
    assert rec.src_line == 985


def test_wrapped_line_does_not_swallow_the_next_process_line(tmp_path) -> None:
    cut = lmc("Request x failed to load 2048 tokens across 128 blocks", level="WARNING", loc=None,
              proc="Worker_TP1 pid=5", color=False)
    lines = [cut, 'INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
             vllm("Engine 000: Avg prompt throughput: 1.0 tokens/s", proc="APIServer pid=1")]
    recs = records(write(tmp_path / "n.log", lines))
    assert [r.kind for r in recs] == ["uvicorn", "vllm", "lmcache"]
    assert recs[2].text.endswith("across 128 blocks")


def test_short_cut_record_is_not_joined_across_processes(tmp_path) -> None:
    lines = [lmc("short", loc=None, proc="Worker_TP1 pid=5", color=False), "a stray print from another process"]
    recs = records(write(tmp_path / "s.log", lines))
    assert [r.text for r in recs if r.kind == "lmcache"] == ["short"]


def test_terminal_wrap_pasted_with_blank_lines_between_is_still_joined(tmp_path) -> None:
    full = retrieve(REQ, 0, 256, 5888, proc="Worker_TP2 pid=767", color=False)
    pieces = [full[:100], "", full[100:200], "", full[200:]]
    (rec,) = records(write(tmp_path / "w.log", pieces))
    assert "Retrieved 0 out of 256 required tokens (from 5888 total tokens)" in rec.text and rec.src_line == 985


def test_record_cut_before_a_different_line_is_not_joined_to_it(tmp_path) -> None:
    cut = retrieve(REQ, 0, 256, 5888, proc="Worker_TP2 pid=767", color=False)[:120]
    lines = [cut, vllm("Engine 000: Avg prompt throughput: 1.0 tokens/s", proc="APIServer pid=1"), "orphan tail text"]
    recs = records(write(tmp_path / "c.log", lines))
    assert [r.text for r in recs if r.kind == "lmcache"] == [records(write(tmp_path / "o.log", [cut]))[0].text]


SPEC = ("SpecDecoding metrics: Mean acceptance length: 2.74, Accepted throughput: 160.70 tokens/s, Drafted "
        "throughput: 277.60 tokens/s, Accepted: 1607 tokens, Drafted: 2776 tokens, Per-position acceptance rate: "
        "0.793, 0.550, 0.395, Avg Draft acceptance rate: 57.9%")


@pytest.mark.parametrize("proc", ["APIServer pid=1", None])
def test_terminal_wrapped_vllm_record_is_joined_row_by_row(tmp_path, proc) -> None:
    full = vllm(SPEC, loc="metrics.py:120", proc=proc)
    rows = [full[i : i + 100] for i in range(0, len(full), 100)]
    assert proc is None or rows[1][:1] == " "  # a cut before a word leaves one leading space
    after = vllm("Engine 000: Avg prompt throughput: 1.0 tokens/s", loc="loggers.py:335", proc=proc)
    recs = records(write(tmp_path / "v.log", rows + [after]))
    assert [r.msg for r in recs] == [SPEC, after.split("] ", 1)[1]]
    assert recs[0].end_line == len(rows)


def test_line_after_a_long_vllm_record_stays_separate_when_it_is_no_row(tmp_path) -> None:
    msg = "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 9.0 tokens/s"
    long = vllm(msg, proc="APIServer pid=1")
    lines = [long, "RuntimeError: CUDA error: an illegal memory access was encountered", long,
             "a line that is longer than the record before it, so it cannot be its next terminal row " * 2,
             long, '  File "a.py", line 1, in <module>', long,
             "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.52it/s]",
             vllm(SPEC, proc="APIServer pid=1"), "a short line after a record too long to have been wrapped"]
    recs = records(write(tmp_path / "v.log", lines))
    assert [r.msg for r in recs if r.kind == "vllm"] == [msg] * 4 + [SPEC]
    assert any(r.kind == "text" and r.msg.startswith("RuntimeError") for r in recs)


def test_vllm_record_is_joined_at_a_width_an_lmcache_record_proved(tmp_path) -> None:
    lmc_full = retrieve(REQ, 0, 256, 5888, proc="Worker_TP2 pid=767", color=False)
    full = vllm(SPEC, loc="metrics.py:120", proc="APIServer pid=1")
    rows = [lmc_full[i : i + 143] for i in range(0, len(lmc_full), 143)] + [full[i : i + 143] for i in range(0, len(full), 143)]
    recs = records(write(tmp_path / "v.log", rows))
    assert [r.kind for r in recs] == ["lmcache", "vllm"] and recs[1].msg == SPEC


def test_headerless_print_after_a_vllm_line_of_no_terminal_width_stays_apart(tmp_path) -> None:
    lines = [vllm("\treserved_cpus=[]", loc="ompmultiprocessing.py:185", proc="EngineCore pid=23969"),
             "Triton is installed, but doesn't include CPU backend. Disabling Triton."]
    (rec,) = records(write(tmp_path / "r.log", lines))
    assert rec.msg == "\treserved_cpus=[]" and rec.end_line == 1


@pytest.mark.parametrize("foreign", [
    "node-1:1234:5685 [7] NCCL INFO threadThresholds 8/8/64 | 256/8/64 | 512 | 512",
    "2026-05-06 08:01:37,674 - myapp.api - DEBUG - cache miss for key user:49654",
    "I0506 08:01:37.123456    77 ProcessGroupNCCL.cpp:1234] [PG 0 Rank 1] comm ready",
    "/usr/lib/python3/dist-packages/transformers/utils/hub.py:128: FutureWarning: Using `X` is deprecated"])
def test_another_programs_line_after_a_vllm_line_of_terminal_width_is_never_its_rest(tmp_path, foreign) -> None:
    """NCCL, an app's logger, glog and Python warnings interleave with vLLM's lines; one that follows a vLLM
    line exactly as wide as a terminal (or as wide as itself: the "two full rows" proof) is not joined."""
    head = vllm("Using ", loc="nvfp4.py:415", proc="EngineCore pid=203")
    lines = []
    for width in (80, len(foreign)):
        line = head + "x" * (width - len(head))
        lines += [line, foreign[:width]]
    recs = records(write(tmp_path / "f.log", lines))
    vl = [r for r in recs if r.kind == "vllm"]
    assert [r.msg for r in vl] == [lines[0].split("] ", 1)[1], lines[2].split("] ", 1)[1]]
    assert all(r.end_line == r.line for r in vl)


# ---- terminal rows narrower than 80 columns, behind kubectl, cut inside headers / escapes (tests/paste_probe.py) --
def _cut(line: str, width: int) -> list[str]:
    return [line[i : i + width] for i in range(0, len(line), width)]


def _one(tmp_path, rows: list[str], name: str = "w.log"):
    recs = [r for r in records(write(tmp_path / name, rows)) if r.kind in ("lmcache", "vllm")]
    assert len(recs) == 1, [(r.kind, r.text[:60]) for r in recs]
    return recs[0]


@pytest.mark.parametrize("width", [40, 60, 72])
@pytest.mark.parametrize("proc", ["Worker_TP2 pid=767", None])
def test_rows_narrower_than_80_columns_are_rejoined_with_their_numbers(tmp_path, width, proc) -> None:
    """At 40 columns the header itself is cut (``[2026-05-06 15:5``): the cut header proves the width."""
    full = PAIR[1] if proc else PAIR[1].split(") ", 1)[1]
    rec = _one(tmp_path, _cut(full, width))
    assert rec.text == "Num retrieved tokens: 0, num expected tokens: 16" and rec.src_line == 884
    assert rec.end_line == len(_cut(full, width))


@pytest.mark.parametrize("width", [40, 60, 72, 80, 100])
def test_kubectl_prefixed_rows_are_rejoined_whether_the_app_or_the_terminal_cut_them(tmp_path, width) -> None:
    full = retrieve(REQ, 0, 256, 5888, proc="Worker_TP2 pid=767", color=False)
    pod = "[pod/vllm-0/vllm] "
    for rows in ([pod + r for r in _cut(full, width)], _cut(pod + full, width)):  # app cut, then terminal cut
        rec = _one(tmp_path, rows)
        assert "Retrieved 0 out of 256 required tokens (from 5888 total tokens)" in rec.text
        assert (rec.src_line, rec.origin.deployment, rec.origin.tp) == (985, "k8s:pod/vllm-0/vllm", 2)


def test_cut_inside_an_ansi_escape_loses_neither_the_escape_rest_nor_the_text(tmp_path) -> None:
    full = shortfall_pair(REQ, 0, 16, proc="Worker_TP2 pid=767")[1]  # coloured, as LMCache writes it
    widths = [w for w in range(40, 80) if any(esc_cut_at_end(r.encode()) >= 0 for r in _cut(full, w))]
    assert len(widths) >= 4  # the cut falls inside an escape at these widths
    for width in widths:
        rec = _one(tmp_path, _cut(full, width), f"e{width}.log")
        assert rec.text == "Num retrieved tokens: 0, num expected tokens: 16" and rec.src_line == 884


def test_row_cut_right_after_the_process_prefixes_is_rejoined(tmp_path) -> None:
    prefix = "(EngineCore_DP0 pid=2210) (RayWorkerWrapper pid=731, ip=10.4.0.17) "
    full = lmc("Request cmpl-1 failed to load 2048 tokens across 128 blocks", level="WARNING",
               loc="vllm_v1_adapter.py:964", proc=None, color=False)
    rec = _one(tmp_path, _cut(prefix + full, len(prefix)))
    assert rec.text == "Request cmpl-1 failed to load 2048 tokens across 128 blocks"
    assert rec.origin.host == "10.4.0.17" and rec.src_line == 964


def test_row_cut_between_the_level_colon_and_the_message_adds_no_space(tmp_path) -> None:
    full = shortfall_pair(REQ, 0, 16, proc="Worker_TP2 pid=767", color=False)[1]
    at = full.index("ERROR:") + len("ERROR:")
    for rows in ([full[:at], full[at:]], [full[: at + 1], full[at + 1 :]]):
        rows = [rows[0], *_cut(rows[1], at + (len(rows[0]) - at))]
        rec = _one(tmp_path, rows)
        assert rec.text == "Num retrieved tokens: 0, num expected tokens: 16"


@pytest.mark.parametrize("width", [60, 72, 90])
def test_vllm_record_at_an_unlisted_width_is_joined_on_two_full_rows(tmp_path, width) -> None:
    full = vllm(SPEC, loc="metrics.py:120", proc="APIServer pid=1")
    rec = _one(tmp_path, _cut(full, width))
    assert rec.msg == SPEC


# ---- a wrong join is worse than a missed one ----------------------------------------------------------------
def test_cut_header_is_not_completed_by_another_process_line(tmp_path) -> None:
    other = lmc("Stored 256 out of total 256 tokens", loc="cache_engine.py:400", proc="Worker_TP3 pid=768", color=False)
    lines = ["(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERR", other]
    recs = records(write(tmp_path / "h.log", lines))
    lm = [r for r in recs if r.kind == "lmcache"]
    assert [(r.origin.tp, r.text) for r in lm] == [(3, "Stored 256 out of total 256 tokens")]


def test_cut_header_is_not_completed_by_a_row_of_another_pod(tmp_path) -> None:
    full = PAIR[1]
    rows = _cut(full, 40)
    pasted = ["[pod/vllm-0/vllm] " + rows[0], "[pod/vllm-1/vllm] " + rows[1], *("[pod/vllm-0/vllm] " + r for r in rows[2:])]
    recs = records(write(tmp_path / "p.log", pasted))
    assert not any(r.kind == "lmcache" and "Num retrieved tokens: 0" in r.text for r in recs)


def test_wrapped_record_is_not_joined_to_a_row_of_another_pod(tmp_path) -> None:
    full = retrieve(REQ, 0, 256, 5888, proc="Worker_TP2 pid=767", color=False)
    rows = _cut(full, 72)
    pasted = ["[pod/vllm-0/vllm] " + rows[0], "[pod/vllm-1/vllm] " + rows[1]]
    recs = [r for r in records(write(tmp_path / "p.log", pasted)) if r.kind == "lmcache"]
    assert len(recs) == 1 and recs[0].text == rows[0].split("LMCache INFO: ", 1)[1].rstrip()


def test_cut_header_that_nothing_completes_is_read_as_it_was(tmp_path) -> None:
    for tail in (["hello world, a line of no record at all"], []):
        lines = ["(Worker_TP2 pid=767) [2026-05-06 15:56:03,745] LMCache ERR", *tail]
        recs = records(write(tmp_path / "t.log", lines))
        assert not any(r.kind == "lmcache" for r in recs)
        src = expand_inputs([str(tmp_path / "t.log")])[0]
        list(iter_records(src))
        assert src.stats.lines == len(lines)


def test_two_complete_records_of_the_same_width_stay_two(tmp_path) -> None:
    a = lmc("Stored 256 out of total 256 tokens", loc="cache_engine.py:400", proc="Worker_TP2 pid=767", color=False)
    b = lmc("Stored 512 out of total 512 tokens", loc="cache_engine.py:400", proc="Worker_TP2 pid=767", color=False)
    c = vllm("Engine 000: Avg prompt throughput: 1.0 tokens/s", proc="APIServer pid=1")
    d = vllm("Engine 000: Avg prompt throughput: 2.0 tokens/s", proc=None)
    recs = records(write(tmp_path / "s.log", [a, b, c, d]))
    assert len(a) == len(b) and [r.kind for r in recs] == ["lmcache", "lmcache", "vllm", "vllm"]


def test_vllm_record_and_a_print_of_another_length_stay_apart_at_any_width(tmp_path) -> None:
    line = vllm("Avg prompt throughput: 1.0 tokens/s, Running: 1 reqs", proc="APIServer pid=1")
    assert len(line) not in (80, 100, 120)
    recs = records(write(tmp_path / "p.log", [line, "a print of some other length"]))
    assert [r.msg for r in recs if r.kind == "vllm"] == [line.split("] ", 1)[1]]


@pytest.mark.parametrize("wrapper", ["Dez 03 10:00:00 gpu-node-7 python3[2211]: ", "2025-12-01T09:01:00.000000Z "])
def test_row_cut_inside_a_collector_prefix_is_rejoined(tmp_path, wrapper) -> None:
    full = wrapper + PAIR[1]
    rows = _cut("[pod/vllm-0/vllm] " + full, 40) if wrapper[0].isdigit() else _cut(full, 40)
    assert not rows[0].endswith(wrapper[-2:])  # the cut falls inside the collector's prefix
    rec = _one(tmp_path, rows)
    assert rec.text == "Num retrieved tokens: 0, num expected tokens: 16" and rec.origin.tp == 2
    assert rec.origin.deployment == ("k8s:pod/vllm-0/vllm" if wrapper[0].isdigit() else "host:gpu-node-7")


def test_cut_collector_prefix_that_nothing_completes_stays_text(tmp_path) -> None:
    lines = ["Dez 03 10:00:00 gpu-node-7 python3[2211]", "Dez 03 10:00:01 gpu-node-7 python3[2211]: hello"]
    recs = records(write(tmp_path / "j.log", lines))
    assert not [r for r in recs if r.kind in ("lmcache", "vllm")]


@pytest.mark.parametrize(("line", "inner"), [
    (b"`x`", b"x"), (b"``a `b` c``", b"a `b` c"), (b"` x `\r", b"x"), (b"```x```", b"x"), (b"`  `", b"  "),
    (b"```", None), (b"```bash", None), (b"`x", None), (b"x`", None), (b"````x````", None), (b"`x``", None),
    (b"``", None), (b"`", None),
])
def test_a_code_span_is_the_whole_line_between_matching_backticks(line, inner) -> None:
    from specdiag.ingest.wrappers import code_span

    assert code_span(line) == inner


def test_a_code_span_holding_no_record_is_left_as_it_is(tmp_path) -> None:
    """Only a span that holds a record is unwrapped: a bullet of prose in backticks stays another line."""
    pasted = write(tmp_path / "paste.log", ["* `pip install lmcache==0.3.12`", "`ERROR: not an envelope`"])
    assert [r.kind for r in records(pasted)] == []


@pytest.mark.parametrize("outer", ["    ", "> ", "[pod/vllm-0/vllm] "])
def test_an_error_a_terminal_cut_at_120_columns_is_joined_under_the_pastes_wrapper(tmp_path, outer) -> None:
    """A paste that indents, quotes or prefixes every row of what a 120-column terminal cut: the record's
    first row is 120 + the wrapper wide, which no terminal is; the wrapper on the next row tells the width."""
    line = vllm("Dumping input data for V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-32B', "
                "speculative_config=None, tokenizer='Qwen/Qwen3-32B', ", level="ERROR", loc="dump_input.py:69",
                proc="EngineCore_DP0 pid=820")
    rows = [line[:120], line[120:]]
    assert len(rows[0]) == 120 and 0 < len(rows[1]) < 120
    pasted = write(tmp_path / "paste.log", [outer + row for row in rows])
    [got] = records(pasted)
    [want] = records(write(tmp_path / "orig.log", [line]))
    assert (got.level, got.msg, got.file, got.src_line) == (want.level, want.msg, want.file, want.src_line)


def test_the_blocks_width_test_admits_every_row_the_reader_could_join_under_a_wrapper() -> None:
    """``blocks`` asks before reading a row (its wrapper unknown) what ``LineReader`` decides after it: the
    first must hold wherever the second can, or a row the reader would join is counted unread."""
    from types import SimpleNamespace

    from specdiag.ingest.joiner import TERMINAL_WIDTHS, maybe_under_wrapper, under_wrapper

    for level in ("ERROR", "WARNING", "INFO"):
        held = SimpleNamespace(level=level)
        for width in range(40, 280):
            for row in range(1, width + 1):
                joins = any(under_wrapper(held, width, outer, TERMINAL_WIDTHS) for outer in range(1, row))
                assert not joins or maybe_under_wrapper(held, width, row, TERMINAL_WIDTHS), (level, width, row)


@pytest.mark.parametrize("record", [
    "(EngineCore_1 pid=31723) ERROR 08-25 16:35:26 [core.py:398] EngineCore encountered a fatal error.",
    "ERROR 08-25 16:35:26 [core.py:398] EngineCore encountered a fatal error.",  # no anchor but the bar's '%|'
])
def test_a_record_glued_to_a_progress_bar_is_read(tmp_path, record) -> None:
    """An offline run's tqdm bar and a record on one line, the CR between them lost in the paste (vLLM issue
    #23534): the record after the bar's ``[…]`` is read as if the CR had cut the line."""
    from specdiag.engine import analyze

    bar = "Processed prompts:  75%|#####3 | 3/4 [00:41<00:09,  9.93s/it, est. speed input: 537.68 toks/s]"
    pasted = write(tmp_path / "paste.log", [bar.replace(" 75%", "100%"), bar + record])
    [got] = [r for r in records(pasted) if r.kind == "vllm"]
    [want] = [r for r in records(write(tmp_path / "orig.log", [record])) if r.kind == "vllm"]
    assert (got.level, got.msg, got.file, got.src_line, got.line) == (want.level, want.msg, want.file, want.src_line, 2)
    report = analyze([pasted])
    assert [f.rule for f in report.findings] == ["SRV001"] and report.inputs[0].get("cr_line_ends") is None
