"""One layout of a report, shared by every renderer that shows it in full (terminal ``text``, HTML, markdown).

A reader who sees the terminal output in one place and the markdown or HTML attached to a ticket must get
the same diagnosis, so everything a full layout says is picked here, once, and the renderers only format it
with their channel's escaping (``specdiag.sanitize``): nothing here parses a log or escapes text.

Per report: the findings in one total order (``ordered_findings``: severity, root cause before impact,
confidence, rule, location, fingerprint — the CI formats use the same order), the deployment facts of every
deployment (``deployment_blocks``) and the notes about input that was skipped or damaged (``input_notes``).

Per finding (``finding_view``): the head (severity, rule, title, how often, first seen, the deployment when
the report holds several), the arithmetic (summary), the numbers, the causes, the popular suspect the
evidence argues against, the log lines and the next steps (for an excerpt: what to collect).

How much is shown is one ``Detail`` for every layout: ``DEFAULT`` (the first ``CAUSES_SHOWN`` causes in
full — confidence, up to ``REASONS_SHOWN`` reasons for and against, *each cause's own* fix and confirming
experiment — and the rest named with their confidence) or ``VERBOSE`` (every cause, every reason). The
terminal's ``-v`` is the only switch; a narrow terminal changes the shape, never the content.

Evidence order: the ``Detail.evidence`` lines are picked in the finding's own order (the rule puts the line
that proves it, the primary, first, then what explains it), so the primary line is always among them; they
are then shown in **log order** (path, line) with the primary one marked. Log order is chosen because the
lines are read as a story (lookup, memory-pressure warnings, retrieve, error) and match what the reader sees
when opening the file at those lines; the mark keeps the line CI annotations point at findable. Every
evidence line carries its source (``display_path``: relative to the working directory when below it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specdiag.findings import SEVERITY_RANK, Cause, Evidence, Finding
from specdiag.values import format_value, schedule_text

#: the cause users suspect first for a KV shortfall; every full layout says why the evidence rejects it
WHY_NOT_CAUSE = "decode-cache-not-saved"
#: the LMCache setting that suspect is about, as the layouts name it ("Why not save_decode_cache")
WHY_NOT_SETTING = "save_decode_cache"
#: how many of the evidence's reasons against that suspect every layout shows
WHY_NOT_REASONS = 3
#: severities a renderer has a style for; anything else is shown as the mildest
SEVERITY_NAMES = ("error", "warning", "info")
#: causes shown in full by default; the rest are named with their confidence ("also weighed")
CAUSES_SHOWN = 4
#: reasons for, and reasons against, shown per cause by default
REASONS_SHOWN = 3
#: evidence lines shown by default (and with ``-v``)
EVIDENCE_SHOWN = 8
EVIDENCE_SHOWN_VERBOSE = 40
#: LMCache settings every layout names in the deployment facts, in this order
KEY_CONFIG = ("chunk_size", "local_cpu", "max_local_cpu_size", "local_disk", "max_local_disk_size", "remote_url",
              "save_decode_cache", "save_unfull_chunk", "enable_async_loading", "use_layerwise", "pin_timeout_sec",
              "enable_p2p", "enable_pd", "pd_role", "cache_policy")


@dataclass(frozen=True)
class Detail:
    """How much of a finding every full layout shows (None: all). How long an evidence line may be is the
    channel's (a terminal cuts it to its width), not part of the story."""

    causes: int | None
    reasons: int | None
    evidence: int


DEFAULT = Detail(CAUSES_SHOWN, REASONS_SHOWN, EVIDENCE_SHOWN)
#: ``--brief``: each finding's head, its leading cause with two reasons each way, its fix, two evidence lines
BRIEF = Detail(1, 2, 2)
VERBOSE = Detail(None, None, EVIDENCE_SHOWN_VERBOSE)


@dataclass(frozen=True)
class CauseView:
    """One ranked cause: its place (1 = most likely), confidence, the reasons both ways, its fix and the
    experiment that would confirm it. ``more_for``/``more_against`` count reasons the detail level left out."""

    rank: int
    id: str
    confidence: float
    for_: tuple[str, ...]
    against: tuple[str, ...]
    fix: str
    confirm_with: str
    more_for: int = 0
    more_against: int = 0


@dataclass(frozen=True)
class EvidenceLine:
    """A log line and where it came from; ``primary`` marks the finding's location (the CI formats' one)."""

    path: str
    line: int
    text: str
    primary: bool

    @property
    def source(self) -> str:
        """``path:line`` as the finding recorded it."""
        return f"{self.path}:{self.line}"

    @property
    def where(self) -> str:
        """``path:line`` as every layout shows it (``display_path``)."""
        return f"{display_path(self.path)}:{self.line}"


@dataclass(frozen=True)
class FindingView:
    """The parts of a finding every full layout shows, in the order they are shown."""

    rule: str
    severity: str
    title: str
    count: int
    first_seen: float | None
    summary: str
    measurements: Mapping[str, Any]
    #: every cause, untrimmed (the JSON's); layouts show ``shown`` and name ``also``
    causes: tuple[CauseView, ...]
    #: every evidence line in the finding's order (primary first)
    evidence: tuple[EvidenceLine, ...]
    next_steps: tuple[str, ...]
    fingerprint: str
    #: the deployment (server) the finding belongs to, when the report holds several; else None
    deployment: str | None = None
    #: the run of its deployment (``specdiag.runs``), when the deployment had several; else None
    run: int | None = None
    #: the causes shown in full (reasons trimmed to the detail level), best first
    shown: tuple[CauseView, ...] = ()
    #: the causes only named, with their confidence
    also: tuple[CauseView, ...] = ()
    #: the evidence lines shown, in log order (see the module docstring)
    evidence_shown: tuple[EvidenceLine, ...] = ()

    @property
    def top(self) -> CauseView | None:
        """The most likely cause."""
        return self.causes[0] if self.causes else None

    @property
    def fix(self) -> str:
        return self.top.fix if self.top else ""

    @property
    def confirm_with(self) -> str:
        return self.top.confirm_with if self.top else ""

    @property
    def why_not(self) -> CauseView | None:
        """The popular suspect when the evidence did not put it first: shown with the reasons against it."""
        return next((c for c in self.causes[1:] if c.id == WHY_NOT_CAUSE), None)

    @property
    def why_not_reasons(self) -> str:
        """The reasons against the suspect, as every layout words them."""
        c = self.why_not
        return "; ".join(c.against[:WHY_NOT_REASONS]) if c else ""

    @property
    def primary(self) -> EvidenceLine | None:
        """The line that proves the finding (the rule puts it first)."""
        return self.evidence[0] if self.evidence else None

    @property
    def evidence_more(self) -> int:
        """Evidence lines the detail level left out (the JSON report has them)."""
        return len(self.evidence) - len(self.evidence_shown)

    def split_causes(self, limit: int | None) -> tuple[tuple[CauseView, ...], tuple[CauseView, ...]]:
        """The first ``limit`` causes (all for None) and the rest, which a layout only names."""
        if limit is None:
            return self.causes, ()
        return self.causes[:limit], self.causes[limit:]

    def evidence_in_log_order(self, limit: int) -> list[EvidenceLine]:
        """The first ``limit`` evidence lines (the primary one included) sorted by file and line."""
        return sorted(self.evidence[:limit], key=lambda e: (e.path, e.line))


def display_path(path: str, root: str | None = None) -> str:
    """The path as reports show it: relative to ``root`` (default: the working directory) when below it,
    with forward slashes; otherwise unchanged."""
    if not path or path == "-":
        return path
    if os.path.isabs(path):
        base = os.path.abspath(root or os.getcwd())
        try:
            rel = os.path.relpath(path, base)
        except ValueError:  # pragma: no cover - other drive on Windows
            rel = path
        if not rel.startswith(".."):
            path = rel
    return path.replace(os.sep, "/")


def _cause_view(rank: int, c: Cause) -> CauseView:
    return CauseView(rank, c.id, c.confidence, tuple(c.for_), tuple(c.against), c.fix, c.confirm_with)


def _trimmed(c: CauseView, reasons: int | None) -> CauseView:
    """``c`` with at most ``reasons`` reasons each way, counting the rest."""
    if reasons is None:
        return c
    return CauseView(c.rank, c.id, c.confidence, c.for_[:reasons], c.against[:reasons], c.fix, c.confirm_with,
                     max(0, len(c.for_) - reasons), max(0, len(c.against) - reasons))


def _evidence_lines(evidence: list[Evidence]) -> tuple[EvidenceLine, ...]:
    return tuple(EvidenceLine(e.path, e.line, e.text, i == 0) for i, e in enumerate(evidence))


def _shown_evidence(lines: tuple[EvidenceLine, ...], detail: Detail) -> tuple[EvidenceLine, ...]:
    """Picked in the finding's order (the primary first), shown in log order."""
    return tuple(sorted(lines[: detail.evidence], key=lambda e: (e.path, e.line)))


def finding_view(f: Finding, detail: Detail = DEFAULT, deployment: str | None = None) -> FindingView:
    """The layout's parts of ``f``; strings are the finding's own (unescaped: each renderer escapes).
    ``deployment`` names the finding's server when the report holds several (``finding_deployment``)."""
    causes = tuple(_cause_view(i, c) for i, c in enumerate(f.causes or [], 1))
    cut = len(causes) if detail.causes is None else detail.causes
    evidence = _evidence_lines(f.evidence or [])
    return FindingView(
        rule=f.rule,
        severity=f.severity if f.severity in SEVERITY_NAMES else "info",
        title=f.title,
        count=f.count,
        first_seen=getattr(f, "first_seen", None),
        summary=f.summary,
        measurements=f.measurements or {},
        causes=causes,
        evidence=evidence,
        next_steps=tuple(f.next_steps or ()),
        fingerprint=f.fingerprint,
        deployment=deployment,
        run=f.run,
        shown=tuple(_trimmed(c, detail.reasons) for c in causes[:cut]),
        also=causes[cut:],
        evidence_shown=_shown_evidence(evidence, detail),
    )



def measurement_items(m: Mapping[str, Any], verbose: bool = False) -> list[tuple[str, str]]:
    """The finding's numbers as (name, value) text for one wrapped line: request ids last (they are long),
    per-request rows and per-message tables (LOG001/LOG002's ``messages``, which the summary lists) only in
    JSON; long values shortened unless ``verbose``."""
    limit = 20 if verbose else 3
    out = []
    for k, v in m.items():
        if k in ("request_ids", "per_request", "messages"):
            continue
        shown = format_value(v, limit)
        out.append((k, shown if verbose or len(shown) <= 160 else shown[:157] + "…"))
    if m.get("request_ids"):
        out.append(("request_ids", format_value(m["request_ids"], limit)))
    return out


# ---------------------------------------------------------------------------------------------- report parts


def ordered_findings(report: Any) -> list[Finding]:
    """Most severe first, root causes before impact reports, then highest top-cause confidence, rule, first
    line, fingerprint: a total order, so every layout and CI format lists the findings alike."""

    def key(f: Finding) -> tuple:
        conf = f.causes[0].confidence if f.causes else 0.0
        ev = f.evidence[0] if f.evidence else None
        return (-SEVERITY_RANK[f.severity], -f.priority, -round(conf, 6), f.rule, ev.path if ev else "",
                ev.line if ev else 0, f.fingerprint)

    return sorted(report.findings, key=key)


def finding_deployment(report: Any, f: Finding) -> str | None:
    """The finding's deployment when the report holds several (else None: nothing to tell apart)."""
    return report.deployment_of(f) if len(report.deployments) > 1 else None


def finding_views(report: Any, detail: Detail = DEFAULT) -> list[FindingView]:
    """Every finding's layout, in ``ordered_findings`` order: what each full layout shows, finding by finding."""
    return [finding_view(f, detail, finding_deployment(report, f)) for f in ordered_findings(report)]


def tool_problems(report: Any) -> list[dict[str, Any]]:
    """Problems of the tool itself: ``level`` error (an input could not be read at all, see
    ``report.tool_errors``) or warning (an input was read only in part: ``inputs[*].errors``; a rule failed)."""
    out = [{"level": "error", "path": e.get("path"), "message": e["message"]}
           for e in getattr(report, "tool_errors", None) or []]
    for inp in report.inputs:
        for msg in inp.get("errors") or []:
            out.append({"level": "warning", "path": inp.get("path"), "message": f"{inp.get('path')}: {msg}"})
    for r in getattr(report, "rules_failed", None) or []:  # a bug in specdiag: say so, the rest stands
        out.append({"level": "warning", "path": None,
                    "message": f"rule {r['rule']} failed ({r['error']}); its findings are missing - please report it"})
    return out


def line_ends_note(report: Any) -> str | None:
    """``line ends: CR`` (or ``CR in places``) when an input's lines end otherwise than in LF/CRLF: the line
    numbers of the evidence are then those of its CR-ended lines, which an LF viewer shows as one line."""
    kinds = {str(i.get("line_ends") or "LF") for i in report.inputs}
    if "CR" in kinds:
        return "line ends: CR" if len(kinds) == 1 else "line ends: CR in some inputs"
    n = sum(int(i.get("cr_line_ends") or 0) for i in report.inputs)
    return f"line ends: LF, {n:,} bare CR(s) ended a line" if n else None


def input_notes(report: Any) -> list[tuple[str, str]]:
    """What every full layout says about input that was not read whole: (level, message) — unreadable
    inputs, damaged ones, failed rules (``tool_problems``), then lines skipped as binary/NUL per input."""
    out = [(p["level"], p["message"]) for p in tool_problems(report)]
    for inp in report.inputs:
        n = inp.get("skipped") or 0
        said = any("line(s) skipped" in str(e) for e in inp.get("errors") or ())  # ingest's own note: one message
        if isinstance(n, int) and n > 0 and not said:
            out.append(("warning", f"{inp.get('path')}: {n:,} line(s) skipped (binary/NUL)"))
    return out


def _parallelism(c: Mapping[str, Any]) -> str:
    tp, pp, dp = c.get("tensor_parallel_size"), c.get("pipeline_parallel_size"), c.get("data_parallel_size")
    low = c.get("tensor_parallel_size_at_least")
    if not (tp or low or pp or dp):
        return ""
    size = f"TP ≥ {low} (not stated in the log)" if low else f"TP={tp or 1}"
    size += (f" PP={pp}" if pp and pp != 1 else "") + (f" DP={dp}" if dp and dp != 1 else "")
    ranks = [str(r) for r in (c.get("ranks_seen") or []) if r]
    return size + (f"; ranks in the log: {', '.join(ranks)}" if ranks else "")


def _policy(c: Mapping) -> str | None:
    """The failure policy with where it came from when it is not read off the log (a version's default is
    an assumption: a fragment's reader must not take it for the configured value)."""
    policy, src = c.get("kv_load_failure_policy"), c.get("kv_load_failure_policy_source")
    if not policy:
        return None
    return f"{policy} ({src})" if src and src.startswith("default") else str(policy)


def _speculative(spec: Any) -> str:
    if not isinstance(spec, Mapping):
        return str(spec) if spec else ""
    method, k = spec.get("method"), spec.get("num_speculative_tokens")
    s = method or "method not in the log"  # K alone can come from the per-position rates
    if k is not None:
        s += f" K={k}" if method else f", K={k}"
    if spec.get("model"):
        s += f", draft {spec['model']}"
    if spec.get("per_batch_size"):
        s += f", dynamic K: {schedule_text(spec['per_batch_size']) or format_value(spec['per_batch_size'])}"
    if spec.get("enabled") is False:
        s += " (disabled)"
    return s


_EMPTY = (None, "", [], {})


def deployment_rows(c: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The deployment facts every full layout shows, as (name, value) text; empty values are left out."""
    lv = c.get("lmcache_version")
    lmcache = ""
    ev, note = c.get("lmcache_version_evidence") or [], c.get("lmcache_version_note")
    if lv or note:  # an unknown version with a note says why the lines name none
        lmcache = (f"{lv or 'unknown'}" + (f"  (from {', '.join(map(str, ev[:4]))})" if ev else "")
                   + (f"  — {note}" if note else ""))
    kc = c.get("kv_connector")
    cfg = c.get("lmcache_config") or {}
    config = ""
    if isinstance(cfg, Mapping) and cfg:
        config = ", ".join(f"{k}={format_value(cfg[k])}" for k in KEY_CONFIG if k in cfg)
        src = c.get("lmcache_config_source")
        config += f"  [{src}]" if src else ""
    rows = [("vLLM", c.get("vllm_version")), ("LMCache", lmcache), ("model", c.get("model")),
            ("parallelism", _parallelism(c)), ("device", c.get("device")),
            ("speculative", _speculative(c.get("speculative"))), ("prefix caching", c.get("prefix_caching")),
            ("block hash", c.get("hash_algorithm")),
            ("KV connector", f"{kc}" + (f" ({c.get('kv_role')})" if c.get("kv_role") else "") if kc else ""),
            ("LMCache config", config), ("KV load failure policy", _policy(c)),
            ("LMCache state", "DEGRADED (init failed: no stores, no loads)" if c.get("lmcache_degraded") else "")]
    if not any(v not in _EMPTY for _, v in rows):
        return []
    # "no drafting" is a fact a spec-decode diagnosis rests on: said, not left out
    rows = [(k, "off / not seen" if k == "speculative" and v in _EMPTY else v) for k, v in rows]
    return [(k, v if isinstance(v, str) else format_value(v)) for k, v in rows if v not in _EMPTY]


def run_lines(report: Any) -> list[str]:
    """Per deployment with several runs: one line per run (lines, times, versions) and what changed
    between runs — what someone verifying a rollout wants first. Log-derived text: escape per channel."""
    from specdiag.runs import change_text
    from specdiag.timeutil import fmt_time

    out: list[str] = []
    for d in report.deployments:
        if len(d.runs) < 2:
            continue
        where = f" of {d.id}" if len(report.deployments) > 1 else ""
        out.append(f"{len(d.runs)} server runs{where}:")
        for r in d.runs:
            span = " → ".join(fmt_time(t) for t in (r.start, r.end) if t is not None)
            first, last = r.first_line or {}, r.last_line or {}
            lines = f"lines {first.get('line')}–{last.get('line')} of {display_path(str(first.get('path')))}"
            vers = ", ".join(f"{k} {v}" for k, v in (("vLLM", r.versions.get("vllm")), ("LMCache", r.versions.get("lmcache"))) if v)
            out.append(f"  run {r.index}: {lines}" + (f", {span}" if span else "") + (f" ({vers})" if vers else ""))
        out += [f"  changed: {change_text(ch)}" for ch in d.run_changes]
    return out


#: deployments named in the title of a block several share
NAMED_IN_BLOCK = 3


def deployment_blocks(report: Any) -> list[tuple[str, dict[str, Any]]]:
    """(title, context) per deployment: one "deployment" block, or one per server when there are several.
    Servers whose blocks would show the same rows share one, titled with their number and the first few
    names (a stream of 50 replicas printed 50 identical blocks); what each pod's findings are stays theirs."""
    if report.context is not None or len(report.deployments) <= 1:
        c = report.context or (report.deployments[0].context.to_dict() if report.deployments else {})
        return [("deployment", dict(c or {}))]
    shown: dict[tuple, tuple[dict[str, Any], list[str]]] = {}
    for d in report.deployments:
        c = d.context.to_dict()
        shown.setdefault(tuple(deployment_rows(c)), (c, []))[1].append(d.id)
    return [(_block_title(ids), c) for c, ids in shown.values()]


def _block_title(ids: list[str]) -> str:
    if len(ids) == 1:
        return f"deployment {ids[0]}"
    more = ", …" if len(ids) > NAMED_IN_BLOCK else ""
    return f"{len(ids):,} deployments with the same facts: {', '.join(ids[:NAMED_IN_BLOCK])}{more}"


__all__ = [
    "CAUSES_SHOWN", "DEFAULT", "REASONS_SHOWN", "VERBOSE", "WHY_NOT_CAUSE", "WHY_NOT_SETTING", "CauseView", "Detail",
    "EvidenceLine", "FindingView", "deployment_blocks", "run_lines", "deployment_rows", "display_path", "finding_deployment",
    "finding_view", "finding_views", "input_notes", "measurement_items", "ordered_findings", "tool_problems",
]
