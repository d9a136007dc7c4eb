"""SRV007: NCCL's own WARN lines, the transport they name. Real excerpts under ``tests/real_nccl/``: each was a
LOG001 warning on the vLLM line beside it, or 'nothing recognised', with NCCL's line, which names the cause, unread."""

from __future__ import annotations

from pathlib import Path

import pytest
from pasted import findings_by_rule, write_paste

from specdiag.analyzers.nccl import kind_of

HERE = Path(__file__).resolve().parent / "real_nccl"


@pytest.mark.parametrize("name, cause, place", [
    # OpenRLHF PR #335: the trainer → vLLM weight broadcast over IB; vLLM's 'Error executing method update_weight'
    ("openrlhf-update-weight-ibv-modify-qp.log", "nccl-ib-network", "ibvwrap.c:160"),
    # verifiers #181: collective_rpc failed; NCCL's P2P transport could not use CUDA IPC
    ("verifiers-p2p-cuda-failure-collective-rpc.log", "nccl-cuda-transport", "transport/p2p.cc:298"),
    # vLLM #6732: 8 GPUs fail, 2 pass: NVLS (NVLink SHARP) is used only with the whole node
    ("nvls-cuda-failure-eight-gpus.log", "nccl-nvls", "transport/nvls.cc:157"),
])
def test_an_nccl_warn_line_names_the_transport_that_failed(name, cause, place):
    srv = findings_by_rule(HERE / name)["SRV007"]
    assert srv.causes[0].id == cause and srv.measurements["first_place"] == place


def test_the_ranks_are_counted_by_nccls_own_host_and_pid():
    srv = findings_by_rule(HERE / "nvls-cuda-failure-eight-gpus.log")["SRV007"]
    assert srv.measurements["processes"] == 4 and srv.measurements["warn_lines"] == 4


def test_an_nccl_error_a_caller_raised_makes_its_warn_lines_an_error(tmp_path):
    lines = ["node-0:77:77 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-abc to 9637892 bytes",
             "[rank0]: RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"]
    srv = findings_by_rule(write_paste(tmp_path, lines))["SRV007"]
    assert srv.severity == "error" and srv.causes[0].id == "nccl-shm"
    assert "unhandled system error" in srv.summary


def test_warn_lines_without_a_raised_error_are_a_warning_that_says_so(tmp_path):
    lines = ["node-0:77:80 [0] proxy.cc:1625 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"]
    srv = findings_by_rule(write_paste(tmp_path, lines))["SRV007"]
    assert srv.severity == "warning" and srv.causes[0].id == "nccl-socket-network"
    assert "No NCCL error raised by a caller" in srv.summary


def test_ncclS_info_lines_alone_are_no_finding(tmp_path):
    lines = ["node-0:77:77 [0] NCCL INFO Channel 00/02 : 0 1", "node-0:77:77 [0] NCCL INFO transport/nvls.cc:328 -> 1"]
    assert "SRV007" not in findings_by_rule(write_paste(tmp_path, lines))


@pytest.mark.parametrize("detail, place, kind", [
    ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 10", "init.cc:841", "nccl-duplicate-gpu"),
    ("NET/IB : Got completion from peer 10.0.0.2<45678> with error 12, opcode 0, len 0, vendor err 129", "net_ib.cc:1", "nccl-ib-network"),
    ("Net : Connect to 10.0.0.2<39485> failed : Connection refused", "misc/socket.cc:484", "nccl-socket-network"),
    ("Cuda failure 'out of memory'", "include/alloc.h:103", "nccl-cuda-transport"),
    ("Something NCCL never said", None, "nccl-other"),
])
def test_each_kind_by_its_words_or_file(detail, place, kind):
    assert kind_of(detail, place) == kind


@pytest.mark.parametrize("name, cause", [
    # vLLM #798: 'ncclInternalError: Internal check failed. / Last error: / Proxy Call to rank 7 failed (Connect)'
    ("ray-proxy-call-to-rank-failed.log", "nccl-socket-network"),
    # verl #726: '… ncclSystemError … Last error: / socketStartConnect: Connect to 169.254.0.1<40815> failed'
    ("verl-socketstartconnect-last-error.log", "nccl-socket-network"),
    # production-stack #276: a 64 MiB /dev/shm in the pod: 'Error while creating shared memory segment /dev/shm/nccl-…'
    ("k8s-shm-segment-64m.log", "nccl-shm"),
    # verl #161: '… Last error: / Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 10'
    ("verl-duplicate-gpu-last-error.log", "nccl-duplicate-gpu"),
])
def test_ncclS_reason_relayed_by_torch_under_last_error_names_the_transport(name, cause):
    found = findings_by_rule(HERE / name)
    srv = found["SRV007"]
    assert srv.causes[0].id == cause and srv.severity == "error" and srv.measurements["error_raised"]
    assert "ncclSystemError" not in (found["LOG001"].summary if "LOG001" in found else "")


def test_a_warn_line_of_no_known_kind_without_a_raised_error_is_only_info(tmp_path):
    """NVIDIA/nccl #1297: 'NCCL WARN Could not find real path of rxe0' (a software RDMA device NCCL then used) was
    'failed calls' at warning."""
    line = "host:1:1 [0] misc/utils.cc:187 NCCL WARN Could not find real path of rxe0 (/sys/devices/virtual/infiniband/rxe0)"
    srv = findings_by_rule(write_paste(tmp_path, [line]))["SRV007"]
    assert srv.severity == "info" and srv.causes[0].id == "nccl-other"


def test_a_workers_failed_init_device_after_a_warn_line_is_the_raised_error():
    """vLLM #17160: 'graph/rings.cc:51 NCCL WARN Error : ring 0 does not contain rank 1', then 'Error executing method
    'init_device'': it said the call 'may have been retried', exit 0."""
    found = findings_by_rule(HERE / "ray-ring-does-not-contain-rank-init-device.log")
    assert found["SRV007"].severity == "error" and "may have been retried" not in found["SRV007"].summary
    assert "LOG001" not in found


def test_a_cuda_failure_printed_by_init_cc_is_the_communicators_creation_not_the_peer_to_peer_path():
    """NVIDIA/nccl #2101: a VMware vGPU with unified memory off, 'init.cc:426 NCCL WARN Cuda failure 'operation not
    supported'' under NCCL 2.27.5, then vLLM's 'RuntimeError: NCCL error: unhandled cuda error' in a worker. It was
    nccl-cuda-transport (check nvidia-smi topo -m, NCCL_P2P_DISABLE=1), and SRV001 a generic worker-exception."""
    found = findings_by_rule(HERE / "vgpu-init-cuda-failure-operation-not-supported.log")
    assert found["SRV007"].causes[0].id == "nccl-cuda-init" and found["SRV007"].severity == "error"
    assert "P2P" not in found["SRV007"].next_steps[0]
    assert found["SRV001"].causes[0].id == "nccl-error"


def test_a_warn_line_printed_by_shmutils_is_the_shared_memory_transport_whatever_its_words():
    """NVIDIA/nccl #1589: 'misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory', then the
    attach of /dev/shm/nccl-…; the first line's words name no transport, and it was nccl-other."""
    srv = findings_by_rule(HERE / "shmutils-open-failed-attach.log")["SRV007"]
    assert srv.causes[0].id == "nccl-shm"
