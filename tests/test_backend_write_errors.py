"""KV016 over the catalog: every storage backend's failed write that LMCache can print, not only the messages
written by hand. The excerpt under ``real_kv/`` is from LMCache #3376 (S3 to MinIO, HTTP 400)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule as _by_rule

from specdiag.analyzers.kv_writes import catalogued_write_failure
from specdiag.catalog import catalog

HERE = Path(__file__).resolve().parent / "real_kv"


def test_an_s3_upload_failure_is_a_failed_write_quoting_its_reason_not_its_key():
    """The ERROR line ``Failed to upload <key> to S3: AWS_ERROR_S3_INVALID_RESPONSE_STATUS: …`` was counted in a
    LOG001 warning about the traceback beside it: no rule said that the chunks were not stored."""
    kv = _by_rule(HERE / "s3-upload-failed-400.log")["KV016"]
    assert kv.measurements["failed_writes"] == 1
    assert list(kv.measurements["errors"]) == [
        "Failed to upload … to S3: AWS_ERROR_S3_INVALID_RESPONSE_STATUS: Invalid response status from request"]
    assert kv.causes[0].id == "backend-write-failure"


def test_an_s3_callbacks_raw_traceback_in_the_engine_core_is_no_death():
    """awscrt's callback printed its exception raw under the engine core's prefix ('Exception ignored in …' between):
    the process went on. Only a raw traceback through vLLM's own code is the engine core's exit."""
    assert "SRV001" not in _by_rule(HERE / "s3-upload-failed-400.log")


@pytest.mark.parametrize(("fmt", "module", "write"), [
    ("Failed to upload %s to S3: %s", "lmcache/v1/storage_backend/connector/s3_connector.py", True),
    ("Failed to upload %s to Azure: %s", "lmcache/v1/storage_backend/connector/azure_connector.py", True),
    ("Fail to put data: %s", "lmcache/v1/storage_backend/connector/valkey_connector.py", True),
    ("Failed to download %s from Azure: %s", "lmcache/v1/storage_backend/connector/azure_connector.py", False),
    ("Bigtable NotFound in batched_get: %s", "lmcache/v1/storage_backend/connector/bigtable_connector.py", False),
    ("Serde wrapper: error releasing write-locked leftover temps", "lmcache/v1/distributed/l2_adapters/serde_wrapper.py",
     False)])
def test_the_catalogs_backend_errors_are_writes_by_their_format(fmt, module, write):
    entries = [e for e in catalog().entries if e.fmt == fmt and e.module.endswith(module.split("/", 1)[1])]
    assert entries, fmt
    assert {catalogued_write_failure(e) for e in entries} == {write}


def test_the_write_failures_cover_many_backends_not_one_connectors_wording():
    """The classifier reads formats, so it must find writes across LMCache's backends (S3, Azure, Valkey, GDS, the
    L2 adapters, Mooncake's store), not only the connector whose wording it was written against."""
    writes = [e for e in catalog().entries if catalogued_write_failure(e)]
    assert len(writes) >= 40 and len({e.module for e in writes}) >= 15


def test_no_rule_takes_catalog_events_by_id_which_would_keep_every_quiet_record_read():
    """A rule with the catalog's event id in ``events`` wants every DEBUG/INFO record the catalog knows: the
    engine then learns no quiet place (``engine._learn_quiet``) and reads the noise log's records line by line.
    Rules take catalogued warnings and errors through ``levels`` (KV016's writes, KV020, LOG001)."""
    from specdiag.analyzers.base import all_rules
    from specdiag.events import CATALOG_EVENT

    assert [code for code, rule in all_rules().items() if CATALOG_EVENT in rule.events] == []
