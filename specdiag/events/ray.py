"""Ray's own lines around a vLLM server run on Ray (``--distributed-executor-backend ray``): records of kind ``ray``.

A TP/PP worker that runs as a Ray actor and crashes in native code prints no Python traceback: its C++ core
logs the exception nothing caught, the failure-signal handler prints the signal, and the raylet reports the
worker's death to the driver. These are the lines that say a worker died, and sometimes why. Wording:
Ray 2.x (``src/ray/util/logging.cc``, abseil's failure-signal handler that Ray installs, ``src/ray/raylet/
node_manager.cc``).
"""

from __future__ import annotations

from specdiag.events import Template

T = Template
R = "ray"
#: what vLLM's engine core (or a Ray driver) prints of a Ray actor whose process died, inside an exception's text
ACTOR_DEAD = "The actor is dead because its worker process has died"
_ACTOR_DEAD = (r"(?P<what>" + ACTOR_DEAD + r")\.(?P<rest>.*)$")
_ACTOR_DEAD_SAMPLE = (ACTOR_DEAD + ". Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits "
                      "with a connection error code 2. End of file.")

RAY_TEMPLATES: list[Template] = [
    # absl::InstallFailureSignalHandler (Ray's worker and raylet install it): SIGSEGV, SIGABRT, SIGBUS, SIGFPE,
    # SIGILL, SIGTRAP, SIGTERM; written to stderr, which Ray forwards under the worker's prefix
    T("R_FATAL_SIGNAL", R, "***", "received at time=",
      r"\*\*\* (?P<signal>SIG[A-Z]{2,8}) received at time=(?P<epoch>\d{1,20})", "Ray 2.x",
      "abseil failure_signal_handler.cc (installed by src/ray/util/logging.cc)",
      "*** SIGSEGV received at time=1741255200 on cpu 3 ***", ints=("epoch",)),
    # RayLog's terminate handler: a C++ exception that nothing caught, then std::abort (SIGABRT follows)
    T("R_UNHANDLED", R, "Unhandled", "Unhandled exception",
      r"Unhandled exception: (?P<exc>[\w:]{1,200})\.? what\(\): (?P<detail>.*)$", "Ray 2.x",
      "src/ray/util/logging.cc (TerminateHandler)",
      "Unhandled exception: N3c1010ErrorE. what(): CUDA error: an illegal memory access was encountered"),
    # the raylet's error for a worker process that exited while it ran a task (pushed to the driver, which
    # prints it under ``(raylet)``); its exit detail lists possible reasons, it does not know which one
    T("R_WORKER_DIED", R, "A", "A worker died or was killed",
      r"A worker died or was killed while executing a task by an unexpected system error\.(?P<rest>.*)$", "Ray 2.x",
      "src/ray/raylet/node_manager.cc",
      "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, "
      "check the logs for the dead worker. RayTask ID: ffff Worker ID: 8c2d Node ID: 1f3e Worker IP address: 10.0.0.2 "
      "Worker port: 10123 Worker PID: 5191 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly "
      "exits with a connection error code 2. End of file.", level="ERROR"),
    # the stack the failure-signal handler prints after the signal (``PC: @ addr … function``, ``    @ addr …``),
    # directly or re-logged by Ray's logging.cc at ERROR
    T("R_SIGNAL_STACK", R, "PC:|", "@ ", r"(?:PC: |\s{1,40})@ +(?P<addr>\S{1,40})(?P<rest>.*)$", "Ray 2.x",
      "abseil failure_signal_handler.cc", "PC: @     0x7f7e7ba49b8a  (unknown)  addProxyOpIfNeeded()"),
    # a Ray actor's death as the caller's exception text says it (ActorDiedError), on an engine core's
    # logger line or a raw traceback line
    T("R_ACTOR_DEAD", "vllm", None, ACTOR_DEAD, _ACTOR_DEAD, "Ray 2.x", "python/ray/exceptions.py (ActorDiedError)",
      _ACTOR_DEAD_SAMPLE, outside="Ray's exception text inside a vLLM logger line, not a vLLM logging call"),
    T("R_ACTOR_DEAD_RAW", "text", None, ACTOR_DEAD, _ACTOR_DEAD, "Ray 2.x", "python/ray/exceptions.py (ActorDiedError)",
      _ACTOR_DEAD_SAMPLE),
    # Ray Serve's controller when a replica's start raised (DeploymentState, check_ready): it stops the replica; the
    # replica's exception follows in the controller's traceback
    T("R_SERVE_REPLICA_FAILED", R, "Exception", "the replica will be stopped",
      r"Exception in Replica\(id='(?P<replica>[^']{1,100})', deployment='(?P<deployment>[^']{1,200})'[^)]{0,300}\), "
      r"the replica will be stopped", "Ray 2.x", "python/ray/serve/_private/deployment_state.py (check_ready)",
      "Exception in Replica(id='m37qpvvp', deployment='vLLM:qwen-1_5b', app='default'), the replica will be stopped.",
      level="ERROR"),
]
