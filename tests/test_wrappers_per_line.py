"""Collector wrappers are recognised per line: a wrapper that starts, stops or changes mid-file is still
stripped, loose shapes are only stripped when validated, and the wrapper's names and years flow on."""

from __future__ import annotations

import json

import pytest
from logbuilder import ACCESS_LINE, config_dump, lmc, lookup, retrieve, shortfall_pair, vllm, write

from specdiag.engine import analyze
from specdiag.ingest import expand_inputs, iter_records
from specdiag.ingest.wrappers import LineUnwrapper, looks_plain
from specdiag.timeutil import is_nominal_year

LINE = lmc("Num retrieved tokens: 0, num expected tokens: 16", level="ERROR", proc="Worker_TP2 pid=767", color=False)


def records(path) -> list:
    src = expand_inputs([str(path)])[0]
    return list(iter_records(src)), src.stats


def docker_json(line: str, time: str = "2026-05-06T15:56:03.745123456Z") -> str:
    return json.dumps({"log": line + "\r\n", "stream": "stderr", "time": time})


@pytest.mark.parametrize("wrapper,deployment,year,style", [
    ("2026-05-06T15:56:03.745518223Z ", None, 2026, "iso-timestamp"),                     # kubectl/docker --timestamps
    ("2025-01-02T03:04:05+01:00 ", None, 2025, "iso-timestamp"),
    ("2026-05-06T15:56:03.745518223Z stderr F ", None, 2026, "cri"),                     # a Kubernetes node's CRI log
    ("2024-05-06T15:56:03.745518223+00:00 stdout P ", None, 2024, "cri"),               # a piece of a split line
    ("[pod/vllm-0/vllm] ", "k8s:pod/vllm-0/vllm", None, "kubectl-prefix"),                # kubectl --prefix
    ("[pod/vllm-0/vllm] 2024-05-06T15:56:03.745Z ", "k8s:pod/vllm-0/vllm", 2024, "iso-timestamp"),
    ("2026-03-14T09:27:01+0100 gpu-node-3 vllm[88213]: ", "host:gpu-node-3", 2026, "journald-iso"),
    ("Dec 19 02:07:16 gpu-node-3 bash[2211352]: ", "host:gpu-node-3", None, "journald"),   # journald short
    ("déc. 19 02:07:16 s-a60003 bash[2211352]: ", "host:s-a60003", None, "journald"),     # French
    ("janv. 03 02:07:16 h1 bash[1]: ", "host:h1", None, "journald"),
    ("févr. 28 02:07:16 h1 bash[1]: ", "host:h1", None, "journald"),
    ("Dez 19 02:07:16 h1 vllm[7]: ", "host:h1", None, "journald"),                       # German
    ("Mär  3 02:07:16 h1 vllm[7]: ", "host:h1", None, "journald"),
    ("dic 19 02:07:16.123456 h1 vllm[7]: ", "host:h1", None, "journald"),               # Spanish, short-precise
    ("дек 19 02:07:16 h1 vllm[7]: ", "host:h1", None, "journald"),                      # Russian
    ("vllm-1  | ", "compose:vllm-1", None, "compose"),                                   # docker compose
    ("[2025-03-10T15:07:20Z] ", None, 2025, "bracketed-timestamp"),                      # a CI runner (Buildkite)
    ("  | [2025-03-10T15:07:20.123+00:00] ", None, 2025, "bracketed-timestamp"),          # its web view's gutter
    ("llama-70b-0.x srv ", "k8s:pod/llama-70b-0.x/srv", None, "stern"),                  # stern
    ("<14>1 2025-05-06T15:56:03.745Z gpu-1 vllm 88213 - - ", "host:gpu-1", 2025, "syslog-5424"),  # RFC 5424
    ('<14>1 2025-05-06T15:56:03Z gpu-1 vllm - ID7 [exampleSDID@32473 iut="3" eventID="10\\"11"] ', "host:gpu-1",
     2025, "syslog-5424"),
])
def test_each_wrapper_is_stripped_with_its_deployment_and_year(wrapper, deployment, year, style) -> None:
    u = LineUnwrapper()
    assert u.strip((wrapper + LINE).encode()) == LINE.encode()
    assert (u.deployment, u.year) == (deployment, year)
    assert style in u.seen


def test_docker_json_file_and_vllm_json_logging_lines_are_decoded() -> None:
    u = LineUnwrapper()
    coloured = lmc("Stored 256 out of total 256 tokens", proc="Worker_TP0 pid=1")
    inner = u.strip(docker_json(coloured, "2025-11-30T08:27:01.004Z").encode())
    assert inner.startswith(b"(Worker_TP0 pid=1) [2026-05-06 15:56:03,745] LMCache INFO: Stored")
    assert b"\x1b" not in inner and u.year == 2025
    obj = {"asctime": "2026-03-14 09:26:53,589", "levelname": "WARNING", "name": "vllm.v1.core", "processName":
           "EngineCore_DP0", "process": 412, "filename": "scheduler.py", "lineno": 2656, "message": "Recovered"}
    assert u.strip(json.dumps(obj).encode()) == b"(EngineCore_DP0 pid=412) WARNING 03-14 09:26:53 [scheduler.py:2656] Recovered"
    assert "vllm-json" in u.seen


@pytest.mark.parametrize("text", [
    "3: foo",                                    # a number and a colon inside a traceback or a dump
    "12-13 foo",
    "vllm | 0.25.0 | ok",                        # a table row, not a compose prefix
    "name | INFO something",
    "ValueError: index out of range",
    '{"a": 1, "b": [2]}',                        # JSON that is no log wrapper
    '{"log": 12}',
    "2026-05-06 15:56:03 hello",                 # a date, but not an RFC 3339 collector timestamp
    '  File "x.py", line 3, in f',               # a traceback frame keeps its indentation
    "Loading safetensors checkpoint shards: 100% Completed | 4/4",
    "[rank0]:[W506 15:56:03.031500 ProcessGroupNCCL.cpp:4561] Warning: x",  # torch's own header, not torchrun's
    "Dec 19 is the day we ship: hooray[1]: no",
    "stdout F not after a time",
    "two words then text",
    "<html> not syslog",
    "pod container INFO but no time",
])
def test_ordinary_text_is_not_taken_for_a_wrapper(text) -> None:
    assert LineUnwrapper().strip(text.encode()) == text.encode()


@pytest.mark.parametrize("line", [
    "(Worker_TP0 pid=1) INFO 05-06 15:56:03 [x.py:1] hi",
    "[2026-05-06 15:56:03,745] LMCache INFO: hi (a.py:1:b)",
    "INFO 05-06 15:56:03 [x.py:1] hi",
    "WARNING 05-06 15:56:03 [x.py:1] hi",
    'INFO:     127.0.0.1:5 - "GET /metrics HTTP/1.1" 200 OK',
])
def test_unwrapped_lines_are_recognised_by_their_first_bytes(line) -> None:
    assert looks_plain(line.encode())


def test_unwrapped_log_never_reaches_the_wrapper_parser(tmp_path, monkeypatch) -> None:
    calls = []
    real = LineUnwrapper.strip
    monkeypatch.setattr(LineUnwrapper, "strip", lambda self, line: calls.append(line) or real(self, line))
    lines = [config_dump("Worker_TP0 pid=100"), lookup("r1", 9000, 8192),
             vllm("Engine 000: Avg prompt throughput: 1.0 tokens/s", proc="APIServer pid=1"), *incident("r1")[1:]]
    recs, _ = records(write(tmp_path / "a.log", lines))
    assert recs and calls == []


def incident(req: str, got: int = 7168, want: int = 8192) -> list[str]:
    """One KV001 shortfall on TP1 of TP=2: lookup, the short retrieve and the error pair."""
    return [lookup(req, want + 808, want), retrieve(req, got, want, want + 808, proc="Worker_TP1 pid=101"),
            *shortfall_pair(req, got, want, proc="Worker_TP1 pid=101")]


def kv001_digest(paths: list[str]) -> tuple:
    """What KV001 found, independent of how it folded the occurrences into findings."""
    rep = analyze(paths).to_dict()
    found = [f for f in rep["findings"] if f["rule"] == "KV001"]
    return (sorted(r for f in found for r in f["measurements"]["request_ids"]),
            sum(f["measurements"]["occurrences"] for f in found),
            sorted({f["causes"][0]["id"] for f in found}))


def merge(digests: list[tuple]) -> tuple:
    return (sorted(r for d in digests for r in d[0]), sum(d[1] for d in digests), sorted({c for d in digests for c in d[2]}))


def rec_digest(path) -> list[tuple]:
    return [(r.kind, r.level, r.text, r.origin.key, r.ts) for r in records(path)[0]]


def test_wrapper_changing_mid_file_gives_the_findings_of_each_part_alone(tmp_path) -> None:
    head = [config_dump("Worker_TP0 pid=100"), config_dump("Worker_TP1 pid=101")]
    # more plain lines than any sniffing window, so a wrapper that starts later must be found per line
    filler = [vllm(f"Engine 000: Avg prompt throughput: {i}.0 tokens/s", loc="loggers.py:335") for i in range(450)]
    plain = head + incident("cmpl-plain-1", 7168, 8192) + filler
    stamped = ["2026-05-06T15:56:03.745518223Z " + ln for ln in head + incident("cmpl-kubectl-2", 6144, 8192)]
    dockered = [docker_json(ln) for ln in head + incident("cmpl-docker-3", 4096, 8192)]
    alone, recs = [], []
    for name, part in (("plain", plain), ("stamped", stamped), ("docker", dockered)):
        path = write(tmp_path / f"{name}.log", part)
        found = kv001_digest([path])
        assert found[1] == 1, name
        alone.append(found)
        recs += rec_digest(path)
    mixed_path = write(tmp_path / "mixed.log", plain + stamped + dockered)
    assert rec_digest(mixed_path) == recs
    mixed = kv001_digest([mixed_path])
    assert mixed == merge(alone)
    assert mixed[0] == ["cmpl-docker-3", "cmpl-kubectl-2", "cmpl-plain-1"]


def test_two_pods_interleaved_by_kubectl_prefix_keep_separate_deployment_keys(tmp_path) -> None:
    lines = []
    for i in range(3):
        for pod in ("vllm-0", "vllm-1"):
            lines.append(f"[pod/{pod}/vllm] " + lmc(f"Reqid: {pod}-{i}, Total tokens 10, LMCache hit tokens: 0, "
                                                   "need to load: 0", proc="EngineCore_DP0 pid=1", color=False))
            lines.append(f"[pod/{pod}/vllm] " + vllm("Engine 000: Avg prompt throughput: 1.0 tokens/s"))
    recs, stats = records(write(tmp_path / "k.log", lines))
    assert len(recs) == 12
    deps = {r.origin.deployment for r in recs}
    assert deps == {"k8s:pod/vllm-0/vllm", "k8s:pod/vllm-1/vllm"}
    for r in recs:
        assert r.origin.deployment.split("/")[1] in r.msg or r.kind == "vllm"
        assert r.origin.source_key == r.origin.deployment
    engine_keys = {r.origin.key for r in recs if r.kind == "lmcache"}
    assert len(engine_keys) == 2  # same process name and pid, two pods: two processes
    assert "kubectl-prefix" in stats.formats


def test_ray_node_ip_is_the_source_key_when_no_wrapper_names_one(tmp_path) -> None:
    line = "(EngineCore_DP0 pid=2210) (RayWorkerWrapper pid=731, ip=10.4.0.17) " + lmc("Stored 1", color=False)
    (rec,), _ = records(write(tmp_path / "r.log", [line]))
    assert rec.origin.deployment is None and rec.origin.source_key == "ray:10.4.0.17"


def test_year_from_a_wrapper_timestamp_flows_to_vllm_records(tmp_path) -> None:
    lines = ["2024-12-31T23:59:58.1Z " + vllm("a", ts="12-31 23:59:58"), vllm("b", ts="01-01 00:00:01")]
    recs, _ = records(write(tmp_path / "y.log", lines))
    assert [r.year for r in recs] == [2024, 2025]


def test_journald_short_carries_no_year(tmp_path) -> None:
    recs, _ = records(write(tmp_path / "j.log", ["déc. 31 23:59:58 h bash[1]: " + vllm("a", ts="12-31 23:59:58")]))
    assert is_nominal_year(recs[0].year) and recs[0].origin.deployment == "host:h"  # year unknown, not invented


def test_compose_container_name_is_learned_for_its_unheaded_lines(tmp_path) -> None:
    lines = ["vllm-1  | " + vllm("boom", level="ERROR"), "vllm-1  | Traceback (most recent call last):",
             'vllm-1  |   File "a.py", line 1, in <module>', "vllm-1  | IndexError: index 2 is out of bounds"]
    recs, _ = records(write(tmp_path / "c.log", lines))
    assert [r.kind for r in recs] == ["vllm", "traceback"]
    assert "IndexError" in recs[1].text and recs[1].origin.deployment == "compose:vllm-1"


def test_wrapper_year_across_new_year_is_not_advanced_twice(tmp_path) -> None:
    lines = ["2024-12-31T23:59:58.1Z " + vllm("a", ts="12-31 23:59:58"),
             "2025-01-01T00:00:01.1Z " + vllm("b", ts="01-01 00:00:01"),
             "2025-01-01T00:00:02.1Z " + vllm("c", ts="01-01 00:00:02")]
    recs, _ = records(write(tmp_path / "y.log", lines))
    assert [r.year for r in recs] == [2024, 2025, 2025]


@pytest.mark.parametrize("line", [
    '{"log": ' + "[" * 50000 + "]" * 50000 + "}",                 # nesting deeper than the JSON decoder's recursion
    '{"levelname": "x", "message": "m", "asctime": 5, "process": {}, "lineno": []}',
    '{"log": "x", "time": 2026}',
    "1:" * 40 + "INFO 05-06 15:56:03 [x.py:1] deep",
])
def test_hostile_wrapper_shapes_are_read_without_error(tmp_path, line) -> None:
    recs, stats = records(write(tmp_path / "h.log", [line, vllm("after")]))
    assert recs[-1].msg == "after"


@pytest.mark.parametrize("obj,deployment,year,style", [
    ({"MESSAGE": LINE, "_HOSTNAME": "gpu-1", "__REALTIME_TIMESTAMP": "1778082963745000"}, "host:gpu-1", 2026,
     "journald-json"),                                                                  # journalctl -o json
    ({"textPayload": LINE, "resource": {"type": "k8s_container", "labels": {"pod_name": "vllm-0",
      "container_name": "vllm"}}, "timestamp": "2025-11-30T08:27:01.004Z"}, "k8s:pod/vllm-0/vllm", 2025,
     "gcp-json"),                                                                       # Cloud Logging
    ({"line": LINE, "labels": {"pod": "vllm-1", "container": "vllm"}, "timestamp": "2024-05-06T15:56:03Z"},
     "k8s:pod/vllm-1/vllm", 2024, "loki-json"),                                         # logcli --output=jsonl
    ({"log": LINE + "\n", "kubernetes": {"pod_name": "vllm-2", "container_name": "c"}, "time": "2026-01-01T00:00:00Z"},
     "k8s:pod/vllm-2/c", 2026, "export-json"),                                          # Fluent Bit
    ({"message": LINE, "kubernetes": {"pod": {"name": "vllm-3"}, "container": {"name": "c"}},
      "@timestamp": "2023-03-03T00:00:00Z"}, "k8s:pod/vllm-3/c", 2023, "export-json"),   # Filebeat / ECS
])
def test_collector_and_export_json_lines_give_their_line_source_and_year(obj, deployment, year, style) -> None:
    u = LineUnwrapper()
    assert u.strip(json.dumps(obj).encode()) == LINE.encode()
    assert (u.deployment, u.year) == (deployment, year)
    assert style in u.seen


def test_a_json_object_with_a_message_but_no_time_or_source_is_no_export() -> None:
    """A program's own JSON (an error body) is read as it is, not taken for a collector's line."""
    text = '{"object": "error", "message": "The model does not exist.", "type": "NotFoundError", "code": 404}'
    assert LineUnwrapper().strip(text.encode()) == text.encode()


def test_a_cloud_logging_export_of_two_pods_reports_each_pod_apart(tmp_path) -> None:
    """Interleaved pods in one export are two deployments, each with its own findings (never joined)."""
    base = [config_dump("Worker_TP0 pid=100"), lookup("cmpl-a", 9000, 8192)]
    short = base + shortfall_pair("cmpl-a", 7168, 8192, proc="Worker_TP0 pid=100")
    fine = base + [retrieve("cmpl-a", 8192, 8192, 8192, proc="Worker_TP0 pid=100"), ACCESS_LINE]

    def gcp(line: str, pod: str) -> str:
        return json.dumps({"textPayload": line, "timestamp": "2026-05-06T15:56:03Z",
                           "resource": {"labels": {"pod_name": pod, "container_name": "vllm"}}})

    lines = [x for a, b in zip(short, fine, strict=True) for x in (gcp(a, "vllm-0"), gcp(b, "vllm-1"))]
    report = analyze([write(tmp_path / "export.log", lines)]).to_dict()
    by_dep = {d["id"]: d for d in report["deployments"]}
    assert set(by_dep) == {"pod/vllm-0/vllm", "pod/vllm-1/vllm"}
    kv = [f for f in report["findings"] if f["rule"] == "KV001"]
    assert [f["deployment"] for f in kv] == ["pod/vllm-0/vllm"]


def test_logcli_lines_give_their_line_and_the_pod_their_labels_name() -> None:
    """Loki's ``logcli query`` prints time, stream labels, line; the labels' pod and container are the source."""
    u = LineUnwrapper()
    line = f'2026-05-06T15:56:03.745Z {{app="vllm", container="vllm", pod="vllm-0"}} {LINE}'.encode()
    assert u.strip(line) == LINE.encode()
    assert (u.deployment, u.year) == ("k8s:pod/vllm-0/vllm", 2026) and "loki-labels" in u.seen
    odd = b'{app=vllm} not labels'
    assert LineUnwrapper().strip(odd) == odd


def test_a_terminal_uis_frame_around_each_row_is_stripped() -> None:
    """k9s's log view, copied: '│ ' before and the padding and ' │' after every row (vLLM issue #6976)."""
    u = LineUnwrapper()
    assert u.strip(("│ " + LINE + " " * 40 + "│").encode()) == LINE.encode()
    assert "box-border" in u.seen
    assert u.strip(("│ " + LINE).encode()) == LINE.encode()  # the right edge cut off by the copy


def test_a_k9s_paste_of_a_v0_cuda_error_is_read() -> None:
    from pathlib import Path

    log = Path(__file__).resolve().parent / "real_deaths" / "k9s-box-v0-cuda-ima.log"
    report = analyze([str(log)])
    assert report.inputs[0]["recognized"] == 6  # 1 of 6 before: the frame hid the vLLM header
    death = next(f for f in report.findings if f.rule == "SRV001")  # a context that faulted so is done (was LOG001)
    assert "an illegal memory access was encountered" in death.measurements["root_error"]


def test_a_code_span_opened_before_a_record_and_closed_lines_later_loses_its_backticks() -> None:
    u = LineUnwrapper()
    assert u.strip(("`" + LINE).encode()) == LINE.encode()
    for text in ("```python", "`foo`", "```", "`not a record"):
        assert u.strip(text.encode()) == text.encode()


def test_colour_codes_in_caret_notation_are_colour_not_text():
    """vllm-ascend (a paste through ``cat -v`` or a console that prints ESC as ``^[``): ``^[[1;36m(Worker_TP0
    pid=…)^[[0;0m``. Nothing was recognised (exit 3), as the process prefix never started the line."""
    from pathlib import Path

    from specdiag.engine import analyze

    log = Path(__file__).resolve().parent / "real_deaths" / "caret-notation-colour.log"
    stats = analyze([str(log)]).inputs[0]
    assert stats["recognized"] == stats["lines"] == 13
