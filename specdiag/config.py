"""Project configuration for ``specdiag check`` / ``analyze``: discovery, validation, precedence.

Where it comes from (first match wins, walking up from the working directory to the filesystem root):

1. ``specdiag.yaml`` (or ``.specdiag.yaml``) — the keys at the top level;
2. ``pyproject.toml`` with a ``[tool.specdiag]`` table (a ``pyproject.toml`` without that table is skipped).

``--config FILE`` names the file instead (YAML, or TOML with either ``[tool.specdiag]`` or the keys at the
top level); ``--no-config`` ignores every file. Command-line flags override the file, key by key (a flag
*replaces* the file's value, it does not extend it).

Keys (``fail-on`` and ``fail_on`` spellings are both accepted)::

    [tool.specdiag]
    select = ["KV"]                 # rule codes or prefixes; default: every rule
    ignore = ["KV008"]              # codes or prefixes to skip
    fail-on = "warning"             # error | warning | info | never
    baseline = "ci/specdiag-baseline.json"   # relative to the file that names it
    lmcache-config = "deploy/lmcache.yaml"   # relative to the file that names it

    [tool.specdiag.severity]        # per-rule (or prefix) severity overrides
    KV002 = "error"

    [tool.specdiag.rules.KV001]     # per-rule thresholds (see `specdiag config show` for every one)
    window_s = 30
    severity = "warning"            # also accepted here

Every problem (unknown key, rule, threshold, wrong type) raises ``ConfigError`` (exit code 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdiag.engine import ConfigError
from specdiag.yamlfile import read_mapping

FAIL_ON_LEVELS = ("error", "warning", "info", "never")
SEVERITY_LEVELS = ("error", "warning", "info")
YAML_NAMES = ("specdiag.yaml", ".specdiag.yaml")
KNOWN_KEYS = ("select", "ignore", "severity", "rules", "fail_on", "baseline", "lmcache_config")
DEFAULT = "default"
#: severities ``specdiag check`` applies unless the configuration or ``--severity`` says otherwise. A CI gate
#: on server logs exists to catch a retrieve shortfall even when vLLM recomputed it (policy recompute makes
#: KV001 a warning in ``analyze``: no client saw an error, but the cache lost data it promised).
GATE_SEVERITY = {"KV001": "error"}
GATE_SOURCE = "check default: a shortfall fails CI under any failure policy"

def toml_reader() -> Any:
    """``tomllib`` (Python 3.11+) or ``tomli``, imported when a TOML file is read: importing it took 1.8 ms of
    every start, and most runs read none. None without either (pyproject.toml discovery is skipped then;
    specdiag.yaml still works)."""
    try:
        import tomllib

        return tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli  # type: ignore[import-not-found]

            return tomli
        except ModuleNotFoundError:
            return None


@dataclass
class Config:
    """The resolved configuration; ``sources`` says where each value came from."""

    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, str] = field(default_factory=dict)  # code -> level (prefixes expanded)
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_on: str = "error"
    baseline: str | None = None
    lmcache_config: str | None = None
    config_file: str | None = None
    #: "select", "fail_on", "severity.KV002", "rules.KV001.window_s" ... -> "default" | file label | "--flag"
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def source(self, key: str) -> str:
        return self.sources.get(key, DEFAULT)


def _norm_key(k: str) -> str:
    return str(k).replace("-", "_")


def _read_toml(path: Path) -> dict[str, Any]:
    toml = toml_reader()
    if toml is None:
        raise ConfigError(f"{path}: reading TOML needs Python 3.11+ or the 'tomli' package")
    try:
        with open(path, "rb") as fh:
            return toml.load(fh)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror or e})") from e
    except Exception as e:  # tomllib.TOMLDecodeError
        raise ConfigError(f"{path}: invalid TOML ({e})") from e


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        return read_mapping(path, "settings")
    except ValueError as e:
        raise ConfigError(str(e)) from e


def load_file(path: str | os.PathLike) -> dict[str, Any]:
    """The specdiag table of one configuration file (YAML, or TOML with or without ``[tool.specdiag]``)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: configuration file not found")
    if p.suffix.lower() in (".yaml", ".yml"):
        return _read_yaml(p)
    data = _read_toml(p)
    tool = data.get("tool")
    if isinstance(tool, dict) and "specdiag" in tool:
        table = tool["specdiag"]
    elif p.name == "pyproject.toml":
        table = {}
    else:
        table = data
    if not isinstance(table, dict):
        raise ConfigError(f"{p}: [tool.specdiag] must be a table")
    return table


def find_config(start: str | os.PathLike | None = None) -> Path | None:
    """The nearest specdiag.yaml or pyproject.toml with ``[tool.specdiag]``, walking up from ``start``."""
    cur = Path(start or os.getcwd()).resolve()
    for d in (cur, *cur.parents):
        for name in YAML_NAMES:
            if (d / name).is_file():
                return d / name
        pp = d / "pyproject.toml"
        if pp.is_file() and _names_specdiag(pp):
            return pp
    return None


def _names_specdiag(path: Path) -> bool:
    """Whether a pyproject.toml found on the way up has a ``[tool.specdiag]`` table. One that never spells
    ``specdiag`` has none (a TOML key holds its name as written), and is not parsed: the walk passes the
    user's own projects' files on every run."""
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    toml = toml_reader()
    if b"specdiag" not in raw or toml is None:
        return False
    try:
        data = toml.loads(raw.decode("utf-8"))
    except Exception:  # an unrelated broken pyproject.toml is not ours to judge during discovery
        return False
    return isinstance(data.get("tool"), dict) and "specdiag" in data["tool"]


def _label(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # pragma: no cover - other drive on Windows
        rel = str(path)
    shown = rel if not rel.startswith("..") else str(path)
    return f"{shown} [tool.specdiag]" if path.name == "pyproject.toml" else shown


def _str_list(value: Any, key: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: '{key}' must be a list of rule codes or prefixes")
    return [v.strip().upper() for v in value]


def _level(value: Any, allowed: tuple[str, ...], what: str, where: str) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        prefix = "" if where == what else f"{where}: "  # a flag names itself once, not "--x: --x must be"
        raise ConfigError(f"{prefix}{what} must be one of {', '.join(allowed)}, not {value!r}")
    return value.lower()


def _expand_codes(key: str, codes: list[str], where: str) -> list[str]:
    k = key.upper()
    hit = [c for c in codes if c.startswith(k)] if k != "ALL" else list(codes)
    if not hit:
        raise ConfigError(f"{where}: unknown rule code or prefix {key!r} (see 'specdiag rules')")
    return hit


def _coerce_option(code: str, name: str, value: Any, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, str):
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        raise ConfigError(f"{where}: rules.{code}.{name} must be {type(default).__name__} "
                          f"(default {default!r}), not {value!r}")
    return value


def _apply(cfg: Config, table: dict[str, Any], label: str, base_dir: Path | None) -> None:
    """Validate one configuration table and apply it to ``cfg``, recording ``label`` as each value's source.

    An unknown top-level key is rejected before anything is applied, and every other problem raises too: a
    typo fails the run instead of being silently ignored.
    """
    from specdiag.analyzers.base import all_rules

    rules = all_rules()
    codes = list(rules)
    norm = _known_keys(table, label)
    _apply_scalars(cfg, norm, label, base_dir)
    _apply_severity_table(cfg, norm.get("severity", {}), codes, label)
    rtab = norm.get("rules", {})
    if not isinstance(rtab, dict):
        raise ConfigError(f"{label}: 'rules' must be a table of rule codes")
    for code, opts in rtab.items():
        code_u = str(code).upper()
        if code_u not in rules:
            raise ConfigError(f"{label}: rules.{code}: unknown rule code (see 'specdiag rules')")
        if not isinstance(opts, dict):
            raise ConfigError(f"{label}: rules.{code} must be a table of thresholds")
        _apply_rule_options(cfg, code_u, opts, rules[code_u].defaults, label)


def _known_keys(table: dict[str, Any], label: str) -> dict[str, Any]:
    """The table with dashed spellings (``fail-on``) normalised to underscores; an unknown key is an error."""
    norm = {}
    for k, v in table.items():
        nk = _norm_key(k)
        if nk not in KNOWN_KEYS:
            raise ConfigError(f"{label}: unknown setting {k!r} (known: {', '.join(KNOWN_KEYS)})")
        norm[nk] = v
    return norm


def _path_value(key: str, v: Any, label: str, base_dir: Path | None) -> str:
    """A path setting, relative to the file that names it (so a config works from any working directory)."""
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{label}: '{key}' must be a path")
    if base_dir is not None and not os.path.isabs(v):
        return os.path.normpath(os.path.join(base_dir, v))
    return v


def _apply_scalars(cfg: Config, norm: dict[str, Any], label: str, base_dir: Path | None) -> None:
    """select, ignore, fail-on, baseline and lmcache-config: each replaces the value before it."""
    if "select" in norm:
        cfg.select = _str_list(norm["select"], "select", label)
        cfg.sources["select"] = label
    if "ignore" in norm:
        cfg.ignore = _str_list(norm["ignore"], "ignore", label)
        cfg.sources["ignore"] = label
    if "fail_on" in norm:
        cfg.fail_on = _level(norm["fail_on"], FAIL_ON_LEVELS, "fail-on", label)
        cfg.sources["fail_on"] = label
    if "baseline" in norm:
        cfg.baseline = _path_value("baseline", norm["baseline"], label, base_dir)
        cfg.sources["baseline"] = label
    if "lmcache_config" in norm:
        cfg.lmcache_config = _path_value("lmcache-config", norm["lmcache_config"], label, base_dir)
        cfg.sources["lmcache_config"] = label


def _apply_severity_table(cfg: Config, sev: Any, codes: list[str], label: str) -> None:
    """``[severity]``: a code or prefix per level, expanded to every matching rule so that ``sources`` can
    name the origin of each rule's severity."""
    if not isinstance(sev, dict):
        raise ConfigError(f"{label}: 'severity' must map rule codes or prefixes to error | warning | info")
    for key, level in sev.items():
        lv = _level(level, SEVERITY_LEVELS, f"severity.{key}", label)
        for code in _expand_codes(str(key), codes, label):
            cfg.severity[code] = lv
            cfg.sources[f"severity.{code}"] = label


def _apply_rule_options(cfg: Config, code_u: str, opts: dict[str, Any], defaults: dict[str, Any],
                        label: str) -> None:
    """``[rules.CODE]``: thresholds typed like their defaults, plus ``severity``; an unknown name is an error."""
    for name, value in opts.items():
        name_n = _norm_key(name)
        if name_n == "severity":
            cfg.severity[code_u] = _level(value, SEVERITY_LEVELS, f"rules.{code_u}.severity", label)
            cfg.sources[f"severity.{code_u}"] = label
            continue
        if name_n not in defaults:
            known = ", ".join(sorted(defaults)) or "none"
            raise ConfigError(f"{label}: rules.{code_u}.{name}: unknown threshold (known: {known}, severity)")
        cfg.rule_options.setdefault(code_u, {})[name_n] = _coerce_option(
            code_u, name_n, value, defaults[name_n], label)
        cfg.sources[f"rules.{code_u}.{name_n}"] = label


def resolve(
    config_file: str | None = None,
    *,
    no_config: bool = False,
    cwd: str | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    fail_on: str | None = None,
    baseline: str | None = None,
    lmcache_config: str | None = None,
    severity: list[str] | None = None,
    gate: bool = False,
) -> Config:
    """Defaults ← the configuration file ← flags (each given flag replaces the file's value). ``gate``:
    the CI gate's defaults (``GATE_SEVERITY``) apply where nothing else set a severity."""
    from specdiag.engine import select_rules

    cfg = Config()
    if gate:
        for code, level in GATE_SEVERITY.items():
            cfg.severity[code] = level
            cfg.sources[f"severity.{code}"] = GATE_SOURCE
    path = _config_path(config_file, no_config, cwd)
    if path is not None:
        table = load_file(path)
        label = _label(path)
        cfg.config_file = str(path)
        _apply(cfg, table, label, path.resolve().parent)
    _apply_flags(cfg, select, ignore, fail_on, baseline, lmcache_config)
    if severity:
        _apply_severity_flags(cfg, severity)
    select_rules(cfg.select, cfg.ignore)  # validates codes and prefixes (ConfigError)
    return cfg


def _config_path(config_file: str | None, no_config: bool, cwd: str | None) -> Path | None:
    """``--config FILE`` (which must exist), else the discovered file unless ``--no-config``."""
    path: Path | None = None
    if config_file:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"{config_file}: configuration file not found")
    elif not no_config:
        path = find_config(cwd)
    return path


def _apply_flags(cfg: Config, select: list[str] | None, ignore: list[str] | None, fail_on: str | None,
                 baseline: str | None, lmcache_config: str | None) -> None:
    """The command-line flags other than ``--severity``: each one given replaces the file's value."""
    if select:
        cfg.select = _str_list(list(select), "--select", "--select")
        cfg.sources["select"] = "--select"
    if ignore:
        cfg.ignore = _str_list(list(ignore), "--ignore", "--ignore")
        cfg.sources["ignore"] = "--ignore"
    if fail_on is not None:
        cfg.fail_on = _level(fail_on, FAIL_ON_LEVELS, "--fail-on", "--fail-on")
        cfg.sources["fail_on"] = "--fail-on"
    if baseline:
        cfg.baseline = baseline
        cfg.sources["baseline"] = "--baseline"
    if lmcache_config:
        cfg.lmcache_config = lmcache_config
        cfg.sources["lmcache_config"] = "--lmcache-config"


def _apply_severity_flags(cfg: Config, severity: list[str]) -> None:
    """``--severity CODE=LEVEL`` items, a prefix expanded to every matching rule like the file's table."""
    from specdiag.analyzers.base import all_rules

    codes = list(all_rules())
    for item in severity:
        key, sep, level = item.partition("=")
        if not sep:
            raise ConfigError(f"--severity {item!r}: expected CODE=LEVEL, e.g. KV002=error")
        lv = _level(level.strip(), SEVERITY_LEVELS, f"--severity {key}", "--severity")
        for code in _expand_codes(key.strip(), codes, "--severity"):
            cfg.severity[code] = lv
            cfg.sources[f"severity.{code}"] = "--severity"


def enabled_codes(cfg: Config) -> list[str]:
    from specdiag.engine import select_rules

    return [cls.code for cls in select_rules(cfg.select, cfg.ignore)]


def describe(cfg: Config) -> list[tuple[str, Any, str]]:
    """``(key, value, source)`` rows for ``specdiag config show`` — every threshold of every rule included."""
    from specdiag.analyzers.base import all_rules

    rows: list[tuple[str, Any, str]] = [
        ("select", cfg.select if cfg.select is not None else ["ALL"], cfg.source("select")),
        ("ignore", cfg.ignore, cfg.source("ignore")),
        ("fail-on", cfg.fail_on, cfg.source("fail_on")),
        ("baseline", cfg.baseline, cfg.source("baseline")),
        ("lmcache-config", cfg.lmcache_config, cfg.source("lmcache_config")),
        ("enabled rules", enabled_codes(cfg), "select/ignore"),
    ]
    for code, cls in all_rules().items():
        note = getattr(cls, "severity_note", "")
        if code in cfg.severity:
            src = cfg.source(f"severity.{code}")
            rows.append((f"severity.{code}", cfg.severity[code], f"{src}; by default {note}" if note else src))
        else:
            rows.append((f"severity.{code}", cls.severity, f"{DEFAULT}; {note}" if note else DEFAULT))
        for name, default in sorted(cls.defaults.items()):
            key = f"rules.{code}.{name}"
            value = cfg.rule_options.get(code, {}).get(name, default)
            rows.append((key, value, cfg.source(key)))
    return rows


__all__ = ["Config", "ConfigError", "describe", "enabled_codes", "find_config", "load_file", "resolve"]
