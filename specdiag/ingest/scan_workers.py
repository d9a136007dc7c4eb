"""Block scans on worker processes, for the pure-Python scanner (``ahead.py`` decides when).

The blocks travel in a ring of shared-memory slots: one copy in, and the worker copies its slot out,
instead of a pickle pushed through a pipe in 64 KiB pieces (measured: 0.06–0.10 CPU-s of this process per
400 MiB against 0.13–0.61, and a quarter of the wall time). A block larger than a slot, a moment with no
free slot, or a platform without shared memory falls back to the pickle. A slot is free again once the
scan that read it is done; the ring is unlinked after the pool is shut down.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import BrokenExecutor, Executor, Future

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


def process_pool(processes: int) -> Executor:
    """Worker processes for block scans: forked from a clean server process where the platform has one
    (never from this one, whose threads a fork could catch holding a lock), ignoring Ctrl-C (this process
    handles it and shuts them down) and exiting when this process is gone (``specdiag.workers``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["specdiag.ingest.scan_fast", "specdiag.ingest.scan_workers"])
    return ProcessPoolExecutor(processes, mp_context=ctx, initializer=start_worker, initargs=(os.getpid(), True))


class BlockRing:
    """Slots of one shared-memory segment that blocks are copied into for the workers."""

    def __init__(self, shm, slots: int) -> None:
        self.shm = shm
        self.free: deque[int] = deque(range(slots))  # appended to from the pool's thread: deque is atomic

    @classmethod
    def open(cls, slots: int) -> BlockRing | None:
        """A ring of ``slots`` slots, or None where no shared memory can be made (the pickle then)."""
        try:
            from multiprocessing.shared_memory import SharedMemory

            return cls(SharedMemory(create=True, size=slots * SLOT_SIZE), slots)
        except (ImportError, OSError):
            return None

    def put(self, data: bytes, start: int, end: int) -> int | None:
        """Copy ``data[start:end]`` into a free slot: its index, or None (too large, or none free)."""
        if end - start > SLOT_SIZE or not self.free:
            return None
        slot = self.free.popleft()
        at = slot * SLOT_SIZE
        self.shm.buf[at : at + end - start] = memoryview(data)[start:end]
        return slot

    def close(self) -> None:
        self.shm.close()
        self.shm.unlink()


def submit(pool: Executor, ring: BlockRing | None, data: bytes, start: int, end: int) -> Future | None:
    """One block's scan on the pool, numbered from line 1 (``ahead._hand_on`` renumbers it); None when the
    pool is broken, or for a small block: it is then scanned here."""
    if end - start < SCAN_HERE_BELOW:
        return None
    slot = ring.put(data, start, end) if ring is not None else None
    try:
        if slot is None:
            return pool.submit(scan_job, data if start == 0 and end == len(data) else data[start:end])
        fut = pool.submit(scan_slot, ring.shm.name, slot * SLOT_SIZE, end - start)
    except BrokenExecutor:
        if slot is not None:
            ring.free.append(slot)
        return None
    fut.add_done_callback(lambda _f: ring.free.append(slot))
    return fut


def scan_job(block: bytes) -> tuple[ScanResult, bytes | None]:
    """One block's scan in a worker process, by the Python scanner (the only one that runs there), numbered
    from line 1: the block is renumbered when it is handed on (``ahead._hand_on``)."""
    from specdiag.ingest.scan_fast import scan_block_fast

    copy = ahead.unwrapped(block, 0, len(block)) if block else None
    return scan_block_fast(block if copy is None else copy, 0), copy


#: the segments this worker has attached, by name (one per input scanned on this pool)
_ATTACHED: dict = {}


def scan_slot(name: str, offset: int, length: int) -> tuple[ScanResult, bytes | None]:
    """:func:`scan_job` of the block in a ring's slot."""
    shm = _ATTACHED.get(name)
    if shm is None:
        from multiprocessing.shared_memory import SharedMemory

        shm = _ATTACHED[name] = SharedMemory(name=name)
    return scan_job(bytes(shm.buf[offset : offset + length]))


__all__ = ["SLOT_SIZE", "BlockRing", "process_pool", "scan_job", "scan_slot", "submit"]
