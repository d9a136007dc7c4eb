"""Start, watch and tear down server processes (vLLM, Redis) without leaving anything behind.

Why so careful: vLLM spawns an EngineCore and Worker processes, LMCache opens ZMQ IPC sockets, and a user
pressing Ctrl-C in the middle of a cell must not end up with a 4 GB orphan holding a port. Each server is
started in its own session (``start_new_session=True``) so one ``killpg`` reaches the whole tree; before
signalling we also collect every process whose session id is the leader's, which catches children that were
re-parented after their parent died. Temp files go into a per-cell directory that is removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: every ManagedProcess that is still running, so an interrupted run can clean up whatever was started
_LIVE: set[ManagedProcess] = set()


class ServerError(RuntimeError):
    """A server did not come up (exited or timed out); the message points at its log."""


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the small race until the server binds is accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(ppid, session id) of ``pid`` from /proc, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may contain spaces: split after the last ')'
    rest = raw[raw.rfind(")") + 2:].split()
    try:
        return int(rest[1]), int(rest[3])
    except (IndexError, ValueError):
        return None


def session_members(sid: int) -> list[int]:
    """PIDs whose session id is ``sid`` (Linux /proc); empty elsewhere."""
    out = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st and st[1] == sid:
                out.append(int(entry))
    return out


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st:
                children.setdefault(st[0], []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    st = Path(f"/proc/{pid}/status")
    try:
        for line in st.read_text().splitlines():
            if line.startswith("State:"):
                return "Z" not in line.split()[1]  # a zombie holds nothing but a table entry
    except OSError:
        return False
    return True


@dataclass(eq=False)
class ManagedProcess:
    """One server process tree, logging to ``log_path``; ``stop()`` is idempotent and thorough."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    stopped: bool = False
    killed_pids: list[int] = field(default_factory=list)

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it; closed in stop()
        try:
            self.proc = subprocess.Popen(  # argument list, never a shell
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, cwd=self.cwd, start_new_session=True,
            )
        finally:
            log.close()
        _LIVE.add(self)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tree(self) -> list[int]:
        """The leader, its descendants and anything else still in its session."""
        if self.proc is None:
            return []
        pids = {self.pid, *descendants(self.pid), *session_members(self.pid)}
        return sorted(p for p in pids if _alive(p))

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the whole tree, wait up to ``grace_s``, then SIGKILL what is left. Safe to call twice."""
        if self.proc is None or self.stopped:
            return
        pids = self.tree()
        self.killed_pids = pids
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
            for p in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p, sig)
            deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
            while time.monotonic() < deadline:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=0.1)
                pids = [p for p in pids + self.tree() if _alive(p)]
                if not pids and self.proc.poll() is not None:
                    break
            if not pids and self.proc.poll() is not None:
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=1)
        self.stopped = True
        _LIVE.discard(self)


def stop_all() -> None:
    """Stop every ManagedProcess still alive (used on interrupts and at exit)."""
    for mp in list(_LIVE):
        mp.stop(grace_s=5.0)


def wait_http_ok(url: str, proc: ManagedProcess, timeout_s: float, interval_s: float = 1.0) -> float:
    """Poll ``url`` until it answers 200; fail early if the process exits. Returns seconds waited."""
    t0 = time.monotonic()
    while True:
        if not proc.running():
            raise ServerError(f"{proc.name} exited with code {proc.proc.returncode if proc.proc else '?'} "
                              f"before it was healthy; see {proc.log_path}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - loopback URL built by us
                if r.status == 200:
                    return time.monotonic() - t0
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() - t0 > timeout_s:
            raise ServerError(f"{proc.name} not healthy after {timeout_s:.0f} s; see {proc.log_path}")
        time.sleep(interval_s)


def wait_redis(port: int, proc: ManagedProcess, timeout_s: float = 20.0) -> None:
    """Redis is up when PING answers +PONG."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if not proc.running():
            raise ServerError(f"redis exited early; see {proc.log_path}")
        with contextlib.suppress(OSError):
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        time.sleep(0.2)
    raise ServerError(f"redis not answering on 127.0.0.1:{port}; see {proc.log_path}")


def redis_evicted_keys(port: int, timeout_s: float = 2.0) -> int | None:
    """Redis's own count of keys it evicted (``INFO stats`` → ``evicted_keys``), or None if it cannot be read:
    the eviction presets check that the small store really evicted."""
    buf = b""
    with contextlib.suppress(OSError):
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(b"INFO stats\r\n")
            while b"evicted_keys:" not in buf or not buf.split(b"evicted_keys:", 1)[1].count(b"\r\n"):
                chunk = s.recv(65536)
                if not chunk or len(buf) > 1 << 20:
                    break
                buf += chunk
    for line in buf.decode("ascii", "replace").splitlines():
        if line.startswith("evicted_keys:"):
            value = line.split(":", 1)[1].strip()
            return int(value) if value.isdigit() else None
    return None


# ------------------------------------------------------------------------------------------- temp files
#: names vLLM/LMCache create directly in /tmp even when TMPDIR points elsewhere (cpu-repro.md §1)
_TMP_PATTERNS = ("engine_", "vllm_dist_", "lmcache_", "torchinductor_")


def _looks_like_uuid(name: str) -> bool:
    return len(name) == 36 and name.count("-") == 4


@dataclass
class TempArea:
    """A per-cell temp directory plus a watch on /tmp for the sockets that ignore TMPDIR.

    Only entries that appeared in /tmp *during* the cell and match the known vLLM/LMCache patterns are
    removed, so an unrelated file of another program is never touched.
    """

    root: Path
    system_tmp: Path
    before: set[str]
    removed: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, prefix: str = "sdr-") -> TempArea:
        sys_tmp = Path(tempfile.gettempdir())
        before = set(os.listdir(sys_tmp)) if sys_tmp.is_dir() else set()
        # short path on purpose: AF_UNIX socket paths are limited to 107 bytes
        root = Path(tempfile.mkdtemp(prefix=prefix, dir=sys_tmp))
        (root / "prometheus").mkdir()
        return cls(root=root, system_tmp=sys_tmp, before=before)

    def new_entries(self) -> list[Path]:
        now = set(os.listdir(self.system_tmp)) if self.system_tmp.is_dir() else set()
        out = []
        for name in sorted(now - self.before):
            if name == self.root.name:
                continue
            if name.startswith(_TMP_PATTERNS) or _looks_like_uuid(name):
                out.append(self.system_tmp / name)
        return out

    def cleanup(self) -> None:
        for p in [*self.new_entries(), self.root]:
            try:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
                self.removed.append(str(p))
            except OSError:
                pass


@contextlib.contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt while a run is active, so ``finally`` blocks clean up."""

    def handler(signum: int, frame: object) -> None:  # noqa: ARG001
        raise KeyboardInterrupt(f"signal {signum}")

    old: dict[int, Callable | int | None] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            old[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (e.g. inside a Ray task): leave signals alone
            pass
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)  # type: ignore[arg-type]
