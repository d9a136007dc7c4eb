"""The output formats of every command that renders a report: one ``Renderer`` per format, one table.

``analyze`` and ``check`` both take their ``--format`` vocabulary from ``FORMATS``, so a name means the same
output on both (modelled on ruff's ``Emitter`` and pip-audit's ``_format``: one small object per format).
Each renderer wraps the format's existing render function and takes the options every command may pass
(``fail_on``, ``verbose``, ``summary_hint``, ``quiet``, ``brief``, ``gate``), ignoring those its format has no use
for — so a command never needs to know which options which format reads.

The renderers import their modules on first use: ``specdiag analyze`` in the terminal must not pay for the
HTML or SARIF code, and the table itself must stay cheap to import for ``--help``.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from specdiag.report.model import Report


@runtime_checkable
class Renderer(Protocol):
    """One output format: what it is called, what it is, and a function from a ``Report`` to text."""

    name: str
    description: str
    extension: str  # the usual file extension, with its dot
    structured: bool  # machine-readable: must be alone on stdout (or go to a file) to stay parseable
    binary: bool  # bytes rather than text (none yet: every format here is UTF-8 text)
    timeline: bool  # draws the report's timeline (the analysis builds it only for a format that does)

    def render(self, report: Report, **options: Any) -> str:
        """The report in this format; options a format does not use are ignored."""
        ...


@dataclass(frozen=True)
class FunctionRenderer:
    """A ``Renderer`` around an existing render function (``render_json``, ``render_sarif``, …): the
    function keeps its own signature; ``adapt`` picks the options it takes from the command's."""

    name: str
    description: str
    extension: str
    structured: bool
    adapt: Callable[[Report, dict[str, Any]], str]
    binary: bool = False
    timeline: bool = False

    def render(self, report: Report, **options: Any) -> str:
        """Delegate to the wrapped function with the options it understands."""
        return self.adapt(report, options)


def gate_line(report: Report, fail_on: str) -> str:
    """``check``'s verdict on the run: how many findings reach ``--fail-on``, so whether the gate fails
    (``--exit-zero`` and an unreadable input change the exit code, not this count)."""
    from specdiag.findings import severity_at_least

    if fail_on == "never":
        return "specdiag check: --fail-on never: no finding fails the gate\n"
    n = sum(1 for f in report.findings if severity_at_least(f.severity, fail_on))
    verdict = "the gate fails" if n else "the gate passes"
    return f"specdiag check: {n} finding{'' if n == 1 else 's'} at or above --fail-on {fail_on}: {verdict}\n"


def _text(report: Report, opts: dict[str, Any]) -> str:
    """The terminal report without colour — one meaning on every command; ``check`` (``gate=True``) adds
    its gate line at the end. The one-line-per-finding CI layout is the ``lines`` format."""
    from specdiag.report.terminal import render_terminal

    buf = io.StringIO()
    render_terminal(report, verbose=bool(opts.get("verbose")), color=False, file=buf,
                    quiet=bool(opts.get("quiet")), brief=bool(opts.get("brief")))
    if opts.get("gate"):
        buf.write(gate_line(report, opts.get("fail_on") or "error"))
    return buf.getvalue()


def _lines(report: Report, opts: dict[str, Any]) -> str:
    """One ``path:line: severity CODE title`` line per finding, indented details, a summary line: for CI logs
    and problem matchers (no timings, no width: byte-identical for identical input)."""
    from specdiag.report.text import render_text

    return render_text(report, fail_on=opts.get("fail_on"))


def _json(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.json_report import render_json

    return render_json(report)


def _jsonl(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.json_report import render_jsonl

    return render_jsonl(report)


def _markdown(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.markdown import render_markdown

    return render_markdown(report, fail_on=opts.get("fail_on"), verbose=bool(opts.get("verbose")))


def _sarif(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.sarif import render_sarif

    return render_sarif(report)


def _github(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.github import render_github

    hint = opts.get("summary_hint") or "the full report (specdiag check --format markdown or json)"
    return render_github(report, summary_hint=hint)


def _junit(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.junit import render_junit

    return render_junit(report, fail_on=opts.get("fail_on") or "error")


def _gitlab(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.gitlab import render_gitlab

    return render_gitlab(report)


def _html(report: Report, opts: dict[str, Any]) -> str:
    from specdiag.report.html import render_html

    return render_html(report, verbose=bool(opts.get("verbose")))


def _table(*renderers: Renderer) -> dict[str, Renderer]:
    return {r.name: r for r in renderers}


#: every output format, in the order help texts and error messages list them
FORMATS: dict[str, Renderer] = _table(
    FunctionRenderer("text", "the terminal report without colour (check adds its gate line)", ".txt", False,
                     _text, timeline=True),
    FunctionRenderer("lines", "one 'path:line: severity CODE title' line per finding, for CI logs", ".txt", False,
                     _lines),
    FunctionRenderer("json", "the specdiag.report/1 JSON contract", ".json", True, _json),
    FunctionRenderer("jsonl", "one JSON object per finding per line, each with schema and tool", ".jsonl", True, _jsonl),
    FunctionRenderer("markdown", "Markdown summary (job summaries, pull-request comments)", ".md", False,
                     _markdown),
    FunctionRenderer("sarif", "SARIF 2.1.0 (code scanning)", ".sarif", True, _sarif),
    FunctionRenderer("github", "GitHub Actions workflow-command annotations", ".txt", False, _github),
    FunctionRenderer("junit", "JUnit XML (one test case per enabled rule)", ".xml", True, _junit),
    FunctionRenderer("gitlab", "GitLab Code Quality JSON", ".json", True, _gitlab),
    FunctionRenderer("html", "self-contained HTML report with charts", ".html", True, _html, timeline=True),
)


def format_names() -> str:
    """The table's names as one comma list, for help texts and the unknown-format error."""
    return ", ".join(FORMATS)


def draws_timeline(name: str) -> bool:
    """Whether format ``name`` draws the timeline (an unknown name: yes, the safe side)."""
    renderer = get_renderer(name)
    return renderer is None or renderer.timeline


def get_renderer(name: str) -> Renderer | None:
    """The renderer called ``name`` (case-insensitive, surrounding blanks ignored), or ``None``."""
    return FORMATS.get(name.strip().lower())

