"""Unseen-log robustness: inputs written from the shared reference's documented formats, never corpus copies.

* every catalogued LMCache line (``log-catalog-by-version.tsv``, every inspected release) that one of
  specdiag's templates claims to read is recognised as that template end to end (envelope, dispatch, regex);
* one minimal incident per cause of ``mismatch-causes.md`` §3, built from its documented signature, ranks
  that cause first — in several LMCache eras and with or without vLLM process prefixes;
* 1-3-line fragments of those incidents, as users paste them (indented, ``grep -n``, kubectl ``--prefix``,
  wrapped at 80 columns, CRLF): the right cause first or an honest, capped verdict naming what to collect,
  no invented year / rank / TP size / version, no traceback, the contract's exit code.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import unseen_gen as g
from typer.testing import CliRunner

from specdiag.cli import app
from specdiag.engine import analyze
from specdiag.events import default_matcher
from specdiag.events.lmcache import LMCACHE_TEMPLATES
from specdiag.ingest import expand_inputs, iter_records

CATALOG = Path(__file__).resolve().parents[2] / "shared" / "reference" / "lmcache" / "log-catalog-by-version.tsv"


def report(tmp_path: Path, lines: list[str], name: str = "paste.log") -> dict:
    return analyze([g.write_lines(tmp_path / name, lines)]).to_dict()


def kv001(rep: dict) -> dict:
    found = [f for f in rep["findings"] if f["rule"] == "KV001"]
    assert found, f"no KV001 among {[f['rule'] for f in rep['findings']]}"
    return found[0]


def top(f: dict) -> tuple[str, float]:
    return f["causes"][0]["id"], f["causes"][0]["confidence"]


# ---- every catalogued line shape of every inspected release -------------------------------------------------
def _render(fmt: str) -> str:
    """A catalogued format string with plausible values: ids after request words, lists for rank results."""
    def value(prev: str, name: str = "") -> str:
        prev, name = prev.lower(), name.lower()
        if prev.endswith("ranks: ") or "results" in name:
            return "[512, 256]"
        if re.search(r"(layerwise: |first rank: |use mla: |mode: )$", prev):
            return "False"
        if prev.endswith("kv shape: "):
            return "(33, 2, 256, 2, 128)"
        if prev.endswith(("rank=", "rank ")):
            return "1"
        if re.search(r"(reqid: |request |req_id=|request_id=|lookup id |for request )$", prev) or "req" in name:
            return "cmpl-9f3a-0"
        if prev.endswith("memoryobj ") or "addr" in name:
            return "0x7f3a10"
        if prev.endswith(("config: ", "configuration: ")):
            return "{'chunk_size': 256}"
        return "256"

    out, last = [], 0
    for m in re.finditer(r"%(?:\.\d+)?[sdrf]|\{[^{}]*\}", fmt):
        out.append(fmt[last:m.start()])
        tok = m.group(0)
        prev = "".join(out)
        out.append(value(prev, tok[1:-1]) if tok.startswith("{") else "1.50" if tok.endswith("f")
                   else "256" if tok == "%d" else value(prev))
        last = m.end()
    return "".join(out) + fmt[last:]


def _catalog_lines() -> list[tuple[str, str, str]]:
    """(template id, version, raw line) for each non-DEBUG catalogued call a template's regex accepts."""
    if not CATALOG.exists():
        return []
    out = []
    with CATALOG.open(encoding="utf-8") as fh:
        rows = [r for r in csv.reader((ln for ln in fh if not ln.startswith("#")), delimiter="\t")]
    for row in rows[1:]:
        if len(row) < 5 or row[3] == "DEBUG":
            continue
        version, file, line, level, fmt = row[:5]
        msg = _render(fmt[2:] if fmt.startswith("f:") else fmt)
        tid = next((t.id for t in LMCACHE_TEMPLATES if t.match(msg) is not None), None)
        if tid is None:
            continue
        logger = "lmcache." + file[:-3].replace("/", ".")
        level = "WARNING" if level == "WARN" else level
        out.append((tid, version, g.lmcache_line(msg, level=level, loc=f"{file.rsplit('/', 1)[-1]}:{line}",
                                                 logger=logger, color=version < "0.4")))
    return out


CATALOG_LINES = _catalog_lines()


@pytest.mark.skipif(not CATALOG_LINES, reason="shared reference catalogue not present")
def test_every_catalogued_line_a_template_claims_is_recognised_end_to_end(tmp_path: Path) -> None:
    path = g.write_lines(tmp_path / "catalog.log", [line for _, _, line in CATALOG_LINES])
    matcher = default_matcher()
    got = [matcher.match(r) for r in iter_records(expand_inputs([path])[0]) if hasattr(r, "kind")]
    assert len(got) == len(CATALOG_LINES)
    missed = [(tid, v, line[:90]) for (tid, v, line), ev in zip(CATALOG_LINES, got, strict=True)
              if ev is None or ev.id != tid]
    assert not missed, missed[:5]
    versions = {v for _, v, _ in CATALOG_LINES}
    assert {"0.3.1", "0.3.5", "0.3.12", "0.4.7", "0.5.6", "cli"} <= versions


# ---- one synthetic incident per documented cause ------------------------------------------------------------
ERA_SWEEP = ["0.3.9", "0.3.12", "0.3.15", "0.4.7", "0.5.1", "0.5.6", "post-0.5.6"]
NEEDS_L6 = {"rank-disagreement"}


@pytest.mark.parametrize("cause", sorted(g.INCIDENTS))
def test_each_documented_cause_ranks_first_on_its_minimal_incident(tmp_path: Path, cause: str) -> None:
    f = kv001(report(tmp_path, g.INCIDENTS[cause]().lines))
    assert top(f)[0] == cause, [(c["id"], c["confidence"]) for c in f["causes"][:3]]
    assert {c["id"] for c in f["causes"]} >= {"decode-cache-not-saved", "hash-inconsistency"}
    assert next(c for c in f["causes"] if c["id"] == "decode-cache-not-saved")["confidence"] <= 0.05


@pytest.mark.parametrize("prefixed", [True, False], ids=["vllm<=0.30-prefix", "vllm>=0.31-no-prefix"])
@pytest.mark.parametrize("version", ERA_SWEEP)
@pytest.mark.parametrize("cause", ["lookup-retrieve-eviction", "pin-accounting-bug", "remote-backend-loss",
                                   "backend-read-failure", "cpu-staging-exhausted", "rank-disagreement",
                                   "async-loading-partial", "unfull-chunk-mismatch", "pin-timeout"])
def test_cause_ranking_holds_in_every_lmcache_era(tmp_path: Path, cause: str, version: str, prefixed: bool) -> None:
    if cause in NEEDS_L6 and g.ERAS[version].l6 is None:
        pytest.skip("no rank-disagreement warning in that release")
    f = kv001(report(tmp_path, g.INCIDENTS[cause](version, prefixed=prefixed).lines))
    assert top(f)[0] == cause


def test_printed_release_matching_its_line_numbers_carries_no_mismatch_note(tmp_path: Path) -> None:
    """C18 prints the release; its line (485) matches 0.5.5-0.5.6: nothing to note, whatever the log's date."""
    line = g.lmcache_line("LMCache initialized for role KVConnectorRole.WORKER with version 0.5.6-g3e11e108, vllm version "
                          "0.25.0, lmcache cache_engine metadata: LMCacheMetadata(model_name='m', world_size=2, worker_id=1)",
                          loc="vllm_v1_adapter.py:485", proc="Worker_TP1 pid=5118")
    ctx = report(tmp_path, [line])["context"]
    assert ctx["lmcache_version"] == "0.5.6-g3e11e108" and ctx["lmcache_version_note"] is None
    patched = line.replace("vllm_v1_adapter.py:485", "vllm_v1_adapter.py:470")  # 0.3.15's line: a patched build
    assert report(tmp_path, [patched], "p.log")["context"]["lmcache_version_note"]


def test_lmcache_version_is_read_from_each_eras_line_numbers(tmp_path: Path) -> None:
    for version in ("0.3.5", "0.3.12", "0.4.7", "0.5.6"):
        # dated after every release it could be (a log that predates the nearest release names none)
        lines = [line.replace("2026-03-14", "2026-11-14") for line in g.eviction(version).lines]
        ctx = report(tmp_path, lines, f"{version}.log")["context"]
        assert ctx["lmcache_version"].lstrip("~") == version or version in ctx["lmcache_version"]


# ---- fragments as pasted --------------------------------------------------------------------------------
#: per cause, the 1-3 lines a user would paste (substrings of the short rank's lines), and what must rank first
FRAGMENTS = {
    "lookup-retrieve-eviction": (("No eviction candidates", "Num retrieved"), {"lookup-retrieve-eviction"}),
    "pin-accounting-bug": (("Pin count of", "The number of retrieved", "Num retrieved"), {"pin-accounting-bug"}),
    "pin-timeout": (("Pin timeout detected", "Num retrieved"), {"pin-timeout"}),
    "remote-backend-loss": (("Key exists but", "can't be retrieved", "Num retrieved"), {"remote-backend-loss"}),
    "backend-read-failure": (("Failed to load chunk", "can't be retrieved", "Num retrieved"), {"backend-read-failure"}),
    "cpu-staging-exhausted": (("CPU staging pool", "can't be retrieved", "Num retrieved"), {"cpu-staging-exhausted"}),
    "adapter-token-accounting-bug": (("The number of retrieved", "Num retrieved"), {"adapter-token-accounting-bug"}),
    "rank-disagreement": (("differ across", "Num retrieved"), {"rank-disagreement"}),
    "async-loading-partial": (("Responding to scheduler", "Num retrieved"), {"async-loading-partial"}),
    "unfull-chunk-mismatch": (("The number of retrieved", "Num retrieved"),
                              {"unfull-chunk-mismatch", "adapter-token-accounting-bug"}),
}


def fragment(cause: str) -> list[str]:
    """The last line of the incident containing each key (the short rank's, as it comes last)."""
    full = g.INCIDENTS[cause]().lines
    return [[line for line in full if key in line][-1] for key in FRAGMENTS[cause][0]]


@pytest.mark.parametrize("paste", ["plain", *g.PASTES])
@pytest.mark.parametrize("cause", sorted(FRAGMENTS))
def test_fragment_names_its_cause_with_capped_confidence(tmp_path: Path, cause: str, paste: str) -> None:
    lines = fragment(cause)
    if paste != "plain":
        lines = g.PASTES[paste](lines)
    f = kv001(report(tmp_path, lines))
    cid, conf = top(f)
    assert cid in FRAGMENTS[cause][1], [(c["id"], c["confidence"]) for c in f["causes"][:3]]
    assert conf <= 0.6  # a paste proves the arithmetic, not the cause
    assert f["measurements"]["input_coverage"] == "fragment"
    assert f["next_steps"]


#: kubectl --prefix then a terminal wrap included: the cut rows lack the pod prefix and are rejoined to the
#: record the first row opened (tests/test_paste_probe.py sweeps every width and order)
_TERMINAL = ("indented", "grep-n", "kubectl-prefix", "wrapped-80", "crlf")
_MARKDOWN = ("md-quote", "md-bullets", "md-numbered")
COMPOSED = [(a, b) for a in _TERMINAL for b in _TERMINAL if a != b] + \
    [(a, b) for a in ("indented", "grep-n", "kubectl-prefix", "crlf") for b in _MARKDOWN]  # terminal output, then posted


@pytest.mark.parametrize(("first", "then"), COMPOSED, ids=[f"{a}+{b}" for a, b in COMPOSED])
@pytest.mark.parametrize("cause", ["pin-accounting-bug", "remote-backend-loss", "rank-disagreement"])
def test_two_paste_transformations_in_a_row_keep_the_cause(tmp_path: Path, cause: str, first: str, then: str) -> None:
    """E.g. ``grep -n`` output pasted as an indented code block, or a terminal-wrapped log indented."""
    f = kv001(report(tmp_path, g.PASTES[then](g.PASTES[first](fragment(cause)))))
    assert top(f)[0] in FRAGMENTS[cause][1]


@pytest.mark.parametrize("paste", ["plain", *g.PASTES])
def test_bare_error_pair_is_insufficient_evidence_and_says_what_to_collect(tmp_path: Path, paste: str) -> None:
    log = g.Log("0.5.6").mismatch(g.REQ, 1, 6400, 8448)
    lines = log.lines if paste == "plain" else g.PASTES[paste](log.lines)
    f = kv001(report(tmp_path, lines))
    assert all(c["confidence"] <= 0.45 for c in f["causes"])
    steps = " ".join(f["next_steps"])
    assert "Reqid:" in steps and "Creating LMCacheEngine" in steps


def test_rank_disagreement_warning_without_its_lookup_line_is_tied_by_the_minimum(tmp_path: Path) -> None:
    """L6's minimum is the request's hit: an expected above it cannot be that lookup's request."""
    log = g.Log("0.5.6")
    log.disagreement([4096, 2048])  # min 2048 < expected 6144: another request's lookup
    log.mismatch(g.REQ, 1, 4096, 6144)
    f = kv001(report(tmp_path, log.lines))
    assert top(f)[0] != "rank-disagreement"
    assert not any("whose minimum fits" in r for c in f["causes"] for r in c["for"])


def test_async_answer_of_another_size_does_not_count_as_shorter(tmp_path: Path) -> None:
    log = g.Log("0.5.6")
    log.warn(f"Responding to scheduler for lookup id {g.REQ} with retrieved length 9472", 1, "storage_manager.py:648",
             "lmcache.v1.storage_backend.storage_manager", "2026-03-14 09:27:00,700", level="INFO")
    log.mismatch(g.REQ, 1, 6400, 8448)
    f = kv001(report(tmp_path, log.lines))
    assert not any("answered" in r for c in f["causes"] for r in c["for"])


def test_p2p_with_partial_retrieve_is_not_the_p2p_mask_bug(tmp_path: Path) -> None:
    """The P2P bug reports exactly 0; a partial load with P2P on is an ordinary chunk loss."""
    log = g.Log("0.3.3").config(enable_p2p=True)
    log.lookup(g.REQ, 4352, 4096, 0)
    log.retrieve(g.REQ, 1, 2048, 4096, 4096)
    log.mismatch(g.REQ, 1, 2048, 4096)
    f = kv001(report(tmp_path, log.lines))
    assert top(f)[0] != "p2p-retrieve-bug"


def test_pre_033_unpinned_ranks_do_not_explain_a_short_rank_zero(tmp_path: Path) -> None:
    log = g.Log("0.3.1", tp=1, prefixed=True)
    log.lines.extend(g.Log("0.3.1").mismatch(g.REQ, 0, 0, 4096).lines)
    f = kv001(report(tmp_path, log.lines))
    ev = next(c for c in f["causes"] if c["id"] == "lookup-retrieve-eviction")
    assert not any("only rank 0 pinned at lookup" in r for r in ev["for"])


@pytest.mark.parametrize(("cause", "keys"), [
    ("backend-read-failure", ("Failed to load chunk", "can't be retrieved")),
    ("remote-backend-loss", ("Key exists but", "can't be retrieved")),
    ("cpu-staging-exhausted", ("CPU staging pool",)),
])
@pytest.mark.parametrize("paste", ["plain", "grep-n", "indented"])
def test_failed_read_lines_without_the_error_pair_are_a_shortfall_warning(tmp_path: Path, cause: str,
                                                                         keys: tuple, paste: str) -> None:
    """A failed read drops that chunk and every later one (cache_engine.py:1793, local_disk_backend.py:629)."""
    full = g.INCIDENTS[cause]().lines
    lines = [[line for line in full if key in line][-1] for key in keys]
    f = kv001(report(tmp_path, lines if paste == "plain" else g.PASTES[paste](lines)))
    assert f["severity"] == "warning" and f["measurements"]["evidence_source"] == "read-failure"
    assert top(f)[0] == cause and top(f)[1] <= 0.6
    assert f["measurements"]["expected_tokens"] is None  # the size is not in the input: none is invented
    assert any("Num retrieved tokens" in s for s in [f["summary"], *f["next_steps"]])


def test_pressure_or_pin_warnings_alone_are_no_shortfall(tmp_path: Path) -> None:
    lines = [line for line in g.eviction().lines if "No eviction candidates" in line]
    assert not [f for f in report(tmp_path, lines)["findings"] if f["rule"] == "KV001"]


def test_one_lookup_timeout_in_an_excerpt_is_reported_but_not_in_a_full_log(tmp_path: Path) -> None:
    l7 = g.lmcache_line("Request cmpl-1-0 is still waiting for async lookup after 3 seconds, returning 0 lmcache cached "
                        "tokens so vllm can recompute", level="WARNING", loc="lmcache_async_lookup_client.py:177",
                        logger="lmcache.v1.lookup_client.lmcache_async_lookup_client", proc="EngineCore_DP0 pid=2210")
    excerpt = report(tmp_path, [l7])
    assert [top(f)[0] for f in excerpt["findings"] if f["rule"] == "KV010"] == ["async-lookup-timeout-too-low"]
    start = g.vllm_line("vLLM API server version 0.11.0", loc="api_server.py:1839", proc="APIServer pid=4410")
    full = report(tmp_path, [start, *g.Log("0.5.6").config(enable_async_loading=True).lines, l7], "full.log")
    assert not [f for f in full["findings"] if f["rule"] == "KV010"]


# ---- collector and paste envelopes (log-formats.md §1.1-§1.3) ---------------------------------------------
def _pin_fragment(**kw) -> list[str]:
    lines = g.pin_accounting("0.5.6", prefixed=False, **kw).lines
    return [[line for line in lines if key in line][-1] for key in ("Pin count of", "The number of retrieved", "Num retrieved")]


W1 = "(Worker_TP1 pid=5118) "
ENVELOPES = {
    "esc-less-residue": (lambda f: [s.replace("\x1b", "") for s in _pin_fragment(color=True)], None),
    "warn-level-renamed": (lambda f: [s.replace("LMCache WARNING:", "LMCache WARN :") for s in f], None),
    "journald-fr": (lambda f: [f"mars 14 09:27:01 gpu-node-3 bash[88213]: {W1}{s}" for s in f], "TP1"),
    "journald-iso": (lambda f: [f"2026-03-14T09:27:01+0100 gpu-node-3 vllm[88213]: {W1}{s}" for s in f], "TP1"),
    "docker-json": (lambda f: [json.dumps({"log": f"{W1}{s}\r\n", "stream": "stderr",
                                           "time": "2026-03-14T08:27:01.004Z"}) for s in f], "TP1"),
    "kubectl-timestamps": (lambda f: [f"2026-03-14T08:27:01.004518223Z {W1}{s}" for s in f], "TP1"),
    "compose": (lambda f: [f"vllm-1  | {W1}{s}" for s in f], "TP1"),
    "vllm-0.8-rank": (lambda f: [f"(VllmWorker rank=1 pid=5118) {s}" for s in f], "TP1"),
    "vllm-0.10.1-tp": (lambda f: [f"(VllmWorker TP1 pid=5118) {s}" for s in f], "TP1"),
    "pp-and-tp": (lambda f: [f"(Worker_PP1_TP1 pid=5118) {s}" for s in f], "PP1_TP1"),
    "ray-nested": (lambda f: [f"(EngineCore_DP0 pid=2210) (RayWorkerWrapper pid=731, ip=10.4.0.17) {s}" for s in f],
                   None),
    "grep-H-n": (lambda f: [f"logs/serve.log:{i + 10}:{s}" for i, s in enumerate(f)], None),
    "grep-n-of-kubectl": (lambda f: [f"{i + 10}:[pod/vllm-0/vllm] {W1}{s}" for i, s in enumerate(f)], "TP1"),
    "no-break-space-indent": (lambda f: ["\u00a0\u00a0\u00a0\u00a0" + s for s in f], None),
    "cat-n": (lambda f: [f"{i + 10:>6}\t{s}" for i, s in enumerate(f)], None),
    "less-N": (lambda f: [f"{i + 10:>7} {s}" for i, s in enumerate(f)], None),
    "editor-line-numbers": (lambda f: [f"{i + 10}  {s}" for i, s in enumerate(f)], None),
}


@pytest.mark.parametrize("shape", sorted(ENVELOPES))
def test_fragment_behind_each_collector_envelope_keeps_cause_and_rank(tmp_path: Path, shape: str) -> None:
    make, rank = ENVELOPES[shape]
    rep = report(tmp_path, make(_pin_fragment()))
    assert rep["inputs"][0]["recognized"] == 3
    f = kv001(rep)
    assert top(f)[0] == "pin-accounting-bug" and f["measurements"]["expected_tokens"] == 8448
    ranks = f["measurements"]["ranks"]
    if rank is None:  # the line names no rank: none is invented (a Ray actor nested in the engine is no TP0)
        assert all(r.startswith("unknown") for r in ranks), ranks
    else:
        assert ranks == [rank]


def test_legacy_envelope_lines_are_read_with_their_year_and_fields(tmp_path: Path) -> None:
    """The 2024 v0 integration: ``LEVEL LMCache: msg [ts] -- /abs/path/file.py:N`` (log-formats.md §1.1), and its
    allocation warning with a ``torch.Size([...])`` shape inside ``tensor(...)`` (M11, pre-0.3)."""
    site = "/usr/lib/python3/site-packages/lmcache"
    path = g.write_lines(tmp_path / "legacy.log", [
        f"INFO LMCache: Creating LMCacheEngine with config: {{'chunk_size': 512}} [2024-11-02 10:11:12,345] -- "
        f"{site}/experimental/cache_engine.py:87",
        "WARNING LMCache: Failed to allocate memory for tensor(torch.Size([2, 32, 256, 8, 128]), torch.bfloat16) because "
        f"no memory is available [2024-11-02 10:11:13,345] -- {site}/experimental/memory_management.py:212",
    ])
    matcher = default_matcher()
    ids = [ev.id for r in iter_records(expand_inputs([path])[0]) if hasattr(r, "kind") and (ev := matcher.match(r))]
    assert ids == ["C13", "M3"]
    ctx = analyze([path]).to_dict()["context"]
    assert ctx["chunk_size"] == 512 and ctx["log_year"] == 2024


@pytest.mark.parametrize(("encoding", "newline"), [("utf-8-sig", "\n"), ("utf-16", "\r\n"), ("utf-16-be", "\n")],
                         ids=["utf8-bom-notepad", "utf16le-bom-powershell", "utf16be-bom"])
def test_windows_saved_logs_are_read_whole(tmp_path: Path, encoding: str, newline: str) -> None:
    """PowerShell 5's ``kubectl logs … > x.log`` writes UTF-16LE with a BOM; Notepad saves UTF-8 with one."""
    lines = _pin_fragment()
    path = tmp_path / "win.log"
    data = newline.join(lines) + newline
    raw = data.encode(encoding)
    if encoding == "utf-16-be":
        raw = b"\xfe\xff" + raw
    path.write_bytes(raw)
    rep = analyze([str(path)]).to_dict()
    assert rep["inputs"][0]["recognized"] == 3
    assert top(kv001(rep))[0] == "pin-accounting-bug"


def test_a_pasted_blocks_indentation_does_not_leak_into_a_later_raw_traceback(tmp_path: Path) -> None:
    short = g.lmcache_line("Post initializing LMCacheEngine", loc="cache_engine.py:303", logger=g.ENGINE, color=False)
    path = g.write_lines(tmp_path / "mix.log", ["    " + short, "Traceback (most recent call last):",
                                               '  File "/x/vllm/v1/engine/core.py", line 701, in run_engine_core',
                                               "    engine_core.run_busy_loop()", "RuntimeError: boom"])
    recs = [r for r in iter_records(expand_inputs([path])[0]) if hasattr(r, "kind")]
    tb = next(r for r in recs if r.kind == "traceback")
    assert "    engine_core.run_busy_loop()" in tb.text and "RuntimeError: boom" in tb.text


# ---- exceptions behind vLLM's header (logger.exception: every traceback line carries it) ------------------
def _traceback(last: str, shape: str) -> list[str]:
    """An engine-core traceback through ``run_engine_core`` ending in ``last``: raw (vLLM ≤0.30 prefix on every
    physical line) or through ``logger.exception`` (vLLM's header on every line, log-formats.md §9)."""
    proc = "EngineCore_DP0 pid=2210"
    frames = ["Traceback (most recent call last):",
              '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 701, in run_engine_core',
              "    engine_core = EngineCoreProc(*args, **kwargs)",
              '  File "/opt/venv/lib/python3.12/site-packages/vllm/distributed/kv_transfer/kv_connector/factory.py", '
              "line 63, in create_connector", "    return connector_cls(config, role)", last]
    if shape == "raw":
        return [f"({proc}) {f}" for f in frames]
    return [g.vllm_line("EngineCore failed to start.", level="ERROR", loc="core.py:1510", proc=proc)] + \
        [g.vllm_line(f, level="ERROR", loc="core.py:1510", proc=proc) for f in frames]


@pytest.mark.parametrize("shape", ["raw", "vllm-header"])
@pytest.mark.parametrize(("last", "cause"), [
    ("ImportError: cannot import name 'CudaIPCWrapper' from 'lmcache.v1.multiprocess.custom_types' "
     "(/opt/venv/lib/python3.12/site-packages/lmcache/v1/multiprocess/custom_types.py)", "vendored-adapter-import"),
    ("RuntimeError: No supported cpu connector found.", "no-device-connector"),
])
def test_lmcache_start_failure_is_named_whichever_formatter_printed_the_traceback(tmp_path: Path, shape: str,
                                                                                 last: str, cause: str) -> None:
    rep = report(tmp_path, _traceback(last, shape))
    kv004 = [f for f in rep["findings"] if f["rule"] == "KV004"]
    assert kv004 and top(kv004[0])[0] == cause
    death = next(f for f in rep["findings"] if f["rule"] == "SRV001")
    assert top(death)[0] != "cause-not-in-excerpt"  # the root error is right there
    assert death["measurements"]["root_error"] in last


@pytest.mark.parametrize("shape", ["raw", "vllm-header"])
@pytest.mark.parametrize("last", [
    "AssertionError: Mismatch in tokens to load: 4095 vs 4096 (tokens in lmcache) - 0 (tokens in vllm) - 0 (full lmcache "
    "hits subtracts last token to recalculate logits) for request cmpl-1-0",
    "AssertionError: Preempted request cmpl-1-0 has num_computed_tokens 512 but expected 768 (full_hit_adj=False)",
    "ValueError: Request cmpl-1-0 is not in _unfinished_requests, but it is scheduled to be cached",
], ids=["tokens-to-load", "preempted", "unfinished"])
def test_lmcache_adapter_assertion_is_the_named_root_of_an_engine_death(tmp_path: Path, shape: str, last: str) -> None:
    """log-formats.md §10: the adapter's scheduler-side assertions surface in vLLM tracebacks."""
    death = next(f for f in report(tmp_path, _traceback(last, shape))["findings"] if f["rule"] == "SRV001")
    assert top(death)[0] == "lmcache-adapter-assertion"


def test_a_foreign_assertion_stays_a_worker_exception(tmp_path: Path) -> None:
    death = next(f for f in report(tmp_path, _traceback("AssertionError: num_local_blocks <= num_remote_blocks", "raw"))
                 ["findings"] if f["rule"] == "SRV001")
    assert top(death)[0] == "worker-exception"


@pytest.mark.parametrize("prefixed", [True, False])
@pytest.mark.parametrize("version", ["0.3.12", "0.3.15", "0.4.7", "0.5.6"])
def test_hash_seed_incident_is_zero_hits_on_repeats_with_hash_inconsistency_first(tmp_path: Path, version: str,
                                                                                   prefixed: bool) -> None:
    rep = report(tmp_path, g.hash_seed_unset(version, prefixed=prefixed).lines)
    kv002 = [f for f in rep["findings"] if f["rule"] == "KV002"]
    assert kv002 and top(kv002[0])[0] == "hash-inconsistency"
    assert not [f for f in rep["findings"] if f["rule"] == "KV001"]  # a miss, not a shortfall


# ---- multi-process mode (log-formats.md §12) and vLLM speculative lines of older eras ---------------------
MP = "lmcache.integration.vllm.vllm_multi_process_adapter"


@pytest.mark.parametrize(("msg", "loc", "logger", "key"), [
    ("LOOKUP to tcp://10.0.0.2:5555 timed out after 5.0s. Marking server as unhealthy.",
     "vllm_multi_process_adapter.py:1306", MP, "unhealthy"),
    ("Bypassing LMCache for request cmpl-3f1-0 after a failed async KV load; the prompt will be recomputed locally.",
     "lmcache_mp_connector.py:1280", "lmcache.integration.vllm.lmcache_mp_connector", "retrieve"),
    ("Something went wrong when processing the store request for request_id=cmpl-3f1-0",
     "vllm_multi_process_adapter.py:2121", MP, "store"),
])
@pytest.mark.parametrize("paste", ["plain", "grep-n", "kubectl-prefix"])
def test_multi_process_connector_line_alone_is_reported(tmp_path: Path, msg: str, loc: str, logger: str, key: str,
                                                        paste: str) -> None:
    lines = [g.lmcache_line(msg, level="WARNING", loc=loc, logger=logger, proc="EngineCore_DP0 pid=2210")]
    rep = report(tmp_path, lines if paste == "plain" else g.PASTES[paste](lines))
    kv009 = [f for f in rep["findings"] if f["rule"] == "KV009"]
    assert kv009 and kv009[0]["measurements"][key] == 1


def test_v0_speculative_line_names_its_own_k_source(tmp_path: Path) -> None:
    body = ("Speculative metrics: Draft acceptance rate: 0.610, System efficiency: 0.500, Number of speculative tokens: 3, "
            "Number of accepted tokens: 732, Number of draft tokens: 1200, Number of emitted tokens: 1132.")
    spec = report(tmp_path, [g.vllm_line(body, loc="metrics.py:460")])["context"]["speculative"]
    assert spec["num_speculative_tokens"] == 3 and "Number of speculative tokens" in spec["num_speculative_tokens_source"]


@pytest.mark.parametrize("era", sorted(g.VLLM_ERAS))
def test_acceptance_drop_is_found_in_every_vllm_era_and_a_steady_run_is_quiet(tmp_path: Path, era: str) -> None:
    steady = report(tmp_path, g.spec_series(era, [0.6] * 24), "steady.log")
    assert not [f for f in steady["findings"] if f["severity"] in ("warning", "error")]
    assert steady["inputs"][0]["recognized"] == steady["inputs"][0]["lines"]
    drop = report(tmp_path, g.spec_series(era, [0.61, 0.6, 0.62] * 4 + [0.3, 0.31, 0.29] * 4), "drop.log")
    assert [f for f in drop["findings"] if f["rule"] == "SD001"]
    assert drop["context"]["speculative"]["num_speculative_tokens"] == 3


# ---- honesty: nothing invented from a fragment; the contract's exit codes ----------------------------------
@pytest.mark.parametrize("paste", ["plain", *g.PASTES])
def test_fragment_invents_no_year_tp_size_or_exact_version(tmp_path: Path, paste: str) -> None:
    lines = [g.vllm_line("Recovered from KV load failure: 1 request(s) rescheduled (2048 tokens affected).",
                         level="WARNING", loc="scheduler.py:2665", proc="EngineCore_DP0 pid=2210")]
    lines = lines if paste == "plain" else g.PASTES[paste](lines)
    rep = report(tmp_path, lines)
    ctx = rep["context"] or {}
    assert ctx.get("tensor_parallel_size") is None and ctx.get("lmcache_version") is None
    text = json.dumps(rep)
    assert "2026" not in text and "2025" not in text  # a vLLM line prints no year


@pytest.mark.parametrize(("proc", "low"), [("Worker_TP0 pid=5117", 2), ("Worker_PP1_TP0 pid=5117", 2),
                                           ("VllmWorker TP0 pid=5117", 2), ("Worker_TP2 pid=5117", 3),
                                           ("Worker pid=5117", 1)])
def test_a_tp_suffix_alone_proves_more_than_one_rank(tmp_path: Path, proc: str, low: int) -> None:
    """vLLM adds ``_TP<t>`` to a worker's name only when TP > 1 (multiproc_executor.py, 0.32.0 :1088-1103)."""
    line = g.lmcache_line("Num retrieved tokens: 0, num expected tokens: 256", level="ERROR",
                          loc="vllm_v1_adapter.py:882", proc=proc)
    ctx = report(tmp_path, [line])["context"]
    assert ctx["tensor_parallel_size_at_least"] == low and ctx["tensor_parallel_size_inferred"] is True
    assert ctx["tensor_parallel_size"] is None  # a lower bound is not the size


def test_rank_label_gives_a_lower_bound_never_a_stated_tp_size(tmp_path: Path) -> None:
    rep = report(tmp_path, g.Log("0.5.6").mismatch(g.REQ, 3, 0, 256).lines)
    ctx = rep["context"]
    assert ctx["tensor_parallel_size_inferred"] is True and ctx["ranks_seen"] == ["TP3"]
    assert "tensor_parallel_size" not in kv001(rep)["measurements"]


@pytest.mark.parametrize("paste", ["plain", *g.PASTES])
def test_cli_exit_codes_on_fragments(tmp_path: Path, paste: str) -> None:
    runner = CliRunner()
    lines = fragment("pin-accounting-bug")
    lines = lines if paste == "plain" else g.PASTES[paste](lines)
    found = runner.invoke(app, ["analyze", g.write_lines(tmp_path / "f.log", lines), "--format", "json"])
    assert found.exit_code == 1, found.output[-300:]
    assert json.loads(found.stdout)["findings"]
    junk = runner.invoke(app, ["analyze", g.write_lines(tmp_path / "j.log", ["hello", "world"]), "--format", "json"])
    assert junk.exit_code == 3
    assert "Traceback" not in junk.output and "Traceback" not in found.output
