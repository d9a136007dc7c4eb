"""fleet --executor ray on a local Ray cluster: the same report as the process pool, also when a worker dies.

Ray is not a test dependency (it is large); CI runs this file in its own environment with Ray installed
(``.ci/run``). Skipped when Ray is not importable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from specdiag.engine import AnalyzeOptions  # noqa: E402
from specdiag.fleet.run import run_fleet  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rayfleet")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_fleet.py"), str(out), "--pods", "4", "--size-mb", "12",
                    "--kv001", "1", "--collapse", "0"], capture_output=True, check=True)
    return out


@pytest.fixture(scope="module")
def local_ray():
    tmp = tempfile.mkdtemp(prefix="sdray-", dir="/tmp")  # AF_UNIX socket paths must stay short
    os.environ["RAY_TMPDIR"] = tmp
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=tmp)
    yield
    ray.shutdown()


def _rows(report) -> list:
    return json.loads(json.dumps([{k: v for k, v in r.to_dict().items() if k != "sources"} for r in report.deployments],
                                 default=str))


def test_ray_executor_gives_the_identical_report(fleet, local_ray):
    opts = AnalyzeOptions(paths=(), jobs=2)
    local = run_fleet([str(fleet)], opts, executor="local")
    remote = run_fleet([str(fleet)], opts, executor="ray")
    assert _rows(remote) == _rows(local)
    assert [s.to_dict() for s in remote.contrast] == [s.to_dict() for s in local.contrast]
    assert [rc.to_dict() for rc in remote.contrast_rules] == [rc.to_dict() for rc in local.contrast_rules]


def _ray_task_pids() -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "ray::analyze_group" in line]


def test_a_killed_worker_is_retried_and_nothing_is_lost(fleet, local_ray):
    opts = AnalyzeOptions(paths=(), jobs=2)
    expected = _rows(run_fleet([str(fleet)], opts, executor="local"))
    killed: list[int] = []

    def killer(stop: threading.Event) -> None:
        while not stop.is_set() and not killed:
            pids = _ray_task_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            time.sleep(0.01)

    for _ in range(3):  # a task can finish between two looks: run the fleet again until one was killed mid-task
        stop = threading.Event()
        t = threading.Thread(target=killer, args=(stop,))
        t.start()
        report = run_fleet([str(fleet)], opts, executor="ray")
        stop.set()
        t.join()
        if killed:
            break
    assert killed, "no Ray task process was seen to kill"
    assert _rows(report) == expected  # the lost task was retried: every pod has its row, no error
