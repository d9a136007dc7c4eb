"""torch's own C++ log lines around a vLLM server (``c10`` logging, glog's format in brackets): records of kind
``glog`` at ERROR or worse.

A tensor-parallel worker waits in NCCL collectives; when one does not complete within the process group's
timeout, torch's NCCL watchdog (``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``,
``WorkNCCL::checkTimeout`` and the watchdog loop) logs the collective that timed out and, with
``TORCH_NCCL_ASYNC_ERROR_HANDLING`` on (torch's default since 2.2; ``NCCL_ASYNC_ERROR_HANDLING`` before), takes
the whole process down. vLLM prints nothing of its own about it: these are the lines that say why a worker
died. Wording: torch 2.1–2.6 (``[Rank N]`` messages; ``[PG N Rank N]`` when the watchdog thread reports it).
"""

from __future__ import annotations

from specdiag.events import Template

T = Template
G = "glog"
_WHERE = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"

TORCH_TEMPLATES: list[Template] = [
    # WorkNCCL::checkTimeout: the collective (its sequence number and type) and how long it ran; the watchdog
    # thread's own report quotes it after '[PG N Rank N] Process group watchdog thread terminated with exception: '
    T("T_NCCL_TIMEOUT", G, None, "Watchdog caught collective operation timeout",
      r"(?:\[PG [^\]]{0,80} Rank \d{1,6}\] Process group watchdog thread terminated with exception: )?"
      r"\[(?:PG [^\]]{0,80} )?Rank (?P<rank>\d{1,6})\] Watchdog caught collective operation timeout: Work[NH]CCL\(SeqNum=(?P<seq>\d{1,20}), "
      r"OpType=(?P<op>\w{1,32})[^)]{0,400}?Timeout\(ms\)=(?P<timeout_ms>\d{1,12})\) ran for (?P<ran_ms>\d{1,15}) "
      r"milliseconds before timing out", "torch 2.x", f"{_WHERE} (WorkNCCL::checkTimeout)",
      "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=134217728, "
      "NumelOut=134217728, Timeout(ms)=600000) ran for 600059 milliseconds before timing out.",
      ints=("rank", "seq", "timeout_ms", "ran_ms")),
    # then, with async error handling on, the process is aborted (SIGABRT: a worker's exit code -6)
    T("T_NCCL_TAKEDOWN", G, None, "taking the entire process down",
      r"\[(?:PG [^\]]{0,80} )?Rank (?P<rank>\d{1,6})\] To avoid data inconsistency, we are taking the entire process down", "torch 2.x",
      f"{_WHERE} (ProcessGroupNCCL::watchdogHandler)",
      "[Rank 0] To avoid data inconsistency, we are taking the entire process down.", ints=("rank",)),
    # the rest of the watchdog's report of the same timeout: which work item, and the warning before the abort
    T("T_NCCL_WORK", G, None, "Timeout at NCCL work",
      r"\[(?:PG [^\]]{0,80} )?Rank (?P<rank>\d{1,6})\] Timeout at NCCL work: (?P<seq>\d{1,20})", "torch 2.x",
      f"{_WHERE} (ProcessGroupNCCL::watchdogHandler)",
      "[PG 2 Rank 0] Timeout at NCCL work: 2, last enqueued NCCL work: 2, last completed NCCL work: 1.",
      ints=("rank", "seq")),
    T("T_NCCL_FAILED_OPS", G, None, "Some NCCL operations have failed or timed out",
      r"\[(?:PG [^\]]{0,80} )?Rank (?P<rank>\d{1,6})\] Some NCCL operations have failed or timed out", "torch 2.x",
      f"{_WHERE} (ProcessGroupNCCL::watchdogHandler)",
      "[Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
      "subsequent GPU operations might run on corrupted/incomplete data.", ints=("rank",)),
]
#: the watchdog's lines that report a timeout without being its root or the abort (SRV001 reads them)
NCCL_REPORT = ("T_NCCL_WORK", "T_NCCL_FAILED_OPS")
