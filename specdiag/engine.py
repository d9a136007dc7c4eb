"""The pipeline: inputs → records → events → context + rules → findings → Report.

Everything streams: memory grows with the distinct requests still tracked and the findings, not with the
size of the logs. Several inputs (one file per rank, rotated files) are analysed as one deployment.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from specdiag.analyzers.base import Rule, all_rules
from specdiag.context import ContextBuilder, load_lmcache_yaml
from specdiag.events import Event, default_matcher, hot_first_words, template
from specdiag.findings import SEVERITIES
from specdiag.fingerprints import KEY_LINES
from specdiag.ingest import InputError, expand_inputs, iter_records
from specdiag.ingest.records import LineWindow, record_from_hot
from specdiag.report.model import Report

_DIGITS = re.compile(r"\d+")
_HEX = re.compile(r"0x[0-9a-f]+|[0-9a-f]{8,}")


class ConfigError(Exception):
    """Bad options or configuration: exit code 2."""


def select_rules(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[type[Rule]]:
    """Rules whose code matches a ``select`` entry (code or prefix; default all) and no ``ignore`` entry."""
    rules = all_rules()
    sel = [s.upper() for s in select] if select else None
    ign = [s.upper() for s in ignore] if ignore else []
    known_prefixes = {code[:n] for code in rules for n in range(1, len(code) + 1)}
    for entry in (sel or []) + ign:
        if entry not in known_prefixes and entry != "ALL":
            raise ConfigError(f"unknown rule code or prefix {entry!r} (see 'specdiag rules')")
    out = []
    for code, cls in rules.items():
        if sel is not None and "ALL" not in sel and not any(code.startswith(s) for s in sel):
            continue
        if any(code.startswith(s) for s in ign):
            continue
        out.append(cls)
    return out


def analyze(
    paths: list[str],
    *,
    lmcache_config: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    rule_options: dict[str, dict[str, Any]] | None = None,
    severity_overrides: dict[str, str] | None = None,
    observers: Iterable[Any] = (),
    stdin_name: str = "-",
    progress: Callable[[str, int], None] | None = None,
) -> Report:
    """Analyse the inputs. Raises InputError (I/O) or ConfigError (options) — both exit code 2."""
    started = time.perf_counter()
    user_cfg = None
    if lmcache_config:
        try:
            user_cfg = load_lmcache_yaml(lmcache_config)
        except ValueError as e:
            raise ConfigError(str(e)) from e
    for code, sev in (severity_overrides or {}).items():
        if sev not in SEVERITIES:
            raise ConfigError(f"severity for {code} must be one of {', '.join(SEVERITIES)}, not {sev!r}")
    rule_classes = select_rules(select, ignore)
    rules = [cls((rule_options or {}).get(cls.code)) for cls in rule_classes]
    from specdiag.metrics.collector import MetricsCollector

    metrics = MetricsCollector()
    observers = [*observers, metrics]
    sources = expand_inputs(paths, stdin_name=stdin_name)

    matcher = default_matcher()
    ctx_builder = ContextBuilder(user_cfg, lmcache_config)
    dispatch: dict[str, list[Callable]] = {}
    for obs in [*rules, *observers]:
        for eid in obs.events:
            dispatch.setdefault(eid, []).append(obs.observe)
    for eid in ContextBuilder.EVENTS:
        dispatch.setdefault(eid, []).append(ctx_builder.observe)

    # the most frequent LMCache lines (stores, retrieves) are only counted by ingest; rules read
    # ctx.event_counts, and look back at the one before an incident through ``rule.lookback``
    hot = hot_first_words(matcher.templates)
    event_counts: Counter[str] = Counter()
    first_counted: dict[str, Any] = {}
    unrecognized: Counter[str] = Counter()
    unknown_shapes: Counter[str] = Counter()
    fp = ctx_builder.fp
    fp_ids = set(KEY_LINES)
    for src in sources:
        last_origin = None
        n = 0
        window = LineWindow(src.display)
        for rule in rules:
            rule.lookback = window.find_back
        records = iter_records(src, hot, window)
        while True:
            try:
                rec = next(records, None)
            except InputError:  # the input itself cannot be read: the contract's exit 2
                raise
            except Exception as e:  # last line of defence: ingest of this input stops, the others go on
                _note_skipped(src, None, e, "reading stopped")
                break
            if rec is None:
                break
            n += 1
            try:
                if rec.origin is not last_origin:
                    last_origin = rec.origin
                    ctx_builder.observe_record_origin(rec.origin)
                ev = matcher.match(rec)
                if ev is None:
                    unrecognized[rec.kind] += 1
                    if rec.level in ("WARNING", "ERROR", "CRITICAL") and len(unknown_shapes) < 500:
                        shape = _HEX.sub("…", _DIGITS.sub("N", rec.msg[:90]))
                        unknown_shapes[f"{rec.kind} {rec.level}: {shape}"] += 1
                    continue
                if ev.id in fp_ids and ev.id not in fp.seen and rec.kind == "lmcache":
                    fp.observe(ev.id, rec.file, rec.src_line, rec.logger)
                eid = ev.id
                handlers = dispatch.get(eid)
                if handlers:
                    for h in handlers:
                        h(ev)
            except Exception as e:  # last line of defence: this record is skipped and named, the rest goes on
                unrecognized[rec.kind] += 1
                _note_skipped(src, rec, e, "skipped")
            if progress is not None and n % 100000 == 0:
                progress(src.display, src.stats.bytes_read)
        event_counts.update(src.stats.hot_counts)
        for eid, item in src.stats.hot_first.items():
            if eid not in first_counted:
                first_counted[eid] = Event(eid, record_from_hot(item), None, template(eid))
        window.set([], 0)
    ctx = ctx_builder.finish()
    ctx.event_counts = dict(event_counts)
    ctx.first_events = first_counted
    findings = []
    rules_failed: list[dict[str, str]] = []
    for rule in rules:
        try:
            produced = list(rule.finish(ctx))
        except Exception as e:  # last line of defence: this rule is reported as failed, the others finish
            rules_failed.append({"rule": rule.code, "error": _describe(e)})
            continue
        for f in produced:
            if rule.code in (severity_overrides or {}):
                f.severity = severity_overrides[rule.code]
            findings.append(f)
    for obs in observers:
        fin = getattr(obs, "finish_observer", None)
        if fin is not None:
            fin(ctx)
    inputs = [s.stats.to_dict() for s in sources]
    report = Report(
        inputs=inputs,
        context=ctx.to_dict(),
        findings=findings,
        unrecognized={**dict(unrecognized), **{"top_warnings": dict(unknown_shapes.most_common(10))}},
        rules_run=[r.code for r in rules],
        elapsed_s=time.perf_counter() - started,
    )
    report.rules_failed = rules_failed
    report.timeline = metrics.timeline(findings, ctx)
    report.ctx = ctx  # the live object, for renderers that want more than the JSON view
    return report


#: notes per input about skipped records, beyond which only a count is kept (bounded report size)
MAX_SKIP_NOTES = 20


def _describe(e: BaseException) -> str:
    """``FieldError: V1: field 'reqs' …`` — one line, bounded, safe to print anywhere."""
    text = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _note_skipped(src: Any, rec: Any, e: BaseException, what: str) -> None:
    """Name the record an unexpected exception skipped in ``inputs[].errors`` (the first few, then a count)."""
    errs = src.stats.errors
    src.stats.skipped += 1 if rec is not None else 0
    where = f"line {rec.line}" if rec is not None else f"after {src.stats.bytes_read} bytes"
    if len(errs) < MAX_SKIP_NOTES:
        errs.append(f"{where}: {what} ({_describe(e)})")
    elif len(errs) == MAX_SKIP_NOTES:
        errs.append("more records skipped; only the first are listed")


__all__ = ["ConfigError", "InputError", "analyze", "select_rules"]
