"""SRV009: the API server's access lines with a 5xx status. tenstorrent/vllm #35 (15 × 500 on /v1/completions) was
'no problem found', exit 0."""

from __future__ import annotations

from pathlib import Path

from pasted import findings_by_rule, write_paste

from specdiag.engine import analyze

HERE = Path(__file__).resolve().parent / "real_requests"


def test_a_burst_of_500s_is_an_error_that_points_before_the_first():
    report = analyze([str(HERE / "tt-completions-500-burst.log")])
    srv = next(f for f in report.findings if f.rule == "SRV009")
    assert srv.severity == "error" and report.exit_code("error") == 1
    assert srv.measurements["responses_5xx"] == 15
    assert srv.measurements["by_route"] == {"POST /v1/completions → 500": 15}
    assert "before the first" in srv.summary


def test_two_500s_are_left_to_their_requests_and_4xx_are_not_counted(tmp_path):
    lines = ['INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
             'INFO:     127.0.0.1:2 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
             'INFO:     127.0.0.1:3 - "GET /health HTTP/1.1" 200 OK',
             'INFO:     127.0.0.1:4 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error']
    assert "SRV009" not in findings_by_rule(write_paste(tmp_path, lines))
    srv = findings_by_rule(write_paste(tmp_path, [*lines, lines[1].replace(":2 ", ":5 ")]))["SRV009"]
    assert srv.severity == "error" and srv.measurements["responses_5xx"] == 3


def test_a_query_string_does_not_split_a_route(tmp_path):
    lines = [f'INFO:     127.0.0.1:{i} - "GET /v1/models?x={i} HTTP/1.1" 503 Service Unavailable' for i in range(3)]
    srv = findings_by_rule(write_paste(tmp_path, lines))["SRV009"]
    assert srv.measurements["by_route"] == {"GET /v1/models → 503": 3}


def test_a_large_log_reads_its_5xx_lines_through_the_scanner(tmp_path):
    ok = 'INFO:     10.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 200 OK\n'
    bad = 'INFO:     10.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n'
    log = tmp_path / "big.log"
    log.write_text(ok * 60_000 + bad * 4 + ok * 60_000)
    srv = findings_by_rule(log)["SRV009"]
    assert srv.measurements["responses_5xx"] == 4
