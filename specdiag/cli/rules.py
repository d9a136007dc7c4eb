"""``specdiag rules`` (every rule: code, severity, name, title) and ``specdiag explain CODE`` (its documentation).

Both read the rule registry; the text is the rule's docstring (see ``specdiag.ruledocs``), the same source
as ``docs/rules/``.
"""

from __future__ import annotations

import json
import sys

import typer

from specdiag.cli.common import fail, split_list


def register(app: typer.Typer) -> None:
    app.command("rules", help="List every rule: code, default severity, name and title.")(rules_cmd)
    app.command("explain", help="Explain a rule (what it detects, why it matters, causes, fix, references) or a cause id.")(
        explain_cmd)


def rules_cmd(
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | markdown"),
    select: list[str] = typer.Option(None, "--select", help="Only these rule codes or prefixes."),
    ignore: list[str] = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes."),
) -> None:
    from specdiag.engine import ConfigError, select_rules
    from specdiag.ruledocs import render_index, rule_doc

    if fmt not in ("text", "json", "markdown"):
        fail(f"unknown --format {fmt!r} (text, json, markdown)")
    try:
        classes = select_rules(split_list(select), split_list(ignore))
    except ConfigError as e:
        fail(str(e))
    docs = [rule_doc(cls) for cls in classes]
    if fmt == "json":
        sys.stdout.write(json.dumps([
            {"code": d.code, "name": d.name, "severity": d.severity, "severity_note": d.severity_note,
             "family": d.family, "title": d.title,
             "thresholds": d.defaults, "causes": list(d.cause_ids)} for d in docs], indent=2) + "\n")
        return
    if fmt == "markdown":
        sys.stdout.write(render_index(docs))
        return
    _rule_lines(docs)


def _rule_lines(docs: list) -> None:
    """One rule a row; on a terminal the title wraps at word boundaries under its own column (piped output
    keeps one line per rule, for grep)."""
    import shutil
    import textwrap

    wc = max((len(d.code) for d in docs), default=4)
    wn = max((len(d.name) for d in docs), default=4)
    indent = wc + 2 + 7 + 2 + wn + 2
    width = shutil.get_terminal_size((0, 0)).columns if sys.stdout.isatty() else 0
    for d in docs:
        varies = f"  [severity: {d.severity_note}]" if d.severity_note else ""
        text = f"{d.title}{varies}"
        if width > indent + 20:
            text = ("\n" + " " * indent).join(textwrap.wrap(text, width - indent, break_long_words=False))
        sys.stdout.write(f"{d.code:<{wc}}  {d.severity:<7}  {d.name:<{wn}}  {text}\n")


def explain_cmd(
    code: str = typer.Argument(..., help="Rule code (KV001), name (lmcache-retrieve-shortfall) or cause id (pin-timeout)."),
    fmt: str = typer.Option("text", "--format", "-f", help="text | markdown"),
) -> None:
    from specdiag.analyzers.base import all_rules
    from specdiag.ruledocs import render_explain, render_rule_markdown, rule_doc

    if fmt not in ("text", "markdown"):
        fail(f"unknown --format {fmt!r} (text, markdown)")
    rules = all_rules()
    key = code.strip()
    cls = rules.get(key.upper()) or next((c for c in rules.values() if c.name == key.lower()), None)
    if cls is None:
        from specdiag.analyzers.causes import CATALOG
        from specdiag.ruledocs import render_cause

        info = CATALOG.get(key.lower())
        if info is not None:
            using = [c for c, r in rules.items() if info.id in r.cause_ids]
            sys.stdout.write(render_cause(info, using, markdown=fmt == "markdown"))
            return
        weighing = [c for c, r in rules.items() if key.lower() in r.cause_ids]
        if weighing:  # a cause only its rules describe (SRV001's, SD's): their text, which names it
            cls = rules[weighing[0]]
            sys.stdout.write(f"{key.lower()}: a cause weighed by {', '.join(weighing)}; described in "
                             f"{weighing[0]}'s text below.\n\n")
            d = rule_doc(cls)
            sys.stdout.write(render_rule_markdown(d) if fmt == "markdown" else render_explain(d))
            return
        from specdiag.report.verdict import code_ranges

        fail(f"unknown rule or cause id {code!r}; known rules: {code_ranges(list(rules))} (see 'specdiag rules'; cause ids "
             "are listed by 'specdiag explain RULE')")
    d = rule_doc(cls)
    sys.stdout.write(render_rule_markdown(d) if fmt == "markdown" else render_explain(d))
