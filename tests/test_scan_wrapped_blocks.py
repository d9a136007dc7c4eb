"""Blocks whose every line carries one kubectl ``--prefix`` or journald wrapper, or is a docker json-file line,
are scanned from a copy without it (``ahead.unwrapped``), their rows told to the deployment the wrapper names
(``blocks.NamedBlock``): the same reports as reading every wrapped line, whichever pods or hosts the blocks
mix, whatever the JSON escapes and the years the wrappers carry."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from specdiag.ingest import ahead, blocks, prefilter, scan
from specdiag.ingest.records import LineReader, iter_records
from specdiag.ingest.sources import Source, SourceStats

sys.path.insert(0, str(Path(__file__).parent))
from test_prefilter import _analyse as _run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TP8 = (ROOT / "examples" / "tp8-shortfall" / "serve.log").read_text().splitlines()
NGRAM = (ROOT / "examples" / "healthy-ngram" / "serve.log").read_text().splitlines()


def _pod(lines: list[str], pod: str) -> list[str]:
    return [f"[pod/{pod}/vllm] {x}" for x in lines]


def _journald(lines: list[str], host: str, pid: int = 4242) -> list[str]:
    return [f"May {6 + i // 86_400:2d} {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d} {host} vllm[{pid}]: {x}"
            for i, x in enumerate(lines)]


def _docker(lines: list[str], year: int = 2026) -> list[str]:
    """docker's json-file lines: Go's encoder escapes ``<``, ``>`` and ``&``, and control bytes (ESC). The
    year of the ``time`` field moves on by one every 3,000 lines, and is one more on vLLM's stats lines."""
    def text(x: str) -> str:
        return json.dumps(x + "\n", ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e") \
            .replace("&", "\\u0026")

    return [f'{{"log":{text(x)},"stream":"{"stderr" if i % 7 == 0 else "stdout"}","time":"'
            f'{year + i // 3000 + ("Avg prompt" in x)}-12-31T23:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z"}}'
            for i, x in enumerate(lines)]


def _analyse(path: Path, switch: str, name: str = "SPECDIAG_SCAN_WRAPPED") -> dict:
    """``test_prefilter._analyse`` at the default ``-j`` (the scan thread copies the blocks)."""
    return _run(path, switch, name, str(os.cpu_count() or 1))


def _same_both_ways(tmp_path: Path, lines: list[str]) -> dict:
    log = tmp_path / "wrapped.log"
    log.write_text("\n".join(lines) + "\n")
    on = _analyse(log, "on")
    assert on == _analyse(log, "off")
    return on


def _named_blocks(lines: list[str], tmp_path: Path) -> list[str]:
    log = tmp_path / "named.log"
    log.write_text("\n".join(lines) + "\n")
    items = iter_records(Source(str(log), str(log)), hot=True)
    return [x.deployment for x in items if isinstance(x, blocks.NamedBlock)]


def test_one_pod_reports_the_same_and_its_blocks_are_scanned(tmp_path):
    lines = _pod(TP8, "vllm-0")
    report = _same_both_ways(tmp_path, lines)
    assert [d["id"] for d in report["deployments"]] == ["pod/vllm-0/vllm"]
    assert {f["rule"] for f in report["findings"]} >= {"KV001"}
    assert _named_blocks(lines, tmp_path).count("k8s:pod/vllm-0/vllm") >= 4


def test_the_rows_and_first_lines_of_a_named_block_carry_its_deployment(tmp_path):
    """Rows of the copy are of the wrapper's deployment: the same process keys as the lines read one by one."""
    from specdiag.ingest.hot import LookupRows

    log = tmp_path / "pod.log"
    log.write_text("\n".join(_pod(TP8, "vllm-0")) + "\n")
    src = Source(str(log), str(log))
    rows = [x for x in iter_records(src, hot=True) if isinstance(x, LookupRows)]
    origins = {x.origin(i).deployment for x in rows for i in range(len(x))}
    assert len(rows) > 3 and origins == {"k8s:pod/vllm-0/vllm"}
    assert all("@k8s:pod/vllm-0/vllm" in x.origin(i).key for x in rows for i in range(len(x)))
    firsts = src.stats.hot.named_first["k8s:pod/vllm-0/vllm"]
    assert firsts and {r.origin.deployment for r in firsts.values()} == {"k8s:pod/vllm-0/vllm"}


def test_one_journald_host_reports_the_same_and_its_blocks_are_scanned(tmp_path):
    lines = _journald(TP8, "gpu-node-3")
    _same_both_ways(tmp_path, lines)
    assert _named_blocks(lines, tmp_path).count("host:gpu-node-3") >= 3


def test_two_pods_one_after_the_other_report_the_same(tmp_path):
    report = _same_both_ways(tmp_path, _pod(TP8, "vllm-0") + _pod(NGRAM, "vllm-1"))
    assert sorted(d["id"] for d in report["deployments"]) == ["pod/vllm-0/vllm", "pod/vllm-1/vllm"]


def test_two_pods_in_long_runs_report_the_same_and_switch_at_each_block(tmp_path):
    """Runs of 7,500 lines (≈ 2.3 MB) of each pod in turn: whole blocks of one pod follow blocks of the other."""
    a, b = _pod(TP8 * 3, "vllm-0"), _pod(TP8 * 3, "vllm-1")
    lines = [x for k in range(0, len(a), 7500) for x in a[k : k + 7500] + b[k : k + 7500]]
    _same_both_ways(tmp_path, lines)
    named = _named_blocks(lines, tmp_path)
    switches = sum(x != y for x, y in zip(named, named[1:], strict=False))
    assert {"k8s:pod/vllm-0/vllm", "k8s:pod/vllm-1/vllm"} <= set(named) and switches >= 2, named


def test_two_journald_hosts_interleaved_line_by_line_report_the_same(tmp_path):
    """Every block holds both hosts: none is scanned from a copy, and nothing changes."""
    a, b = _journald(TP8[:6000], "node-a"), _journald(TP8[:6000], "node-b", 77)
    lines = [x for pair in zip(a, b, strict=True) for x in pair]
    _same_both_ways(tmp_path, lines)
    assert _named_blocks(lines, tmp_path) == []


def test_docker_json_file_lines_report_the_same_and_their_blocks_are_scanned(tmp_path):
    """The TP=8 example as docker writes it (colour as ``\\u001b``, quotes, ``<>&``); the wrapper's year (2025,
    then 2026 from line 3,000, one more on the stats lines) dates vLLM's yearless lines, read or scanned."""
    extra = ['INFO 05-06 15:31:20 [api_server.py:1] path C:\\models\\x <a> & "b"\tc',
             "(APIServer pid=1) INFO:     127.0.0.1:5555 - \"GET /health HTTP/1.1\" 200 OK"]
    lines = _docker(TP8[:200] + extra + TP8[200:], 2025)
    report = _same_both_ways(tmp_path, lines)
    assert {f["rule"] for f in report["findings"]} >= {"KV001"}
    log = tmp_path / "docker.log"
    log.write_text("\n".join(lines) + "\n")
    src = Source(str(log), str(log))
    list(iter_records(src, hot=True))
    assert "docker-json" in src.stats.formats and src.stats.hot.counts  # counted by the scanner


def test_scanned_stats_lines_of_docker_blocks_take_the_year_of_their_own_wrapper(tmp_path):
    """vLLM prints no year: a stats line read alone takes its ``time`` field's; scanned from the copy, too."""
    from specdiag.ingest.hot import MetricRows

    lines = _docker(TP8, 2025)
    log = tmp_path / "docker.log"
    log.write_text("\n".join(lines) + "\n")
    want = {n: int(lines[n - 1].rsplit('"time":"', 1)[1][:4]) for n in range(1, len(lines) + 1)
            if "Avg prompt" in lines[n - 1]}
    got = {n: batch.year for batch in iter_records(Source(str(log), str(log)), hot=True)
           if isinstance(batch, MetricRows) for n, kind in zip(batch.lines, batch.kinds, strict=True)
           if kind == "stats"}
    assert len(got) == len(want) > 100 and got == want
    assert {2026, 2027} <= set(got.values())


def test_a_docker_block_is_copied_only_when_every_line_is_one_with_known_escapes():
    lines = ['(Worker pid=9) \x1b[32m[2026-05-06 15:56:03,745] LMCache INFO:\x1b[0m a "q" <t>\t& \\ z (a.py:1:b)',
             "INFO:     1.2.3.4:5 - \"GET / HTTP/1.1\" 200 OK"]
    block = ("\n".join(_docker(lines)) + "\n").encode()
    assert ahead.unwrapped(block, 0, len(block)) == ("\n".join(lines) + "\n").encode()
    assert ahead.unwrapped(block, 0, len(block) - 1) == "\n".join(lines).encode()
    for bad in ("caf\\u00e9", "a\\nb", "a\\rb", "a\\/b"):  # escapes it does not undo
        odd = block + _docker(["x"])[0].replace("x\\n", bad + "\\n").encode() + b"\n"
        assert ahead.unwrapped(odd, 0, len(odd)) is None, bad
    partial = block + _docker(["x"])[0].replace("x\\n", "x").encode()  # a message docker split: no line break
    assert ahead.unwrapped(partial, 0, len(partial)) is None
    long = block + _docker(["x" * (ahead.DOCKER_MAX_LINE + 1)])[0].encode()
    assert ahead.unwrapped(long, 0, len(long)) is None
    blank = block + b"\n" + block
    assert ahead.unwrapped(blank, 0, len(blank)) is None


def test_a_block_is_unwrapped_only_when_every_line_carries_the_same_named_wrapper():
    pod = "\n".join(_pod(TP8[:50], "vllm-0")).encode() + b"\n"
    copy = ahead.unwrapped(pod, 0, len(pod))
    assert copy == ("\n".join(TP8[:50]) + "\n").encode()
    assert ahead.unwrapped(pod[:-1], 0, len(pod) - 1) == copy[:-1]  # no line break at the end
    other = pod.replace(b"[pod/vllm-0/vllm] ", b"[pod/vllm-1/vllm] ", 1)[: len(pod)]
    assert ahead.unwrapped(pod + other, 0, len(pod) + len(other)) is None  # a second pod
    bare = pod + TP8[0].encode() + b"\n"
    assert ahead.unwrapped(bare, 0, len(bare)) is None  # a line without the wrapper
    jd = "\n".join(_journald(TP8[:50], "gpu-node-3")).encode()
    assert ahead.unwrapped(jd, 0, len(jd)) == "\n".join(TP8[:50]).encode()
    for changed in (b"vllm[4243]: ", b"vllm2[4242]: "):  # another process of the host
        mixed = jd + b"\n" + _journald(TP8[:1], "gpu-node-3")[0].encode().replace(b"vllm[4242]: ", changed)
        assert ahead.unwrapped(mixed, 0, len(mixed)) is None
    localised = jd.replace(b"May ", b"mai ")
    assert ahead.unwrapped(localised, 0, len(localised)) is None  # read line by line, as before


def _noise(size: int) -> list[str]:
    """The benchmark's foreign-noise log (NCCL, an app's logger, vLLM DEBUG internals at catalogued places,
    other routes, warnings; one shortfall incident), ``size`` bytes."""
    import io

    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_template_logs

    buf = io.BytesIO()
    gen_template_logs.generate_noise(buf, size)
    return buf.getvalue().decode("utf-8", "surrogateescape").splitlines()


@pytest.mark.parametrize("wrap", ["pod", "journald"])
def test_noise_behind_a_named_wrapper_is_counted_unread_and_reports_the_same(tmp_path, wrap):
    """The prefilter runs on the copy: foreign lines are counted, vLLM DEBUG records of learnt places are
    quiet (the wrapper's width counted in a row's, as the reader counts it); reports equal those of reading
    every line, with or without the prefilter."""
    noise = _noise(3 << 20)
    lines = _pod(noise, "vllm-0") if wrap == "pod" else _journald(noise, "gpu-node-3")
    report = _same_both_ways(tmp_path, lines)
    assert {f["rule"] for f in report["findings"]} >= {"KV001"}
    log = tmp_path / "wrapped.log"
    assert _analyse(log, "off", "SPECDIAG_PREFILTER") == report
    from test_prefilter import _quiet_count

    # vLLM DEBUG records of the later blocks, counted, not read (5,349 of the log without a wrapper; those whose
    # width with the wrapper's may hold a terminal-cut rest are read)
    assert _quiet_count(log) > 4_000
    # a process first seen on a counted record is told as the deployment's, as reading the record would
    from specdiag.engine import analyze

    told = []
    real = blocks._BlockFeed.announce
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocks._BlockFeed, "announce", lambda self, n, origin: (told.append(origin), real(self, n, origin)))
        analyze([str(log)])
    name = "k8s:pod/vllm-0/vllm" if wrap == "pod" else "host:gpu-node-3"
    assert told and {o.deployment for o in told} == {name}


def _prefilter_both_ways(log: Path) -> dict:
    on = _analyse(log, "on", "SPECDIAG_PREFILTER")
    assert on == _analyse(log, "off", "SPECDIAG_PREFILTER")
    return on


def _stamped(lines: list[str]) -> list[str]:
    """kubectl --timestamps (RFC 3339 with nanoseconds, trailing zeros trimmed as Go's RFC3339Nano does), the
    year 2025 and 2026 in turns of 1,000 lines, and every 97th line without a stamp (its year is the
    reader's: the one the line before left)."""
    out = []
    for i, x in enumerate(lines):
        frac = f"{i * 7919 % 10**9:09d}".rstrip("0")
        stamp = f"{2025 + i // 1000 % 2}-12-31T23:{i // 60 % 60:02d}:{i % 60:02d}{'.' + frac if frac else ''}Z "
        out.append(x if i % 97 == 0 or "dated by the line before" in x else stamp + x)
    return out


@pytest.mark.parametrize("wrap", ["timestamps", "docker"])
def test_noise_behind_a_dated_wrapper_is_counted_unread_and_reports_the_same(tmp_path, wrap):
    """Timestamped and docker blocks are prefiltered on their copies: foreign lines are counted unread, and
    the reader's year is what reading them would have left (stamps and json-file times change year, some
    lines carry no stamp); vLLM records are counted unread only where the next line cannot be their rest.
    Reports equal those of reading every line."""
    noise = _noise(3 << 20)
    nccl = [x for x in noise if " NCCL INFO " in x][:60]
    noise[6000:6000] = nccl + ["(EngineCore pid=203) ERROR 05-06 08:10:00 [core.py:1] something failed: dated by "
                               "the line before"]  # stamped 2025 from line 6,000, 2026 before it
    lines = _stamped(noise) if wrap == "timestamps" else [x.replace("2026-12-31T23", "2026-05-06T08") for x in
                                                          _docker(noise, 2025)]
    log = tmp_path / "dated.log"
    log.write_text("\n".join(lines) + "\n")
    report = _prefilter_both_ways(log)
    assert {f["rule"] for f in report["findings"]} >= {"KV001"}
    counted = []
    real = blocks._Inert.count
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocks._Inert, "count", lambda self: (counted.append(
            (self.wrapped is not None, self.kinds.count(prefilter.INERT), self.quiet_skipped)), real(self))[1])
        from specdiag.engine import analyze

        analyze([str(log)])
    if wrap == "timestamps":  # a line without a stamp after 60 counted ones: dated as reading them would
        years = [r.year for r in iter_records(Source(str(log), str(log)), hot=True)
                 if getattr(r, "raw", None) and b"dated by the line before" in r.raw]
        assert years == [2025]
    inert = sum(n for wrapped, n, _ in counted if wrapped)
    quiet = sum(q for wrapped, _, q in counted if wrapped)
    assert inert > 15_000 and (quiet > 1_000 or wrap == "docker"), (inert, quiet)  # docker's coloured records are read


def test_a_named_block_arriving_while_a_record_is_open_is_scanned_as_it_is():
    """A record held or open must see the wrapped lines as read: the block is scanned again uncopied."""
    data = ("\n".join(_pod(TP8[:200], "vllm-0")) + "\n").encode()
    res = scan.scan_range(ahead.unwrapped(data, 0, len(data)), 0, len(data), 0)
    copy = ahead.unwrapped(data, 0, len(data))
    reader = LineReader("x.log", SourceStats("x.log"))
    named, same, kept = blocks._named_copy(reader, data, 0, len(data), res, copy, 0)
    assert (named, same, kept) == ("k8s:pod/vllm-0/vllm", res, copy)
    assert isinstance(reader.out[-1], blocks.NamedBlock)
    busy = LineReader("x.log", SourceStats("x.log"))
    busy.open_recs["x"] = object()
    named, again, kept = blocks._named_copy(busy, data, 0, len(data), res, copy, 0)
    assert named is None and kept is None and again is not res and again.lines == res.lines
    assert busy.out == []


def test_a_named_block_after_a_held_record_is_scanned_from_its_copy_only_for_the_same_deployment():
    """A vLLM record held for its possible terminal-cut rest: the block's first line read decides, as for
    any block, when the record is of the deployment the block names; else the block is read as it is."""
    from specdiag.ingest.envelope import Record
    from specdiag.ingest.origin import Origin

    data = ("\n".join(_pod(TP8[:200], "vllm-0")) + "\n").encode()
    copy = ahead.unwrapped(data, 0, len(data))
    res = scan.scan_range(copy, 0, len(copy), 0)
    for deployment, copied in (("k8s:pod/vllm-0/vllm", True), ("k8s:pod/vllm-1/vllm", False), (None, False)):
        reader = LineReader("x.log", SourceStats("x.log"))
        reader.held = Record("x.log", 1, Origin(deployment=deployment), "vllm", "INFO", None, 2026, None, None,
                             None, b"x" * 80)
        named, _, kept = blocks._named_copy(reader, data, 0, len(data), res, copy, 0)
        assert (named is not None, kept is not None) == (copied, copied), deployment


@pytest.mark.parametrize("text", [b"2026-05-06T08:00:00Z (APIServer pid=1) INFO 05-06 08:00:00 [a.py:1] x\n"])
def test_kubectl_timestamps_name_no_deployment(text):
    reader = LineReader("x.log", SourceStats("x.log"))
    copy = ahead.unwrapped(text, 0, len(text))
    res = scan.scan_range(copy, 0, len(copy), 0)
    assert blocks._named_copy(reader, text, 0, len(text), res, copy, 0) == (None, res, copy)
    assert reader.out == []


def _cri(lines: list[str], split_every: int = 0) -> list[str]:
    """A Kubernetes node's CRI log (``/var/log/pods/…``): RFC 3339 time, stream, ``F``; every ``split_every``-th
    line a ``P`` piece of its own (a runtime's split of a long line)."""
    return [f"2026-05-06T15:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z {'stderr' if i % 3 else 'stdout'} "
            f"{'P' if split_every and i % split_every == 0 else 'F'} {x}" for i, x in enumerate(lines)]


def _without_paths(report: dict, path: Path) -> str:
    return json.dumps({k: v for k, v in report.items() if k not in ("inputs", "tool")}).replace(str(path), "LOG")


@pytest.mark.parametrize("example", ["tp8", "ngram"])
def test_a_cri_log_reports_what_its_lines_without_the_wrapper_report(tmp_path, example):
    """The time, stream and tag a container runtime writes before each line come off in the block copy and
    per line alike: the report is the unwrapped log's, with the CRI and timestamp formats noted."""
    lines = {"tp8": TP8, "ngram": NGRAM}[example]
    plain, cri = tmp_path / "plain.log", tmp_path / "cri.log"
    plain.write_text("\n".join(lines) + "\n")
    cri.write_text("\n".join(_cri(lines)) + "\n")
    a, b = _analyse(plain, "on"), _analyse(cri, "on")
    assert _without_paths(a, plain) == _without_paths(b, cri)
    assert {"cri", "iso-timestamp"} <= set(b["inputs"][0]["formats"])
    if example == "tp8":
        assert {f["rule"] for f in b["findings"]} >= {"KV001"}


def test_cri_pieces_and_a_switch_of_wrapper_mid_file_report_what_the_lines_without_them_report(tmp_path):
    """``P`` pieces among ``F`` lines, then plain ``--timestamps`` lines, then CRI again: each block copy takes off
    what the per-line stages take off, at ``-j 1`` and at the default."""
    lines = _cri(TP8[:2000], split_every=97) + [f"2026-05-06T16:00:{i % 60:02d}Z {x}" for i, x in
                                                    enumerate(TP8[2000:3500])] + _cri(TP8[3500:])
    log, plain = tmp_path / "mixed.log", tmp_path / "plain.log"
    log.write_text("\n".join(lines) + "\n")
    plain.write_text("\n".join(TP8) + "\n")
    want = _without_paths(_analyse(plain, "on"), plain)
    for jobs in ("1", str(os.cpu_count() or 1)):
        got = _run(log, "on", "SPECDIAG_PREFILTER", jobs)
        assert _without_paths(got, log) == want
        assert {"cri", "iso-timestamp"} <= set(got["inputs"][0]["formats"])


def test_a_timestamped_log_without_cri_tags_does_not_note_the_format(tmp_path):
    log = tmp_path / "ts.log"
    log.write_text("\n".join(f"2026-05-06T16:00:{i % 60:02d}Z {x}" for i, x in enumerate(TP8)) + "\n")
    formats = _analyse(log, "on")["inputs"][0]["formats"]
    assert "iso-timestamp" in formats and "cri" not in formats
    no, yes = b"2026-05-06T16:00:00Z INFO stdout F x\n", b"x\n2026-05-06T16:00:00Z stdout F x\n"
    assert not ahead.holds_cri(no, 0, len(no)) and ahead.holds_cri(yes, 0, len(yes))
    assert not ahead.holds_cri(b"pre\n" + yes, 4, 6)  # only the span is looked at


def test_a_stern_log_reports_what_its_lines_without_the_names_report(tmp_path):
    """stern's ``pod container `` before each line (names with no anchor the prefilter knows): the lines are
    still read, each pod is its own deployment, and the report is the unwrapped log's; the prefilter off
    reads the same."""
    bare = [re.sub(r"^(\x1b\[1;36m)?\([^()]* pid=\d+\)(\x1b\[0;0m)? ", "", x) for x in TP8]  # no ``pid=`` to anchor on
    assert sum(x.startswith("INFO ") for x in bare) > 100
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, log = tmp_path / "a" / "serve.log", tmp_path / "b" / "serve.log"  # ranks unknown: named after the file
    plain.write_text("\n".join(bare) + "\n")
    log.write_text("\n".join(f"llama-0 server {x}" for x in bare) + "\n")
    want = _without_paths(_analyse(plain, "on"), plain)
    got = _analyse(log, "on")
    assert got == _run(log, "off", "SPECDIAG_PREFILTER", "1") == _analyse(log, "off")  # every line read; no copy
    assert _without_paths(got, log).replace("pod/llama-0/server", "LOG") == want
    assert "stern" in got["inputs"][0]["formats"]
    assert "k8s:pod/llama-0/server" in _named_blocks(log.read_text().splitlines(), tmp_path)


def test_an_rfc5424_syslog_file_reports_what_its_lines_report(tmp_path):
    """rsyslog's RFC 5424 lines (priority, version, time, host, app, pid, id, structured data) around lines with
    no ``pid=`` to anchor on: the prefilter keeps every line that starts with a priority, and the host names
    the deployment."""
    bare = [re.sub(r"^(\x1b\[1;36m)?\([^()]* pid=\d+\)(\x1b\[0;0m)? ", "", x) for x in TP8]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, log = tmp_path / "a" / "serve.log", tmp_path / "b" / "serve.log"
    plain.write_text("\n".join(bare) + "\n")
    log.write_text("\n".join(f"<14>1 2026-05-06T15:{i // 60 % 60:02d}:{i % 60:02d}.5Z gpu-1 srv 77 - - {x}"
                             for i, x in enumerate(bare)) + "\n")
    got = _analyse(log, "on")
    assert got == _run(log, "off", "SPECDIAG_PREFILTER", "1")
    assert _without_paths(got, log).replace("host:gpu-1", "LOG") == _without_paths(_analyse(plain, "on"), plain)
    assert "syslog-5424" in got["inputs"][0]["formats"]


def test_coloured_docker_records_are_counted_as_their_json_lines_are_read(tmp_path):
    """vLLM's coloured DEBUG records in docker's json-file, with escapes that colour removal treats apart (an
    erase-line sequence, a lone ESC, residue without ESC, residue that a removal leaves behind): counted once
    their place is learnt, with the report of reading every line, with or without the copy."""
    rec = "\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m DEBUG 05-06 15:56:{s:02d} [shm_broadcast.py:227] Poller received cancel event"
    odd = ["", "\x1b[K", " \x1b", " [[0m0m", " [1;36m", " \x1b[?25l x"]
    lines = [rec.format(s=i % 60) + odd[i % len(odd)] for i in range(30000)]
    lines[20000:20000] = TP8
    log = tmp_path / "docker.log"
    log.write_text("\n".join(_docker(lines)) + "\n")
    assert log.stat().st_size > 3 << 20
    on = _analyse(log, "on")
    assert on == _analyse(log, "off") == _analyse(log, "off", "SPECDIAG_PREFILTER")
    from test_prefilter import _quiet_count

    assert _quiet_count(log) > 15_000
