"""The pipeline's seams, enforced: data flows one way (docs/architecture.md).

* rules (``specdiag/analyzers``) never import ingest: what they need of the scanner's rows comes through
  the events layer (``specdiag.events.rows``);
* renderers (``specdiag/report``) never import the rules or ingest: rule metadata comes with the Report
  (``Report.rules``);
* ingest never imports what is built on it (rules, renderers, the run loop, the CLI), and imports the
  events layer only where ``INGEST_EVENTS_ALLOWED`` says why.

Every import counts, at any depth: module level, inside ``if TYPE_CHECKING:``, and inside functions (the
lazy imports that a module-level check would miss).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "specdiag"

#: stage folder → packages its modules must not import, and why
FORBIDDEN = {
    "analyzers": (("specdiag.ingest",), "rules see the events layer (specdiag.events.rows), never ingest"),
    "report": (("specdiag.analyzers", "specdiag.ingest"),
               "renderers read the Report (rule metadata: Report.rules), never the rules or the logs"),
    "ingest": (("specdiag.analyzers", "specdiag.report", "specdiag.engine", "specdiag.deployments", "specdiag.cli"),
               "ingest is the bottom of the pipeline: nothing built on it may be imported by it"),
}

#: the only imports of the events layer from ingest, each (file, statement, where) with its reason; none
#: runs when the module is loaded, and a new one (or a changed one) fails the test until it is listed here
INGEST_EVENTS_ALLOWED = {
    ("specdiag/ingest/hot.py", "from specdiag.events import Event", "type-only"):
        "the Event annotation of LookupRows/MetricRows.from_event (a batch of one line the per-line stages "
        "read); never executed",
    ("specdiag/ingest/shapes.py", "from specdiag.events import FieldError, default_matcher, first_word", "lazy"):
        "a rarer header shape is accepted only when the message is one a specific template reads: the "
        "template table is the events layer's, imported on first use (inverting it would make shape "
        "recognition depend on whether the events layer was imported first)",
}


@dataclass(frozen=True)
class Import:
    file: str  # relative to the repository root
    line: int
    module: str  # the imported module (``from a.b import c``: ``a.b`` and ``a.b.c`` are both reported)
    where: str  # "module" (runs at load), "type-only" (under ``if TYPE_CHECKING:``) or "lazy" (inside a function)
    stmt: str = ""  # the statement as written (``ast.unparse``)

    def __str__(self) -> str:
        return f"{self.file}:{self.line} imports {self.module} ({self.where})"


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _module_of(file: Path) -> str:
    parts = list(file.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[str]:
    """The absolute module names one import statement brings in (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = module.split(".") if is_pkg else module.split(".")[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join([*pkg, base] if base else pkg)
    return [base, *(f"{base}.{a.name}" for a in node.names if a.name != "*")]


def imports_of(source: str, rel: str, module: str, is_pkg: bool = False) -> list[Import]:
    """Every import in ``source`` with where it runs: at load time, only for type checkers, or lazily."""
    out: list[Import] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                stmt = ast.unparse(child)
                out.extend(Import(rel, child.lineno, name, where, stmt) for name in _names(child, module, is_pkg))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, "lazy")  # a class body runs when the module loads: it is walked as it stands
            elif isinstance(child, ast.If) and _is_type_checking(child) and where == "module":
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), "type-only")
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), where)
            else:
                visit(child, where)

    visit(ast.parse(source, filename=rel), "module")
    return out


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def offenders(imports: list[Import], packages: tuple[str, ...]) -> list[str]:
    """One line per offending import statement (``from a.b import c`` names ``a.b`` and ``a.b.c``: the first
    that falls inside ``packages`` is shown)."""
    first: dict[tuple[str, int], Import] = {}
    for i in imports:
        if _within(i.module, packages):
            first.setdefault((i.file, i.line), i)
    return [str(first[k]) for k in sorted(first)]


def stage_imports(stage: str) -> list[Import]:
    files = sorted((PKG / stage).rglob("*.py"))
    assert len(files) > 3, f"specdiag/{stage}: no modules found, the check would pass vacuously"
    out = []
    for f in files:
        rel = f.relative_to(ROOT).as_posix()
        out += imports_of(f.read_text(encoding="utf-8"), rel, _module_of(f), f.name == "__init__.py")
    return out


@pytest.mark.parametrize("stage", sorted(FORBIDDEN))
def test_stage_imports_nothing_built_on_it(stage: str) -> None:
    packages, why = FORBIDDEN[stage]
    bad = offenders(stage_imports(stage), packages)
    assert not bad, f"specdiag/{stage} must not import {', '.join(packages)} ({why}):\n" + "\n".join(bad)


def test_ingest_imports_the_events_layer_only_where_listed() -> None:
    events = ("specdiag.events",)
    found = [i for i in stage_imports("ingest") if _within(i.module, events)]
    loaded = offenders([i for i in found if i.where == "module"], events)
    assert not loaded, "ingest must not import the events layer when it is loaded:\n" + "\n".join(loaded)
    unlisted = offenders([i for i in found if (i.file, i.stmt, i.where) not in INGEST_EVENTS_ALLOWED], events)
    assert not unlisted, ("ingest imports the events layer where INGEST_EVENTS_ALLOWED does not say why "
                          "(move the operation into specdiag.events, or list it with its reason):\n" + "\n".join(unlisted))
    seen = {(i.file, i.stmt, i.where) for i in found}
    stale = sorted(f"{f}: {stmt} ({w})" for f, stmt, w in INGEST_EVENTS_ALLOWED if (f, stmt, w) not in seen)
    assert not stale, "INGEST_EVENTS_ALLOWED lists imports that are gone; remove them:\n" + "\n".join(stale)


def test_the_import_walk_sees_lazy_type_only_and_relative_imports() -> None:
    """The checks above are only as good as this walk: it must see imports at every depth."""
    src = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from specdiag.events import Event\n"
        "if TYPE_CHECKING:\n"
        "    from specdiag.ingest.envelope import Record\n"
        "def f():\n"
        "    if True:\n"
        "        from specdiag.ingest.hot import revive\n"
        "class C:\n"
        "    import specdiag.cli\n"
        "    def m(self):\n"
        "        import specdiag.report.sarif\n"
        "from ..ingest import scan\n"
        "from . import signals\n"
    )
    got = {(i.module, i.where) for i in imports_of(src, "specdiag/analyzers/x.py", "specdiag.analyzers.x")}
    assert ("specdiag.events", "module") in got
    assert ("specdiag.ingest.envelope", "type-only") in got
    assert ("specdiag.ingest.hot", "lazy") in got and ("specdiag.ingest.hot.revive", "lazy") in got
    assert ("specdiag.report.sarif", "lazy") in got and ("specdiag.cli", "module") in got
    assert ("specdiag.ingest.scan", "module") in got and ("specdiag.analyzers.signals", "module") in got
    assert _within("specdiag.ingest.scan", ("specdiag.ingest",)) and not _within("specdiag.ingestx", ("specdiag.ingest",))
