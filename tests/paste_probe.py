"""Metamorphic paste probe: every case with an ``expected.json`` re-pasted the ways users paste, alone and composed.

A paste changes how a log looks, never what it says: the same findings (rules, key measurements) must come out
of the pasted copy as of the original, and nothing the original lacks (a year, a TP size, a rank, a version)
may appear. Each transformation is a function ``lines -> lines``; :func:`variants` names the ones, and the
compositions, that apply to a case (a docker-json case is not cut by a terminal: its rows are JSON that no
reader rejoins).

The shapes modelled, from what users paste into issues and chat:

* a terminal's hard wrap at 40-160 columns (cut at N characters wherever it falls: inside a number, an ANSI
  escape, right after a process prefix);
* 2-6 spaces or a tab of indentation, a markdown quote (``> ``), a code fence around the excerpt;
* ``grep -n`` and ``grep -H -n`` prefixes;
* ``kubectl logs --prefix``, with the wrap before it (the app's line was hard-wrapped: every piece carries the
  pod prefix) or after it (the terminal wrapped the prefixed output: only the first piece does);
* CRLF line ends, trailing whitespace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from expectations import check_report

from specdiag.engine import analyze

HERE = Path(__file__).resolve().parent
WIDTHS = (40, 60, 72, 80, 100, 120, 160)
POD = "[pod/vllm-0/vllm] "
Paste = Callable[[list[str]], list[str]]


def wrap(width: int) -> Paste:
    """A terminal copy: each line cut every ``width`` characters, wherever the cut falls."""
    def cut(lines: list[str]) -> list[str]:
        out: list[str] = []
        for s in lines:
            out.extend(s[i:i + width] for i in range(0, max(len(s), 1), width))
        return out
    return cut


def indent(pad: str) -> Paste:
    return lambda lines: [pad + s for s in lines]


def grep_n(lines: list[str]) -> list[str]:
    return [f"{417 + i}:{s}" for i, s in enumerate(lines)]


def grep_hn(lines: list[str]) -> list[str]:
    return [f"logs/vllm-0.log:{417 + i}:{s}" for i, s in enumerate(lines)]


def kubectl(lines: list[str]) -> list[str]:
    return [POD + s for s in lines]


def md_quote(lines: list[str]) -> list[str]:
    return ["> " + s for s in lines]


def fence(lines: list[str]) -> list[str]:
    return ["Here is the log:", "", "```text", *lines, "```", "", "Any idea?"]


def crlf(lines: list[str]) -> list[str]:
    return [s + "\r" for s in lines]


def trailing(lines: list[str]) -> list[str]:
    return [s + "   " for s in lines]


def then(*steps: Paste) -> Paste:
    """Compose: the first step is applied first (``then(wrap(80), indent("    "))``: wrapped, then indented)."""
    def run(lines: list[str]) -> list[str]:
        for step in steps:
            lines = step(lines)
        return lines
    return run


def _alone() -> dict[str, Paste]:
    out: dict[str, Paste] = {f"wrap{w}": wrap(w) for w in WIDTHS}
    out.update({"indent2": indent("  "), "indent4": indent("    "), "indent6": indent("      "), "tab": indent("\t"),
                "grep-n": grep_n, "grep-Hn": grep_hn, "kubectl": kubectl, "md-quote": md_quote, "fence": fence,
                "crlf": crlf, "trailing": trailing})
    return out


def _composed() -> dict[str, Paste]:
    out: dict[str, Paste] = {}
    for w in WIDTHS:
        out[f"app-wrap{w}+kubectl"] = then(wrap(w), kubectl)  # every piece carries the pod prefix
        out[f"kubectl+term-wrap{w}"] = then(kubectl, wrap(w))  # only the first piece does
    for w in (60, 80, 120):
        out[f"wrap{w}+indent4"] = then(wrap(w), indent("    "))
        out[f"wrap{w}+md-quote"] = then(wrap(w), md_quote)
        out[f"wrap{w}+fence"] = then(wrap(w), fence)
        out[f"grep-n+wrap{w}"] = then(grep_n, wrap(w))
        out[f"grep-Hn+wrap{w}"] = then(grep_hn, wrap(w))
        out[f"wrap{w}+crlf"] = then(wrap(w), crlf)
        out[f"kubectl+wrap{w}+indent2"] = then(kubectl, wrap(w), indent("  "))
    out["indent4+crlf"] = then(indent("    "), crlf)
    out["grep-n+md-quote"] = then(grep_n, md_quote)
    out["kubectl+grep-Hn"] = then(kubectl, grep_hn)
    out["tab+trailing+crlf"] = then(indent("\t"), trailing, crlf)
    return out


ALONE = _alone()
COMPOSED = _composed()
ALL = {**ALONE, **COMPOSED}


def case_dirs(folders: tuple[str, ...] = ("fragments", "corpus"), max_lines: int | None = 20) -> list[Path]:
    """Cases with an expected.json (at most ``max_lines`` lines of log in all, None for any size)."""
    out = []
    for folder in folders:
        for exp in sorted((HERE / folder).glob("*/expected.json")):
            if max_lines is None or sum(len(read_lines(p)) for p in logs_of(exp.parent)) <= max_lines:
                out.append(exp.parent)
    return out


def logs_of(case: Path) -> list[Path]:
    return sorted(p for p in case.iterdir() if p.name != "expected.json" and not p.name.startswith("."))


def read_lines(path: Path) -> list[str]:
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def applies(case: Path, name: str) -> bool:
    """Whether a paste makes sense on this case: JSON rows cut by a terminal are no longer JSON (nothing
    rejoins them), and a case that is already a terminal wrap is not wrapped again at another width."""
    text = "".join(p.read_text("utf-8", "replace") for p in logs_of(case))
    cut = "wrap" in name
    if cut and '{"log"' in text:
        return False
    if ("grep" in name or "kubectl" in name) and _WRAPPED.match(text):
        return False  # a collector or grep around a capture that already has one (grep of grep output)
    if cut and "+" in name and _WRAPPED.match(text):
        return False  # a paste of a paste: an indented block wrapped, then indented again
    if "wrap" in case.name:  # a paste already cut by a terminal: only what is done to a paste after copying it
        return not any(k in name for k in ("wrap", "trailing", "grep", "kubectl"))
    return True


#: a case whose first line already carries a collector or paste wrapper: grep, kubectl, docker json, an RFC 3339
#: or journald timestamp, indentation
_WRAPPED = re.compile(r"(?:[^\s:]+:)?\d+[:-]|\[pod/|\{|\d{4}-\d\d-\d\dT|\s|[^\s\d\[\](){}]\S{0,11} +\d{1,2} \d\d:\d\d:\d\d")


def variants(case: Path, names: dict[str, Paste] = ALL) -> list[str]:
    return [n for n in names if applies(case, n)]


def write_pasted(case: Path, name: str, out_dir: Path) -> list[str]:
    """The case's logs pasted the ``name`` way, written under ``out_dir``; the paths."""
    paths = []
    for p in logs_of(case):
        lines = ALL[name](read_lines(p))
        dest = out_dir / p.name
        dest.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
        paths.append(str(dest))
    return paths


#: a dated timestamp, or a year stated as a value: what a report would show of a year it invented
YEAR = re.compile(r"\b((?:19|20)\d\d)-\d\d-\d\d|\"year\": ((?:19|20)\d\d)")


def _years(text: str) -> set[str]:
    return {a or b for a, b in YEAR.findall(text)}


def invented(original_text: str, base: dict, pasted: dict) -> list[str]:
    """What the pasted copy's report states that neither the input nor the original's report does: a year,
    a TP size, a rank, a version."""
    problems = []
    known = set(re.findall(r"(?:19|20)\d\d", original_text)) | _years(json.dumps(base))
    for year in _years(json.dumps(pasted)) - known:
        problems.append(f"year {year} appears in the report")
    bctx, pctx = base.get("context") or {}, pasted.get("context") or {}
    for key in ("tensor_parallel_size", "lmcache_version", "vllm_version"):
        got, want = pctx.get(key), bctx.get(key)
        if got is not None and got != want and not (isinstance(want, str) and want.startswith(str(got))):
            problems.append(f"context {key}={got!r}, original {want!r}")  # less precise is no invention
    extra = set(pctx.get("ranks_seen") or ()) - set(bctx.get("ranks_seen") or ())
    if extra:
        problems.append(f"ranks {sorted(extra)} the original does not show")
    return problems


def rules_at_warning(report: dict) -> set[str]:
    return {f["rule"] for f in report["findings"] if f["severity"] in ("warning", "error")}


def problems(case: Path, name: str, out_dir: Path, base: dict | None = None) -> list[str]:
    """Everything the ``name`` paste of ``case`` gets wrong: its expected.json unmet, a warning-level rule
    gained or lost against the original's report, something invented."""
    expected = json.loads((case / "expected.json").read_text())
    if base is None:
        base = analyze([str(p) for p in logs_of(case)]).to_dict()
    report = analyze(write_pasted(case, name, out_dir)).to_dict()
    text = "".join(p.read_text("utf-8", "replace") for p in logs_of(case))
    found = check_report(expected, report) + invented(text, base, report)
    if rules_at_warning(report) != rules_at_warning(base):
        found.append(f"rules at warning {sorted(rules_at_warning(report))}, original {sorted(rules_at_warning(base))}")
    return found
