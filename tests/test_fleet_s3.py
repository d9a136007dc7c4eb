"""Remote inputs: a fleet read from a real S3-compatible server on 127.0.0.1 equals the same fleet on disk."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from specdiag.engine import AnalyzeOptions, analyze  # noqa: E402
from specdiag.fleet.run import run_fleet  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TINY = ("(APIServer pid=1) INFO 05-06 08:00:{s:02d} [loggers.py:236] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
        "Prefix cache hit rate: 10.0%\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("s3fleet")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_fleet.py"), str(out), "--pods", "3", "--size-mb", "3",
                    "--kv001", "1", "--collapse", "0"], capture_output=True, check=True)
    for i in range(60):  # a listing of hundreds of keys: many small pods with rotated files
        pod = out / f"tiny-{i:03d}"
        pod.mkdir()
        (pod / "serve.log").write_text("".join(TINY.format(s=s) for s in range(0, 30, 10)))
        (pod / "serve.log.1").write_text(TINY.format(s=0))
        (pod / "notes.json").write_text("{}")
    return out


@pytest.fixture(scope="module")
def s3(fleet_dir):
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    old = {k: os.environ.get(k) for k in [*env, "AWS_ENDPOINT_URL"]}
    os.environ.update(env)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port())
    server.start()
    os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{server._port}"  # noqa: SLF001
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.mkdir("logs")
    fs.put(str(fleet_dir), "logs/fleet", recursive=True)
    yield fs
    server.stop()
    s3fs.S3FileSystem.clear_instance_cache()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _rows(report) -> list:
    return [(r.id, r.context, {k: v["count"] for k, v in r.by_rule().items()}, r.error) for r in report.deployments]


def test_fleet_from_s3_equals_the_fleet_on_disk(fleet_dir, s3):
    assert len(s3.find("logs/fleet")) >= 180
    local = run_fleet([str(fleet_dir)], AnalyzeOptions(paths=(), jobs=1))
    remote = run_fleet(["s3://logs/fleet"], AnalyzeOptions(paths=(), jobs=2))  # pool workers stream from S3 too
    assert _rows(remote) == _rows(local)
    assert [s.to_dict() for s in remote.contrast] == [s.to_dict() for s in local.contrast]
    assert [rc.to_dict() for rc in remote.contrast_rules] == [rc.to_dict() for rc in local.contrast_rules]
    assert any(r.findings for r in remote.deployments)
    assert all(src.startswith("s3://logs/fleet/") for r in remote.deployments for src in r.sources)


def test_a_gzip_object_is_streamed_and_analysed_like_the_file(fleet_dir, s3):
    local = analyze([str(fleet_dir / "pod-00" / "serve.log.gz")])
    remote = analyze(["s3://logs/fleet/pod-00/serve.log.gz"])
    assert [f.fingerprint for f in remote.findings] == [f.fingerprint for f in local.findings]
    assert remote.inputs[0]["lines"] == local.inputs[0]["lines"] > 1000


def test_a_missing_object_is_a_one_line_error_without_credentials(s3, tmp_path):
    from typer.testing import CliRunner

    from specdiag.cli import app

    res = CliRunner().invoke(app, ["analyze", "s3://logs/nothing-here/x.log"])
    assert res.exit_code == 2 and "s3://logs/nothing-here/x.log" in res.output
    assert "testing" not in res.output and "Traceback" not in res.output
    shutil.rmtree(tmp_path, ignore_errors=True)
