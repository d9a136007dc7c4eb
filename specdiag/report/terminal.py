"""The terminal report: readable at a glance, pasteable into an incident.

Layout: what was read → the deployment → findings by severity, each with its arithmetic, ranked causes
(evidence for and against), the fix, the experiment that would confirm it, and the log lines as
``path:line``. Everything from a log is printed as plain text (Rich markup is never interpreted).
"""

from __future__ import annotations

import sys

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from specdiag.findings import Finding
from specdiag.report.model import Report

SEV_STYLE = {"error": "bold white on red", "warning": "bold black on yellow", "info": "bold white on blue"}
KEY_CONFIG = ("chunk_size", "local_cpu", "max_local_cpu_size", "local_disk", "remote_url", "save_decode_cache",
              "save_unfull_chunk", "enable_async_loading", "use_layerwise", "pin_timeout_sec", "enable_p2p")


def _bar(conf: float, width: int = 10) -> str:
    n = max(0, min(width, round(conf * width)))
    return "█" * n + "░" * (width - n)


def _inputs_line(report: Report) -> Text:
    lines = sum(i["lines"] for i in report.inputs)
    rec = sum(i["recognized"] for i in report.inputs)
    skipped = sum(i["skipped"] for i in report.inputs)
    t = Text()
    t.append(f"Read {len(report.inputs)} input(s), {lines:,} lines: {rec:,} recognised as vLLM/LMCache output")
    if skipped:
        t.append(f", {skipped:,} skipped (binary/NUL)", style="yellow")
    t.append(f" in {report.elapsed_s:.2f} s.")
    return t


def _context_table(report: Report) -> Table:
    c = report.context
    tab = Table.grid(padding=(0, 2))
    tab.add_column(style="bold")
    tab.add_column()

    def row(k: str, v) -> None:
        if v not in (None, "", [], {}):
            tab.add_row(k, Text(str(v)))

    row("vLLM", c.get("vllm_version"))
    lv = c.get("lmcache_version")
    if lv:
        ev = c.get("lmcache_version_evidence") or []
        note = c.get("lmcache_version_note")
        row("LMCache", f"{lv}" + (f"  (from {', '.join(ev[:4])})" if ev else "") + (f"  — {note}" if note else ""))
    row("model", c.get("model"))
    tp = c.get("tensor_parallel_size")
    pp = c.get("pipeline_parallel_size")
    if tp or pp:
        row("parallelism", f"TP={tp or 1}" + (f" PP={pp}" if pp and pp > 1 else "")
            + (f"; ranks in the log: {', '.join(c.get('ranks_seen') or [])}" if c.get("ranks_seen") else ""))
    spec = c.get("speculative")
    if spec:
        s = f"{spec.get('method')} K={spec.get('num_speculative_tokens')}"
        if spec.get("per_batch_size"):
            s += f", per-batch-size schedule {spec['per_batch_size']}"
        row("speculative", s)
    row("prefix caching", c.get("prefix_caching"))
    cfg = c.get("lmcache_config") or {}
    if cfg:
        shown = ", ".join(f"{k}={cfg[k]}" for k in KEY_CONFIG if k in cfg)
        row("LMCache config", shown + f"  [{c.get('lmcache_config_source')}]")
    row("KV load failure policy", c.get("kv_load_failure_policy"))
    if c.get("lmcache_degraded"):
        row("LMCache state", "DEGRADED (init failed: no stores, no loads)")
    return tab


def _finding_panel(f: Finding, verbose: bool) -> Panel:
    parts = []
    head = Text()
    head.append(f" {f.severity.upper()} ", style=SEV_STYLE[f.severity])
    head.append(f" {f.rule} ", style="bold")
    head.append(f.title)
    if f.count > 1:
        head.append(f"  ×{f.count}", style="bold")
    parts.append(head)
    if f.summary:
        parts.append(Text(f.summary))
    m = f.measurements
    if m:
        mt = Text()
        for k, v in m.items():
            if k in ("request_ids", "per_request") or isinstance(v, dict):
                continue
            if isinstance(v, list):
                shown = "; ".join(map(str, v[: 20 if verbose else 3])) + (f" (+{len(v) - 3} more)" if len(v) > 3 and not verbose else "")
            else:
                shown = str(v)
            if not verbose and len(shown) > 160:
                shown = shown[:157] + "…"
            mt.append(f"{k}", style="dim")
            mt.append("=" + shown + "  ")
        if m.get("request_ids"):
            ids = m["request_ids"]
            mt.append("request_ids", style="dim")
            mt.append("=" + ", ".join(ids[:3]) + (f" (+{len(ids) - 3} more)" if len(ids) > 3 else ""))
        parts.append(mt)
    if f.causes:
        ct = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=True)
        ct.add_column("#", width=2)
        ct.add_column("cause", no_wrap=True)
        ct.add_column("confidence", no_wrap=True)
        ct.add_column("why / why not", ratio=1)
        shown = f.causes if verbose else f.causes[:4]
        for i, c in enumerate(shown, 1):
            why = Text()
            for s in c.for_[:3 if not verbose else 20]:
                why.append("+ ", style="green")
                why.append(s + "\n")
            for s in c.against[:2 if not verbose else 20]:
                why.append("− ", style="red")
                why.append(s + "\n")
            ct.add_row(str(i), Text(c.id, style="bold" if i == 1 else ""), f"{_bar(c.confidence)} {c.confidence:.2f}", why)
        parts.append(ct)
        rest = f.causes[len(shown):]
        if rest:
            parts.append(Text("also weighed: " + ", ".join(f"{c.id} {c.confidence:.2f}" for c in rest)
                              + "  (use -v for the reasons)", style="dim"))
        suspect = next((c for c in f.causes[1:] if c.id == "decode-cache-not-saved"), None)
        if suspect is not None:
            t = Text()
            t.append("Why not save_decode_cache: ", style="bold")
            t.append(f"confidence {suspect.confidence:.2f} — " + "; ".join(suspect.against[:2]))
            parts.append(t)
        top = f.causes[0]
        if top.fix:
            t = Text()
            t.append("Fix: ", style="bold green")
            t.append(top.fix)
            parts.append(t)
        if top.confirm_with:
            t = Text()
            t.append("Confirm: ", style="bold")
            t.append(top.confirm_with)
            parts.append(t)
    if f.evidence:
        ev = Text()
        ev.append("Evidence:\n", style="bold")
        for e in f.evidence[: 20 if verbose else 8]:
            ev.append(f"  {e.path}:{e.line}", style="cyan")
            text = e.text if verbose or len(e.text) <= 220 else e.text[:217] + "…"
            ev.append(f"  {text}\n")
        parts.append(ev)
    if f.next_steps:
        ns = Text()
        ns.append("Next steps:\n", style="bold")
        for s in f.next_steps:
            ns.append(f"  • {s}\n")
        parts.append(ns)
    border = {"error": "red", "warning": "yellow", "info": "blue"}[f.severity]
    return Panel(Group(*parts), border_style=border, expand=True)


def _timeline(console: Console, report: Report, findings: list[Finding]) -> None:
    """Acceptance and cache-hit sparklines on one time axis, with findings and incidents marked."""
    from specdiag.metrics.sparkline import timeline_rows

    tl = dict(report.timeline or {})
    marks = list(tl.get("markers") or [])
    marks += [{"t": f.first_seen, "kind": "finding", "rule": f.rule} for f in findings if f.first_seen]
    tl["markers"] = marks
    rows = timeline_rows(tl, width=60)
    if not rows:
        return
    body = Text("\n".join(rows))
    body.append("\n▲ finding  ! shortfall  x load failure  E error  p preemption  0 K=0 interval", style="dim")
    console.print(Panel(body, title="timeline", title_align="left", border_style="dim"))


def render_terminal(report: Report, verbose: bool = False, color: bool | None = None, file=None) -> None:
    from specdiag.sanitize import sanitized_report

    report = sanitized_report(report)  # log text reaches the tty without escape sequences or bidi controls
    out = file or sys.stdout
    width = None if getattr(out, "isatty", lambda: False)() else 120  # pasted reports: a fixed, readable width
    console = Console(file=out, no_color=color is False, highlight=False, soft_wrap=False, emoji=False,
                      markup=False, width=width)
    console.print(Text("specdiag — diagnosis", style="bold"))
    console.print(_inputs_line(report))
    for inp in report.inputs:
        for err in inp.get("errors", []):
            console.print(Text(f"  ! {inp['path']}: {err}", style="yellow"))
    console.print(Panel(_context_table(report), title="deployment", title_align="left", border_style="dim"))
    findings = report.sorted_findings()
    _timeline(console, report, findings)
    s = report.summary
    console.print(Text(f"{len(findings)} finding(s): {s['errors']} error, {s['warnings']} warning, {s['infos']} info",
                       style="bold"))
    for f in findings:
        console.print(_finding_panel(f, verbose))
    if not findings:
        console.print(Text("No problem found in what was read.", style="green"))
    unrec = {k: v for k, v in report.unrecognized.items() if k != "top_warnings" and v}
    if unrec:
        console.print(Text("Not recognised (kept out of the analysis): "
                           + ", ".join(f"{v:,} {k} record(s)" for k, v in unrec.items()), style="dim"))
    top = report.unrecognized.get("top_warnings") or {}
    if top:
        console.print(Text("Unrecognised warnings/errors (most frequent):", style="dim"))
        for shape, n in list(top.items())[:5]:
            console.print(Text(f"  {n:>5} × {shape}", style="dim"))


__all__ = ["render_terminal", "escape"]
