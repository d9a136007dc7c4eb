"""Block scans on worker processes, for the pure-Python scanner (``ahead.py`` decides when).

Why a pool of its own instead of ``ProcessPoolExecutor``: the executor runs two helper threads in this
process (one moves tasks to the workers, one reads and unpickles every result), and on two cores they
fight the reading thread for the GIL at every block: measured 0.38 CPU-s of helper threads per 525 MB of
the TP=1 shape, and the reading thread's I/O calls waiting for the GIL after every read. Here this
thread writes a task (its id and its block's place in the ring) straight to a pipe, and takes a result
when it needs it.

Both ways go through one shared-memory ring of slots: a block is copied into a free slot, the worker
copies it out, scans it and writes its pickled result back into the same slot, then sends a few bytes
("task N done, in slot S, B bytes"). A worker so never waits for this process to read a result (a result
pushed through a pipe blocks its writer until the reader takes it: what made an earlier pipe-per-worker
pool slower, ``docs/benchmark.md``). A result larger than its slot follows its message instead. A slot
is free again once its result has been read.

This process never blocks on a write: a task is 24 bytes, far below a pipe's buffer, and a block larger
than a slot (or a moment with no free slot) is scanned here rather than sent through the pipe (a large
task could wait for a worker that waits, holding the result lock, for this process to read its large
result). Where no shared memory can be made there is no pool: the input is scanned here.

A worker that dies (killed, out of memory) breaks the pool: every scan not yet handed on raises
``BrokenExecutor`` and ``ahead`` scans the rest of the input here. An exception inside a worker's scan
is raised here, for that block.
"""

from __future__ import annotations

import os
import pickle
import struct
from collections import deque
from concurrent.futures import BrokenExecutor

from specdiag.ingest import ahead
from specdiag.ingest.scan import ScanResult
from specdiag.ingest.sources import BLOCK_SIZE
from specdiag.workers import start_worker

#: a slot holds one read and the line a read boundary cut (the blocks ``Source.blocks`` yields)
SLOT_SIZE = BLOCK_SIZE + 64 * 1024
#: a block smaller than this is scanned in this process: the line a read boundary cut is a block of its own
#: after every read of a pipe or a compressed input (``Source.blocks``), and a round trip to a worker costs
#: more than scanning it (``ahead._pipelined``)
SCAN_HERE_BELOW = 16 * 1024
#: a task: (task id, offset of its slot, block length); task id -1 stops a worker
_TASK = struct.Struct("qqq")
#: a worker's message: (task id, what, offset of the slot holding the payload or -1 when the payload follows
#: the header, payload length)
_DONE = struct.Struct("qqqq")
_READY, _RESULT, _ERROR = range(3)
#: a scan's result; the copy of its block without kubectl timestamps, when it had them (``ahead.unwrapped``)
Scanned = tuple[ScanResult, "bytes | None"]


def _context():
    """Worker processes forked from a clean server process where the platform has one (never from this
    one, whose threads a fork could catch holding a lock), else spawned."""
    import multiprocessing

    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["specdiag.ingest.scan_fast", "specdiag.ingest.scan_workers"])
    return ctx


def _shared_memory(size: int):
    """A new shared-memory segment of ``size`` bytes, or None where the platform cannot make one."""
    try:
        from multiprocessing.shared_memory import SharedMemory

        return SharedMemory(create=True, size=size)
    except (ImportError, OSError):
        return None


class Ticket:
    """One block's scan on the pool, as far as ``ahead`` needs a future (``ahead.Pending``): its result."""

    def __init__(self, pool: ScanPool, task: int) -> None:
        self.pool = pool
        self.task = task

    def result(self) -> Scanned:
        return self.pool.result(self.task)

    def cancel(self) -> bool:
        """Nothing to cancel: closing the pool ends the tasks still queued."""
        return False


class ScanPool:
    """``processes`` worker processes scanning blocks copied into the slots of ``shm``."""

    def __init__(self, processes: int, shm) -> None:
        ctx = _context()
        self.method = ctx.get_start_method()
        self.slot_size = SLOT_SIZE
        self.shm = shm
        self.free: deque[int] = deque(range(shm.size // self.slot_size))
        self.tasks, self._tasks_w = ctx.Pipe(duplex=False)
        self._done_r, done_w = ctx.Pipe(duplex=False)
        #: one reader of the tasks, one writer of the results at a time; kept while the workers live (a lock
        #: collected here is gone before a worker forked from the server has unpickled it)
        self.locks = (ctx.Lock(), ctx.Lock())
        args = (os.getpid(), shm.name, self.slot_size, self.tasks, done_w, *self.locks)
        self.procs = [ctx.Process(target=serve, args=args, daemon=True, name="specdiag-scan") for _ in range(processes)]
        for proc in self.procs:
            proc.start()
        self.tasks.close()  # the workers hold these ends: writing fails, and reading ends, once they are gone
        done_w.close()
        self.next_task = 0
        self.arrived: dict[int, tuple[int, int, int, bytes]] = {}  # task → (what, at, length, payload)
        self.slot_of: dict[int, int] = {}  # task → its slot, until its result is read
        self.ready = False
        self.broken = False

    def started(self) -> bool:
        """Whether a worker is up (it says so once it has imported the scanner), asked without waiting."""
        while not self.ready and not self.broken and self._done_r.poll(0):
            self._receive()
        return self.ready

    def submit(self, data: bytes, start: int, end: int) -> Ticket | None:
        """Send ``data[start:end]`` to a worker; None (the block is then scanned here) when the pool is
        broken, the block is larger than a slot or no slot is free."""
        length = end - start
        if self.broken or length > self.slot_size or not self.free:
            return None
        task, self.next_task = self.next_task, self.next_task + 1
        slot = self.free.popleft()
        at = slot * self.slot_size
        self.shm.buf[at : at + length] = memoryview(data)[start:end]
        try:
            self._tasks_w.send_bytes(_TASK.pack(task, at, length))
        except OSError:
            self.free.append(slot)
            self._break()
            return None
        self.slot_of[task] = slot
        return Ticket(self, task)

    def result(self, task: int) -> Scanned:
        """The scan of ``task``, waiting for it; BrokenExecutor once a worker has died."""
        while task not in self.arrived:
            if self.broken:
                raise BrokenExecutor("a scan worker died")
            self.wait()
        try:
            return unpacked(self.shm, *self.arrived.pop(task))
        finally:
            self.free.append(self.slot_of.pop(task))

    def wait(self) -> None:
        """Read the next message, or notice that a worker died."""
        from multiprocessing.connection import wait

        ready = wait([self._done_r, *(p.sentinel for p in self.procs)])
        if self._done_r in ready:
            self._receive()
        elif ready:
            self._break()

    def _receive(self) -> None:
        try:
            message = self._done_r.recv_bytes()
        except (EOFError, OSError):
            self._break()
            return
        task, what, at, length = _DONE.unpack_from(message)
        if what == _READY:
            self.ready = True
        else:
            self.arrived[task] = (what, at, length, message[_DONE.size :])

    def _break(self) -> None:
        self.broken = True

    def close(self) -> None:
        """Stop the workers (at once when scans are still queued: nobody wants them) and free the ring."""
        finished = not self.slot_of and not self.broken
        for proc in self.procs:
            if finished:
                try:
                    self._tasks_w.send_bytes(_TASK.pack(-1, -1, 0))
                except OSError:
                    finished = False
            if not finished:
                proc.terminate()
        for proc in self.procs:
            proc.join(2)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._tasks_w.close()
        self._done_r.close()
        self.shm.close()
        self.shm.unlink()


def process_pool(processes: int, slots: int) -> ScanPool | None:
    """Worker processes for block scans, with a ring of ``slots`` shared-memory slots; None where no
    shared memory can be made or no process started (the blocks are then scanned in this process)."""
    shm = _shared_memory(slots * SLOT_SIZE)
    if shm is None:
        return None
    try:
        return ScanPool(processes, shm)
    except OSError:  # no process could be started (a limit on processes, file descriptors): all scanned here
        shm.close()
        shm.unlink()
        return None


def submit(pool: ScanPool, data: bytes, start: int, end: int) -> Ticket | None:
    """One block's scan on the pool, numbered from line 1 (``ahead._hand_on`` renumbers it); None when the
    pool is broken, or for a small block: it is then scanned here."""
    if end - start < SCAN_HERE_BELOW:
        return None
    return pool.submit(data, start, end)


def scan_job(block: bytes) -> Scanned:
    """One block's scan in a worker process, by the Python scanner (the only one that runs there), numbered
    from line 1: the block is renumbered when it is handed on (``ahead._hand_on``)."""
    from specdiag.ingest.scan_fast import scan_block_fast

    copy = ahead.unwrapped(block, 0, len(block)) if block else None
    return scan_block_fast(block if copy is None else copy, 0), copy


def serve(owner: int, shm_name: str, slot_size: int, tasks, done, task_lock, done_lock) -> None:
    """A worker's loop: take a task, scan its block, put the pickled result where the block was. Ends on a
    stop task, or quietly when the analysing process is gone (its pipe ends closed)."""
    from multiprocessing.shared_memory import SharedMemory

    start_worker(owner, True)
    shm = SharedMemory(name=shm_name)
    try:
        _reply(done, done_lock, _DONE.pack(-1, _READY, -1, 0))
        while (task := _next_task(tasks, task_lock, shm)) is not None:
            _reply(done, done_lock, answer(shm, slot_size, *task))
    except (EOFError, OSError):
        return
    finally:
        shm.close()


def _next_task(tasks, lock, shm) -> tuple[int, int, bytes] | None:
    """(task id, slot offset, the block copied out of its slot), or None for a stop task."""
    with lock:
        message = tasks.recv_bytes()
    number, at, length = _TASK.unpack_from(message)
    if number < 0:
        return None
    return number, at, bytes(shm.buf[at : at + length])


def answer(shm, slot_size: int, number: int, at: int, block: bytes) -> bytes:
    """The message that hands the scan of task ``number`` back: its pickle goes into the block's slot (at
    offset ``at``) when it fits there, else it follows the message's header."""
    what, payload = _scanned(block)
    if len(payload) <= slot_size:
        shm.buf[at : at + len(payload)] = payload
        return _DONE.pack(number, what, at, len(payload))
    return _DONE.pack(number, what, -1, len(payload)) + payload


def unpacked(shm, what: int, at: int, length: int, payload: bytes) -> Scanned:
    """The scan a worker's message hands back (from its slot at ``at``, or the ``payload`` after the
    message's header when ``at`` is -1); the exception the scan raised, raised here."""
    value = pickle.loads(shm.buf[at : at + length] if at >= 0 else payload)
    if what == _ERROR:
        raise value
    return value


def _reply(done, lock, message: bytes) -> None:
    with lock:
        done.send_bytes(message)


def _scanned(block: bytes) -> tuple[int, bytes]:
    """(``_RESULT``, the pickled scan) or (``_ERROR``, the pickled exception the scan raised)."""
    try:
        return _RESULT, pickle.dumps(scan_job(block), pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - raised again in the analysing process, for this block
        try:
            return _ERROR, pickle.dumps(e, pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
            return _ERROR, pickle.dumps(RuntimeError(f"scan worker: {e!r}"), pickle.HIGHEST_PROTOCOL)


__all__ = ["SLOT_SIZE", "ScanPool", "Ticket", "answer", "process_pool", "scan_job", "serve", "submit", "unpacked"]
