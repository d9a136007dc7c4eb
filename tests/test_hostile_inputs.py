"""Hostile inputs and file systems: decompression bombs, endless streams, symlink loops, FIFOs, pipes,
unreadable entries. Each stops at a limit with a one-line reason, or is read once, never hangs or crashes."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest
from corpus_paths import CORPUS
from peak_rss import run_cli

from specdiag.ingest import expand_inputs
from specdiag.ingest.sources import BLOCK_SIZE, MAX_RATIO, _GzipMembers

SEED = sorted((CORPUS / "seed-minimal-variant").glob("*.log"))[0]


def _bomb(path, member_mb: int = 64, members: int = 8) -> int:
    """A gzip of ``members`` concatenated members, each ``member_mb`` MiB of one repeated log line."""
    line = b"INFO 05-06 15:56:03 [x.py:1] " + b"a" * 90 + b"\n"
    member = gzip.compress(line * (member_mb * 1024 * 1024 // len(line)), compresslevel=9)
    with open(path, "wb") as fh:
        for _ in range(members):
            fh.write(member)
    return member_mb * members * 1024 * 1024


def _run(args, env=None, timeout=120, **kw):
    return run_cli(list(args), env=env, timeout=timeout, **kw)


def test_gzip_reads_are_bounded_by_max_length(tmp_path) -> None:
    p = tmp_path / "z.gz"
    p.write_bytes(gzip.compress(b"\n" * (200 * 1024 * 1024)))  # 200 KB that inflate to 200 MB
    with open(p, "rb") as raw:
        g = _GzipMembers(raw)
        sizes = [len(g.read(BLOCK_SIZE)) for _ in range(50)]
    assert max(sizes) <= BLOCK_SIZE and sum(sizes) == 50 * BLOCK_SIZE


def test_concatenated_members_still_read_in_full(tmp_path) -> None:
    p = tmp_path / "rot.gz"
    p.write_bytes(gzip.compress(b"one\n") + gzip.compress(b"two\n" * 300000))
    src = expand_inputs([str(p)])[0]
    data = b"".join(src.chunks())
    assert data.startswith(b"one\ntwo\n") and data.count(b"two\n") == 300000 and not src.stats.errors


def test_a_decompression_bomb_stops_at_the_ratio_limit_with_bounded_memory(tmp_path) -> None:
    p = tmp_path / "bomb.log.gz"
    total = _bomb(p)
    ratio = total / p.stat().st_size
    assert ratio > MAX_RATIO
    r = _run(["analyze", "--format", "json", str(p)])
    err = r.stderr.decode()
    assert r.returncode in (0, 1, 3), err
    doc = json.loads(r.stdout)
    msgs = doc["inputs"][0]["errors"]
    assert any("decompression bomb" in m and "SPECDIAG_MAX_RATIO" in m for m in msgs), msgs
    rss_kb = int(err.rsplit("MAXRSS_KB=", 1)[1])
    assert rss_kb < 400 * 1024, f"RSS {rss_kb} KiB"


def test_the_decompressed_size_limit_is_configurable(tmp_path) -> None:
    p = tmp_path / "big.log.gz"
    _bomb(p, member_mb=8, members=4)
    r = _run(["analyze", "--format", "json", str(p)], env={"SPECDIAG_MAX_DECOMPRESSED": str(10 * 1024 * 1024), "SPECDIAG_MAX_RATIO": "0"})
    doc = json.loads(r.stdout)
    assert any("decompression limit (10,485,760 bytes" in m for m in doc["inputs"][0]["errors"])
    assert doc["inputs"][0]["lines"] < 200000


def test_dev_zero_stops_at_the_no_line_break_limit() -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    r = _run(["analyze", "--format", "json", "/dev/zero"], timeout=60)
    assert r.returncode == 3, r.stderr
    assert any("without a line break" in m for m in json.loads(r.stdout)["inputs"][0]["errors"])


def _tree(tmp_path):
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "a.log").write_bytes(SEED.read_bytes())
    (d / "sub" / "b.log").write_bytes(SEED.read_bytes())
    os.symlink("..", d / "sub" / "loop")  # back up the tree
    os.symlink(d / "sub", d / "again")  # the same folder twice
    os.symlink(d / "a.log", d / "sub" / "same.log")  # the same file twice
    os.symlink("nowhere", d / "dangling.log")
    return d


def test_a_folder_walk_follows_links_without_looping_and_reads_each_file_once(tmp_path) -> None:
    d = _tree(tmp_path)
    srcs = expand_inputs([str(d)])
    good = [s for s in srcs if not s.stats.errors]
    assert sorted(os.path.basename(s.path) for s in good) == ["a.log", "b.log"]
    assert [s.stats.errors for s in srcs if s.path.endswith("dangling.log")] == [["broken symbolic link"]]


def test_a_recursive_glob_over_a_symlink_loop_ends_and_reads_each_file_once(tmp_path, monkeypatch) -> None:
    d = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    srcs = expand_inputs(["d/**/*.log"])  # d/again is d/sub: b.log is read once, under the first name
    assert sorted(os.path.basename(s.path) for s in srcs) == ["a.log", "b.log"] and not any(s.stats.errors for s in srcs)
    assert [s.path for s in expand_inputs(["d/*.log"])] == ["d/a.log"]
    assert len(expand_inputs([str(d / "**" / "b.log")])) == 1


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads every file")
def test_one_unreadable_file_is_an_input_error_not_a_lost_folder(tmp_path, run_cli) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "good.log").write_bytes(SEED.read_bytes())
    bad = d / "secret.log"
    bad.write_text("x\n")
    bad.chmod(0)
    code, out, err = run_cli("check", "--format", "json", str(d))
    doc = json.loads(out)
    paths = {i["path"]: i["errors"] for i in doc["inputs"]}
    assert any("good.log" in p and not e for p, e in paths.items())
    assert any("secret.log" in p and any("permission" in m.lower() for m in e) for p, e in paths.items())


def test_a_fifo_given_to_check_is_read_once_and_does_not_hang(tmp_path) -> None:
    fifo = tmp_path / "live.log"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "wb") as fh:
            fh.write(SEED.read_bytes())

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    r = _run(["check", "--format", "json", str(fifo)], timeout=60)
    t.join(5)
    doc = json.loads(r.stdout)
    assert doc["findings"] and r.returncode == 1, r.stderr


def test_process_substitution_is_read_without_seeking() -> None:
    for payload, want in ((b"", 3), (SEED.read_bytes(), 1)):
        rfd, wfd = os.pipe()
        os.write(wfd, payload) if len(payload) < 60000 else None
        os.close(wfd)
        try:
            r = _run(["analyze", "--format", "json", f"/dev/fd/{rfd}"], pass_fds=(rfd,), timeout=60)
        finally:
            os.close(rfd)
        assert r.returncode == want, r.stderr
        assert b"Traceback" not in r.stderr and b"seekable" not in r.stderr


def test_damaged_gzip_keeps_its_good_part(tmp_path) -> None:
    p = tmp_path / "cut.log.gz"
    data = gzip.compress(SEED.read_bytes() * 50)
    p.write_bytes(data[: len(data) // 2])
    src = expand_inputs([str(p)])[0]
    assert b"".join(src.chunks()) and any("truncated" in e for e in src.stats.errors)


def test_a_damaged_log_gets_one_message_per_problem(tmp_path) -> None:
    """A 2 MiB line and binary junk: one note each (the reader's cut and the parse limit in one; the
    skipped lines once), not two messages with different numbers for the same thing."""
    from specdiag.engine import analyze
    from specdiag.report.layout import input_notes

    root = Path(__file__).resolve().parent.parent
    head = (root / "examples/tp8-shortfall/serve.log").read_bytes().split(b"\n")[:50]
    junk = [bytes(range(1, 9)) * 10 + b"\x00" for _ in range(44)]
    log = tmp_path / "damaged.log"
    log.write_bytes(b"\n".join([*head, *junk, b"A" * (2 * 1024 * 1024), *head]) + b"\n")
    notes = [m for _, m in input_notes(analyze([str(log)]))]
    cut = [m for m in notes if "KiB" in m or "for parsing" in m]
    skipped = [m for m in notes if "skipped" in m]
    assert len(cut) == 1 and "cut at that length (and parsed in its first 64 KiB)" in cut[0], notes
    assert len(skipped) == 1 and "44 line(s)" in skipped[0], notes
