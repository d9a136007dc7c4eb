"""SRV007 — NCCL's own WARN lines: a collective library call failed, and the line names the transport."""

from __future__ import annotations

from collections import Counter

from specdiag.analyzers.base import NOT_YET, WARNING_OR_WORSE, Rule, register, shape_claim
from specdiag.analyzers.causes import fix_and_confirm
from specdiag.context import Context
from specdiag.events import UNKNOWN_EVENT, Event, line_label
from specdiag.findings import CauseBoard, Finding, evidence_of
from specdiag.observe import RunState
from specdiag.patterns import lazy
from specdiag.timeutil import rec_time

#: what a WARN line's words say failed (first match wins), as the cause it is: the transport or resource
KINDS = (
    ("nccl-duplicate-gpu", ("Duplicate GPU detected",)),
    ("nccl-nvls", ("nvls.cc", "NVLS")),
    ("nccl-shm", ("/dev/shm", "shm_open", "Shm", "SHM", "shared memory", "shmutils.cc")),
    ("nccl-ib-network", ("ibv_", "NET/IB", "IBV", "mlx5", "RoCE", "GID")),
    ("nccl-cuda-transport", ("Cuda failure", "CUDA failure", "cuMem", "cudaIpc", "Cuda driver")),
    ("nccl-socket-network", ("NET/Socket", "socket", "Socket", "onnect", "Accept failed", "bootstrap", "Bootstrap",
                             "Connection refused", "Connection reset", "Connection timed out", "No route to host")),
)
#: an NCCL error the caller raised (vLLM's wrapper, torch's ProcessGroupNCCL, a collective_rpc that failed), or a worker
#: whose init_device failed (it makes the NCCL communicator): the failed call reached the process, so the WARN lines
#: are its reason
_RAISED = lazy(r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidUsage|"
               r"ncclRemoteError|ncclInvalidArgument|Error executing method '?init_device")
#: the place NCCL prints before its level: ``host:pid:tid [dev] transport/p2p.cc:298 NCCL WARN …``
_PLACE = lazy(r"(?:(?P<host>[\w.-]{1,100}):(?P<pid>\d{1,9}):\d{1,9} \[(?P<dev>\d{1,4})\] )?(?P<file>[\w./-]{1,100}\.\w{1,4}):"
              r"(?P<line>\d{1,7}) \Z")
MAX_FIRST, MAX_PROCESSES = 4, 64
#: NCCL's reasons as torch relays them under 'Last error:' (the text of its last WARN line without NCCL's header)
RELAYED = frozenset({"E_NCCL_CONNECT", "E_NCCL_PROXY", "E_NCCL_DUP_GPU", "E_NCCL_SHM"})
#: the shared-memory transport's reason (misc/shmutils.cc), relayed raw or as a row of a worker's logged exception
SHM_SEGMENT = "Error while creating shared memory segment"


def kind_of(detail: str, place: str | None = None) -> str:
    """The cause a WARN line's words, or the source file NCCL printed it from, name (``nccl-other`` for none)."""
    text = f"{place} {detail}" if place else detail
    if place is not None and place.startswith("init.cc:") and "uda failure" in detail:
        return "nccl-cuda-init"  # a CUDA call of the communicator's creation: no transport chosen yet (NVIDIA/nccl #2101)
    return next((cid for cid, words in KINDS if any(w in text for w in words)), "nccl-other")


def place_of(ev: Event) -> tuple[str | None, tuple]:
    """Where NCCL printed the line (``transport/p2p.cc:298``, None where the line does not say) and the process that
    printed it (NCCL's own ``host:pid``, else the line's prefix), from the text before its level word: read once."""
    text = ev.rec.msg
    cut = text.find("NCCL WARN ")
    m = _PLACE.search(text[max(0, cut - 200) : cut]) if cut > 0 else None
    where = f"{m.group('file')}:{m.group('line')}" if m else None
    return where, (m.group("host"), m.group("pid")) if m and m.group("pid") else ev.rec.origin.key


@register
class NcclFailure(Rule):
    """NCCL reported failed calls: its own ``NCCL WARN`` lines name the transport or resource that failed.

    Detects: NCCL's WARN lines (``host:pid:tid [dev] file.cc:line NCCL WARN message``, printed at ``NCCL_DEBUG=WARN``
    or lower), which NCCL prints where a call fails, before it returns the error that vLLM's wrapper
    (``RuntimeError: NCCL error: …``), torch (``DistBackendError: NCCL error in: …``) or a ``collective_rpc`` raise
    with no more than the error's name (``unhandled system error``, ``internal error``); and the reason torch relays
    under ``Last error:`` in that raised error (``socketStartConnect: Connect to … failed``, ``Proxy Call to rank 7
    failed (Connect)``, ``Duplicate GPU detected``, ``Error while creating shared memory segment /dev/shm/nccl-…``,
    raw or as a row of a worker's logged exception). It is an error when the log also holds the raised error, a
    warning otherwise; a raised error whose own text names a transport is reported without a WARN line too.

    Why it matters: the raised error says only that NCCL failed; the WARN line says what: the InfiniBand/RoCE verbs
    (``Call to ibv_modify_qp failed … Connection timed out``), TCP sockets (``Connect to … failed``), a CUDA call of
    the peer-to-peer or shared-memory transport (``transport/p2p.cc … Cuda failure 'invalid argument'``), a
    ``/dev/shm`` too small for the shared-memory transport in a container, or two ranks on one GPU (``Duplicate GPU
    detected``). Each has its own fix, and each is settled by an NCCL variable that turns the transport off.

    Causes weighed: ``nccl-ib-network``, ``nccl-socket-network``, ``nccl-cuda-transport``, ``nccl-cuda-init`` (a
    ``Cuda failure`` printed by ``init.cc``: the communicator's creation, before any transport), ``nccl-nvls`` (NVLink
    SHARP, ``transport/nvls.cc``), ``nccl-shm``,
    ``nccl-duplicate-gpu``, ``nccl-other``: the first WARN line's words lead (NCCL stops at the first failure; the
    lines after it are often its echo), the others count.

    Fix: the first WARN line's transport: the fabric between the nodes and ``NCCL_IB_HCA`` / ``NCCL_IB_GID_INDEX``,
    ``NCCL_SOCKET_IFNAME`` and the ports between the nodes, ``NCCL_P2P_DISABLE=1`` for a peer-to-peer CUDA
    failure, ``NCCL_NVLS_ENABLE=0`` and the fabric manager for NVLS,
    a larger ``/dev/shm`` (``--shm-size``), one GPU per rank.

    References: NCCL ``src/debug.cc`` (WARN), ``src/transport/net_ib.cc``, ``src/transport/p2p.cc``,
    ``src/transport/shm.cc``, ``src/transport/nvls.cc``, ``src/init.cc`` (``Duplicate GPU detected``); vLLM
    ``distributed/device_communicators/pynccl_wrapper.py`` (NCCL_CHECK); OpenRLHF PR #335, verifiers #181, verl #161,
    vLLM #6732.
    """

    code = "SRV007"
    name = "nccl-failure"
    title = "NCCL reported failed calls: its WARN lines name the transport"
    severity = "warning"
    severity_note = ("error when the log also holds the NCCL error a caller raised; info for WARN lines of no known "
                     "kind without one")
    family = "SRV"
    cause_ids = ("nccl-ib-network", "nccl-socket-network", "nccl-cuda-transport", "nccl-cuda-init", "nccl-nvls", "nccl-shm",
                 "nccl-duplicate-gpu", "nccl-other")
    events = frozenset({"E_NCCL_WARN", *RELAYED, "E_NCCL_ERROR", "V_EXC", "E_GENERIC", UNKNOWN_EVENT})
    levels = WARNING_OR_WORSE  # the catalog's 'Error executing method 'init_device'' (worker_base.py)
    #: its finding accounts for NCCL's WARN lines and relayed reasons, not for every exception line it looks at
    explains = frozenset({"E_NCCL_WARN", *RELAYED})

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.kinds: Counter[str] | None = None  # these made on the first WARN line: most logs hold none
        self.first: list[tuple[Event, str]] = NOT_YET
        self.raised: Event | None = None
        self.processes: set[tuple] = NOT_YET
        self.claims: tuple[str, ...] = ()

    def observe(self, ev: Event) -> None:
        if ev.id == UNKNOWN_EVENT:  # a row under vLLM's header: the relayed reason of a worker's exception
            if not ev.rec.msg.lstrip().startswith(SHM_SEGMENT):
                return
            ev = Event("E_NCCL_SHM", ev.rec, {"detail": ev.rec.msg.strip()})
        elif ev.id != "E_NCCL_WARN" and ev.id not in RELAYED:
            label = line_label(ev)
            if _RAISED.search(label) is not None:
                self.raised = self.raised or ev  # the error a caller raised: these lines are its reason
                self._claim(label)  # its lines (torch's ncclSystemError row too) are the finding's
            return
        if ev.id != "E_NCCL_WARN":
            self._claim(ev.rec.msg)
        detail = ev.f.get("detail") or ""
        where, process = place_of(ev)
        kind = kind_of(detail, where)
        if self.kinds is None:
            self.kinds, self.first, self.processes = Counter(), [], set()
        self.kinds[kind] += 1
        if len(self.first) < MAX_FIRST:
            self.first.append((ev, kind))
        if len(self.processes) < MAX_PROCESSES:
            self.processes.add(process)

    def _claim(self, text: str) -> None:
        """Account for the lines of ``text``'s shape in this finding, not LOG001's (at most 16 shapes)."""
        claim = shape_claim(text)
        if claim not in self.claims and len(self.claims) < 16:
            self.claims = (*self.claims, claim)

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:
        if self.kinds is None:
            return self._raised_only()
        ev, kind = self.first[0]
        lines = sum(self.kinds.values())
        evidence = [evidence_of(e, 400) for e, _ in self.first]
        if self.raised is not None:
            evidence.append(evidence_of(self.raised, 400))
        causes = self._causes(kind)
        where = place_of(ev)[0]
        return [Finding(
            rule=self.code, severity=self._severity(kind), title=self.title,
            summary=self._summary(ev, kind, lines, where), count=lines, evidence=evidence, causes=causes,
            identity=f"{self.code}|{kind}", first_seen=rec_time(ev.rec),
            headline=f"NCCL {'WARN' if ev.id == 'E_NCCL_WARN' else 'reason'} ×{lines}: {(ev.f.get('detail') or '')[:80]}",
            measurements={"warn_lines": lines, "by_kind": dict(self.kinds), "first_place": where,
                          "processes": len(self.processes), "error_raised": self.raised is not None},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]

    def _severity(self, kind: str) -> str:
        """An error when a caller raised NCCL's error; a warning for a WARN line of a known failure; info for a WARN
        line of no known kind with no error after it (NCCL warns of things it works around: a device path it cannot
        resolve, a plugin it cannot load)."""
        if self.raised is not None:
            return "error"
        return "info" if kind == "nccl-other" and set(self.kinds or ()) <= {"nccl-other"} else "warning"

    def _raised_only(self) -> list[Finding]:
        """No WARN line, but the error a caller raised quotes NCCL's reason (torch's ``Last error: socketStartConnect:
        Connect to … failed``, ``Duplicate GPU detected``): that reason names the transport. A raised error that names
        none is SRV001's (a death) or LOG001's."""
        if self.raised is None:
            return []
        label = line_label(self.raised)
        kind = kind_of(label)
        if kind == "nccl-other":
            return []
        self.kinds = Counter({kind: 1})
        causes = self._causes(kind)
        return [Finding(
            rule=self.code, severity="error", title=self.title,
            summary=(f"The error a caller raised quotes NCCL's reason: '{label[:240]}'. NCCL's own WARN line is not in "
                     "the log (NCCL_DEBUG=WARN prints it), but the reason names what failed."),
            count=1, evidence=[evidence_of(self.raised, 400)], causes=causes, identity=f"{self.code}|{kind}",
            first_seen=rec_time(self.raised.rec), headline=f"NCCL error: {label[:80]}",
            measurements={"warn_lines": 0, "by_kind": {kind: 1}, "first_place": None, "processes": 1,
                          "error_raised": True},
            next_steps=[causes[0].fix, f"Confirm: {causes[0].confirm_with}"],
        )]

    def _summary(self, ev: Event, kind: str, lines: int, where: str | None) -> str:
        detail = (ev.f.get("detail") or "").strip()
        what = "WARN line(s)" if ev.id == "E_NCCL_WARN" else "reason(s) of a failed call (as torch relays them under 'Last error:')"
        out = [f"NCCL printed {lines} {what} from {len(self.processes)} process(es); the first"
               + (f", at {where}," if where else "") + f" says '{detail[:200]}'."]
        if self.raised is not None:
            out.append(f"The call failed: '{line_label(self.raised)[:160]}' is the error its caller raised, and these "
                       "lines are its reason.")
        else:
            out.append("No NCCL error raised by a caller is in the log: the call may have been retried, or the "
                       "lines after it were not collected.")
        others = [f"{k} ×{n}" for k, n in self.kinds.most_common() if k != kind]
        if others:
            out.append(f"Other WARN lines: {', '.join(others)}.")
        return " ".join(out)

    def _causes(self, kind: str) -> list:
        b = CauseBoard()
        for cid in self.cause_ids:
            b.add(cid, 0.3 if cid == kind else 0.05, **fix_and_confirm(cid))
        b.support(kind, 3, "the first WARN line's words (NCCL stops at its first failure)")
        for other, n in self.kinds.items():
            if other != kind:
                b.support(other, 1.5, f"{n} later WARN line(s) of this kind")
        return b.ranked(ceiling=0.85)
