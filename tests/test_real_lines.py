"""LOG001's reading of real pasted lines no specific rule explains (excerpts under ``tests/real_lines/``)."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule

from specdiag.engine import analyze

HERE = Path(__file__).resolve().parent / "real_lines"


def test_a_glog_format_line_is_told_by_its_file_not_always_a_library_in_vllms_process():
    """production-stack #800: kubectl's own klog line (``portforward.go:424``) was 'a native library loaded into the
    process … Mooncake's transfer engine or store client, NIXL'; marin #2387: the TPU runtime's
    ``tpu_pjrt_client.cc`` line the same."""
    kubectl = findings_by_rule(HERE / "kubectl-portforward-klog-crashloop.log")["LOG001"].next_steps[0]
    assert "Go program" in kubectl and "kubectl describe pod" in kubectl and "Mooncake" not in kubectl
    tpu = findings_by_rule(HERE / "tpu-pjrt-resource-exhausted.log")["LOG001"].next_steps[0]
    assert tpu.startswith("the TPU runtime") and "Mooncake" not in tpu


def test_a_vllm_line_pasted_without_its_time_is_read_where_the_catalog_places_its_message():
    """vLLM #44006: ``ERROR [backend_xgrammar.py:167] Failed to advance FSM …`` ×3, the time cut off by the user,
    was 'nothing recognised' (exit 3): the file is no hand-written template's, but 0.8.5–0.28.0 print this
    message at ERROR from that line."""
    so = findings_by_rule(HERE / "xgrammar-fsm-time-cut.log")["SRV005"]
    assert so.measurements["lines"] == {"fsm": 3} and so.first_seen is None  # no time invented


def test_a_paste_in_caret_notation_is_cut_into_its_records_at_each_caret_m():
    """ByteDance-Seed/seed-oss #10: ``cat -v`` output (``^[[1;36m(APIServer …)^[[0;0m ERROR … inputs^M^[[1;36m…``)
    held seven records on three rows; read as three, the first was 'in no catalogued release'."""
    log = findings_by_rule(HERE / "caret-notation-chat-template.log")["LOG001"]
    assert log.measurements["lines"] == 7
    assert "api-server" in log.summary and "Error in preprocessing prompt inputs'" in log.summary


def test_an_exception_line_quoted_in_a_reply_is_an_error_line():
    """vLLM #13122: ``> ValueError: Prequant BitsAndBytes models with tensor parallelism is not supported.`` (a
    reply's quote) was kept as text at no level: 'no finding', exit 0."""
    srv = findings_by_rule(HERE / "quoted-bnb-tp-refusal.log")["SRV004"]
    assert srv.measurements["message"].startswith("Prequant BitsAndBytes models with tensor parallelism")


def test_an_lmcache_line_after_a_colour_code_cut_at_the_start_of_the_paste_is_read():
    """LMCache #2884: ``1;20m[2026-03-27 10:25:38,265] LMCache ERROR: No GPU context found …`` (the selection began
    inside ``ESC[1;20m``) was not recognised, and its message appeared nowhere in the report."""
    from specdiag.engine import analyze

    report = analyze([str(HERE / "lost-csi-lmcache-mp-no-gpu-context.log")])
    assert [(i["lines"], i["recognized"]) for i in report.inputs] == [(18, 18)]
    assert any("No GPU context found" in f.summary + " ".join(e.text for e in f.evidence) for f in report.findings)


def test_torchruns_rank_prefix_without_its_space_before_an_exception_is_peeled():
    """nvidia-cosmos/cosmos-rl #403: ``[rank1]:ValueError: The decoder prompt (length 16476) is longer than the
    maximum model length of 16384`` was not read: 'no finding', exit 0. It is a refused request (SRV006)."""
    srv = findings_by_rule(HERE / "rank-prefix-without-space.log")["SRV006"]
    assert (srv.measurements["prompt_tokens"], srv.measurements["context_tokens"]) == (16476, 16384)


def test_a_traceback_cut_to_its_code_row_and_exception_is_named_by_the_exception():
    """InternVL #1173: ``[serving_chat.py:222]     raise ValueError(str(e)) from e`` then ``ValueError: can only
    concatenate str (not "list") to str``: the report quoted the code row, and 'concatenate' appeared nowhere."""
    from specdiag.engine import analyze

    report = analyze([str(HERE / "chat-template-valueerror-without-frames.log")])
    assert any("ValueError: can only conc" in f.summary for f in report.findings if f.rule == "LOG001")


def test_a_paste_indented_one_space_more_keeps_its_frames_with_the_exception():
    """vLLM #46949: ``   File ".../shared_offload_region.py", line 100, in __init__`` (three spaces), its code row and
    `` OSError: [Errno 14] Bad address``: 'this exception's traceback is not in the log given'."""
    log = findings_by_rule(HERE / "offload-region-madvise-indented-paste.log")["LOG001"]
    assert "shared_offload_region.py:100 in __init__" in log.next_steps[0]


def test_a_raw_traceback_is_filed_under_the_family_of_the_vllm_module_it_raised_in():
    """vLLM #52614: lm-format-enforcer's `ModuleNotFoundError` raised under vLLM's structured-output backend was
    filed under 'other (anything not covered by a more specific family)'."""
    log = findings_by_rule(HERE / "lmfe-import-in-structured-output.log")["LOG001"]
    assert log.measurements["family"] == "structured-output"


def test_a_grep_for_a_quoted_name_keeps_its_quotes_so_it_matches_the_line():
    """LMCache-Ascend #96: ``AttributeError: 'StorageManager' object has no attribute …``: the next step said
    ``grep -B50 -F 'AttributeError: StorageManager object'``, which the line does not hold (0 matches)."""
    import shlex
    import subprocess

    log = HERE / "layerwise-async-serializer-attributeerror.log"
    step = findings_by_rule(log)["LOG001"].next_steps[0]
    command = step[step.index("grep -B50") : step.index("), whose")]
    argv = shlex.split(command) + [str(log)]
    assert subprocess.run(argv, capture_output=True, text=True).stdout.strip().startswith("AttributeError: 'Storage")


def test_a_gloo_line_in_glogs_format_is_torch_distributeds_not_a_transfer_library():
    """vLLM #7074: '[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed' was 'a native library … Mooncake's
    transfer engine or store client, NIXL'."""
    steps = [f.next_steps[0] for f in analyze([str(HERE / "gloo-loopback-connectfullmesh.log")]).findings
             if f.rule == "LOG001" and "glog" in f.summary]
    assert steps and steps[0].startswith("torch.distributed's Gloo process group") and "Mooncake" not in steps[0]


def test_a_line_under_another_messages_header_keeps_its_quotes_balanced_in_the_headline():
    """LMCache #1702: the headline read "'a line printed under 'Worker error; next: …", cut inside the inner quotes."""
    from specdiag.report.verdict import headline

    head = headline(findings_by_rule(HERE / "controller-compress-500-empty-worker-error.log")["LOG001"])
    assert "under 'Worker error" not in head and head.count("“") == head.count("”")


def test_a_traceback_cut_before_its_exception_line_is_not_said_to_have_raised_at_its_last_frame():
    """vLLM #13978 (a 500 whose traceback the paste stops at starlette's ``raise exc``) and production-stack #418 (the
    router's start cut mid-frames): LOG001 called the last frame shown 'the traceback's innermost frame'."""
    for name, last in (("asgi-traceback-cut-at-reraise.log", "starlette/middleware/errors.py:187"),
                       ("router-traceback-cut-mid-frames.log", "vllm_router/app.py:154")):
        step = findings_by_rule(HERE / name)["LOG001"].next_steps[0]
        assert last in step and "the excerpt is cut there" in step and "innermost" not in step


def test_a_call_that_does_not_fit_its_functions_signature_is_said_to_be_two_releases_out_of_step():
    """LMCache #1707: 'Worker error: LMCacheEngine.lookup() got an unexpected keyword argument 'request_id'' (the
    controller's worker called the engine with a keyword it no longer takes, fixed by PR #2297): LOG001 only said to
    read worker.py:335."""
    log001 = findings_by_rule(HERE / "lmcache-controller-lookup-unexpected-keyword.log")["LOG001"]
    assert log001.next_steps[0].startswith("the call does not fit the function's signature")
    assert "pip show vllm lmcache" in log001.next_steps[0]
    assert log001.next_steps[1].startswith("read ")  # where upstream prints it, still
