"""``--format github``: GitHub Actions workflow-command annotations (``::error file=…,line=…::message``).

GitHub shows at most 10 error, 10 warning and 10 notice annotations per step (50 per job) and drops the
rest silently. So this renderer emits at most ``cap`` per level — most severe and highest-confidence first —
and, when anything was left out, one final ``::notice`` saying how many and where to find them (the job
summary, ``--summary``, or a JSON/SARIF artifact). That notice takes one of the 10 notice slots, which is
reserved for it. Tool problems (an unreadable input) come first, as errors.

Escaping (actions/toolkit ``command.ts``): in the message ``%``→``%25``, CR→``%0D``, LF→``%0A``; in property
values additionally ``:``→``%3A`` and ``,``→``%2C``. ``%`` is escaped first.
"""

from __future__ import annotations

from specdiag.report.model import Report
from specdiag.report.text import display_path, finding_message, ordered_findings, tool_problems
from specdiag.sanitize import github_data, github_property

CAP_PER_LEVEL = 10
LEVEL = {"error": "error", "warning": "warning", "info": "notice"}
MAX_MESSAGE = 4000  # GitHub truncates long annotation messages; keep ours readable


def escape_data(s: str) -> str:
    """The message of a command: terminal controls removed, then ``%``, CR, LF escaped (one channel sanitiser)."""
    return github_data(s)


def escape_property(s: str) -> str:
    """A property value: as the message, plus ``:`` and ``,`` (a file named ``::warning …`` stays a value)."""
    return github_property(s)


def command(level: str, message: str, **props: object) -> str:
    """One workflow command line; properties with a ``None`` value are left out."""
    ps = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items() if v is not None)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    return f"::{level}{' ' + ps if ps else ''}::{escape_data(message)}"


def render_github(report: Report, *, cap: int = CAP_PER_LEVEL, summary_hint: str = "the job summary") -> str:
    """Annotations, capped per level; ``cap`` is GitHub's per-step limit."""
    items: list[tuple[str, str]] = []  # (level, line)
    for p in tool_problems(report):
        lvl = "error" if p["level"] == "error" else "warning"
        items.append((lvl, command(lvl, p["message"], title="specdiag input problem")))
    for f in ordered_findings(report):
        ev = f.evidence[0] if f.evidence else None
        lvl = LEVEL[f.severity]
        props: dict[str, object] = {}
        if ev is not None and ev.path not in ("", "-"):
            props["file"] = display_path(ev.path)
            props["line"] = max(1, ev.line)
        props["title"] = f"{f.rule} {f.title}"
        items.append((lvl, command(lvl, finding_message(f), **props)))

    counts = {"error": 0, "warning": 0, "notice": 0}
    total = {"error": 0, "warning": 0, "notice": 0}
    for lvl, _ in items:
        total[lvl] += 1
    overflow = any(total[lvl] > cap for lvl in total)
    # the "N more" notice needs a notice slot of its own
    limit = {"error": cap, "warning": cap, "notice": cap - 1 if overflow else cap}
    out: list[str] = []
    left = 0
    for lvl, line in items:
        if counts[lvl] < limit[lvl]:
            out.append(line)
            counts[lvl] += 1
        else:
            left += 1
    if left:
        out.append(command("notice", f"{left} more specdiag finding(s) not annotated (GitHub shows "
                                     f"{cap} per level and step) - see {summary_hint}", title="specdiag"))
    return "\n".join(out) + ("\n" if out else "")


__all__ = ["CAP_PER_LEVEL", "command", "escape_data", "escape_property", "render_github"]
