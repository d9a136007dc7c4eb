"""Rule documentation from the rule registry: the docstring of each rule class *is* its documentation.

A rule docstring has a one-line summary, then paragraphs that start with a section name and a colon::

    Detects: …            Why it matters: …       Causes weighed: …       Fix: …       References: …

A paragraph without a section name continues the previous section. ``specdiag explain``, ``specdiag rules``,
the SARIF ``help`` text and ``docs/rules/*.md`` (written by ``scripts/gen_rule_docs.py``, checked for
staleness by a test) are all rendered from here.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from specdiag.patterns import lazy

SECTIONS = ("Detects", "Why it matters", "Causes weighed", "Fix", "References")
_SECTION_RE = lazy(r"^(" + "|".join(re.escape(s) for s in SECTIONS) + r"):\s*", re.S)
GENERATED_NOTE = ("<!-- Generated from the rule registry by scripts/gen_rule_docs.py — do not edit; "
                  "edit the rule's docstring and re-run the script. -->")


@dataclass
class RuleDoc:
    code: str
    name: str
    title: str
    severity: str
    family: str
    summary: str
    sections: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    cause_ids: tuple[str, ...] = ()
    #: how the severity of a finding depends on what happened (the failure policy, a crash); "" if fixed
    severity_note: str = ""

    def severity_text(self) -> str:
        """``error`` or ``error (warning when …)``: the default and, where it varies, how."""
        return f"{self.severity} ({self.severity_note})" if self.severity_note else self.severity

    def missing_sections(self) -> list[str]:
        return [s for s in SECTIONS if not self.sections.get(s)]


def _join(par: str) -> str:
    return " ".join(line.strip() for line in par.splitlines() if line.strip())


def _cap(s: str) -> str:
    """Sections continue the header's sentence ("Detects: every lookup …"); standing alone they start upper."""
    return s[:1].upper() + s[1:] if s[:1].islower() else s


def _md(s: str) -> str:
    """reST-style inline literals (````x````) → Markdown (```x```)."""
    return s.replace("``", "`")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(summary, {section: text}); paragraphs are joined into single lines, separated by blank lines."""
    text = inspect.cleandoc(doc or "")
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    if not paras:
        return "", {}
    summary = _join(paras[0])
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for p in paras[1:]:
        m = _SECTION_RE.match(p.strip())
        if m:
            current = m.group(1)
            sections.setdefault(current, []).append(_cap(_join(p.strip()[m.end():])))
        elif current is not None:
            sections[current].append(_join(p))
        else:
            summary += "\n\n" + _join(p)
    return summary, {k: "\n\n".join(v) for k, v in sections.items()}


def rule_doc(cls: type) -> RuleDoc:
    summary, sections = parse_docstring(cls.__doc__)
    return RuleDoc(
        code=cls.code, name=cls.name, title=cls.title, severity=cls.severity, family=cls.family,
        summary=summary, sections=sections, defaults=dict(cls.defaults), cause_ids=tuple(cls.cause_ids),
        severity_note=getattr(cls, "severity_note", "") or "",
    )


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(v)


def render_rule_markdown(d: RuleDoc) -> str:
    out = [GENERATED_NOTE, "", f"# {d.code} — `{d.name}`", "", f"**{_md(d.title)}**", ""]
    out += ["| code | name | default severity | family |", "|---|---|---|---|",
            f"| `{d.code}` | `{d.name}` | {d.severity} | {d.family or '—'} |", ""]
    if d.severity_note:
        out += [f"**Severity:** {_md(d.severity_text())}.", ""]
    if d.summary and d.summary.rstrip(".") != d.title.rstrip("."):
        out += [_md(d.summary), ""]
    for s in SECTIONS:
        if d.sections.get(s):
            out += [f"## {s}", "", _md(d.sections[s]), ""]
    if d.cause_ids:
        out += ["## Cause ids", "", "The ids this rule reports in `causes[].id` (JSON, SARIF properties):", ""]
        out += [f"- `{c}`" for c in d.cause_ids]
        out.append("")
    out += ["## Configuration", ""]
    if d.defaults:
        out += ["| threshold | default |", "|---|---|"]
        out += [f"| `{k}` | `{_toml_value(v)}` |" for k, v in sorted(d.defaults.items())]
        out.append("")
    out += ["```toml", "[tool.specdiag]", f'select = ["{d.code}"]          # or ignore = ["{d.code}"]', "",
            f"[tool.specdiag.rules.{d.code}]", f'severity = "{d.severity}"']
    out += [f"{k} = {_toml_value(v)}" for k, v in sorted(d.defaults.items())]
    out += ["```", "", f"See also: `specdiag explain {d.code}`, [all rules](README.md).", ""]
    return "\n".join(out)


def render_index(docs: list[RuleDoc]) -> str:
    out = [GENERATED_NOTE, "", "# specdiag rules", "",
           "Each rule has a stable code; select or ignore rules by code or prefix (`--select KV`, "
           "`--ignore KV008`, or `select`/`ignore` in `[tool.specdiag]`). `specdiag explain CODE` prints the "
           "same text as these pages.", "",
           "| code | name | default severity | title |", "|---|---|---|---|"]
    for d in docs:
        sev = f"{d.severity} (varies: {_md(d.severity_note)})" if d.severity_note else d.severity
        out.append(f"| [{d.code}]({d.code}.md) | `{d.name}` | {sev} | {_md(d.title)} |")
    out.append("")
    return "\n".join(out)


def generate_docs() -> dict[str, str]:
    """{file name under docs/rules/: content} for every registered rule plus the index (README.md)."""
    from specdiag.analyzers.base import all_rules

    docs = [rule_doc(cls) for cls in all_rules().values()]
    files = {f"{d.code}.md": render_rule_markdown(d) for d in docs}
    files["README.md"] = render_index(docs)
    return files


class RuleTable(Mapping):
    """Every registered rule's documentation by code, in code order, each parsed from its docstring when
    first asked: a report names a few rules (its findings'), and parsing all 43 took 3-4 ms of every run."""

    def __init__(self) -> None:
        from specdiag.analyzers.base import all_rules

        self._classes = dict(all_rules())
        self._docs: dict[str, RuleDoc] = {}

    def __getitem__(self, code: str) -> RuleDoc:
        doc = self._docs.get(code)
        if doc is None:
            doc = self._docs[code] = rule_doc(self._classes[code])
        return doc

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)


def rule_table() -> RuleTable:
    """What a ``Report`` carries (``Report.rules``) so that renderers name, title and describe rules without
    importing the rules: :class:`RuleTable`."""
    return RuleTable()


def render_explain(d: RuleDoc, width: int = 100) -> str:
    """Plain text for ``specdiag explain CODE``."""

    def wrap(s: str, indent: str = "  ") -> list[str]:
        lines: list[str] = []
        for para in s.replace("``", "`").split("\n\n"):
            lines += textwrap.wrap(para, width=width, initial_indent=indent, subsequent_indent=indent,
                                   break_on_hyphens=False, break_long_words=False) or [""]
            lines.append("")
        return lines[:-1]

    out = [f"{d.code} {d.name} [{d.severity}] — {d.title}", ""]
    if d.severity_note:
        out += wrap(f"Severity: {d.severity_text()}.", "") + [""]
    if d.summary and d.summary.rstrip(".") != d.title.rstrip("."):
        out += wrap(d.summary, "") + [""]
    for s in SECTIONS:
        if d.sections.get(s):
            out.append(f"{s}:")
            out += wrap(d.sections[s]) + [""]
    if d.cause_ids:
        out.append("Cause ids:")
        out += wrap(", ".join(d.cause_ids)) + [""]
    if d.defaults:
        out.append(f"Thresholds ([tool.specdiag.rules.{d.code}]):")
        out += [f"  {k} = {_toml_value(v)}" for k, v in sorted(d.defaults.items())] + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def render_cause(info: Any, rules: list[str], markdown: bool = False, width: int = 100) -> str:
    """``specdiag explain CAUSE-ID``: one catalog row (``analyzers.causes.CauseInfo``) and the rules that weigh it."""
    fields = [("Mechanism", info.mechanism), ("Fix", info.fix), ("Confirm with", info.confirm),
              ("Versions", info.versions), ("Lines that decide", info.collect),
              ("Upstream references", "; ".join(info.references)), ("Weighed by", ", ".join(rules) or "—")]
    if markdown:
        out = [f"# {_md(info.id)}", ""]
        for name, text in fields:
            out += [f"**{name}:** {_md(text)}", ""]
        return "\n".join(out).rstrip("\n") + "\n"
    out = [f"{info.id} — cause", ""]
    for name, text in fields:
        out.append(f"{name}:")
        out += textwrap.wrap(text, width=width, initial_indent="  ", subsequent_indent="  ",
                             break_on_hyphens=False, break_long_words=False) or ["  —"]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def help_markdown(d: RuleDoc) -> str:
    """Short Markdown for SARIF ``rules[].help``."""
    parts = [f"**{_md(d.title)}**"]
    for s in SECTIONS:
        if d.sections.get(s):
            parts.append(f"**{s}:** {_md(d.sections[s])}")
    return "\n\n".join(parts)


__all__ = ["SECTIONS", "RuleDoc", "generate_docs", "help_markdown", "parse_docstring", "render_cause", "render_explain",
           "render_index", "render_rule_markdown", "rule_doc", "rule_table"]
