"""What the logs reveal about the deployment: versions, TP/PP, ranks, LMCache and speculative config.

Built incrementally from events (bounded state: a few dicts), then frozen into a ``Context`` that the
analyzers read in ``finish``. A user-supplied ``--lmcache-config`` YAML fills what the log does not show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specdiag.events import Event
from specdiag.fingerprints import VersionFingerprint, in_span
from specdiag.numbers import finite_or_none, to_int
from specdiag.observe import Observer, RunState
from specdiag.patterns import lazy
from specdiag.pyrepr import parse_call_kwargs, parse_dict, value_after
from specdiag.timeutil import TIME_BASIS, is_nominal_year

if TYPE_CHECKING:  # pragma: no cover
    from specdiag.ingest.envelope import Record
    from specdiag.ingest.hot import MetricRows
from specdiag.yamlfile import read_mapping

_SPEC_REPR = lazy(
    r"SpeculativeConfig\(method='(?P<method>[^']*)', model=(?:'(?P<model>[^']*)'|None), num_spec_tokens=(?P<k>\d{1,19})\)"
)
#: the request-path options of the non-default args kept in ``Context.serving_options``
SERVING_OPTIONS = ("async_scheduling", "reasoning_parser", "tool_call_parser", "enable_auto_tool_choice",
                   "guided_decoding_backend", "structured_outputs_config", "max_model_len")
_CFG_INT = lazy(r"\b(tensor_parallel_size|pipeline_parallel_size|data_parallel_size)=(\d{1,19})")
_CFG_BOOL = lazy(r"\b(enable_prefix_caching)=(True|False|None)")
_CFG_MODEL = lazy(r"^model='([^']*)'")
_CFG_MAX_SEQ = lazy(r"\bmax_seq_len=(\d{1,9})\b")
_WORLD = lazy(r"world_size=(\d{1,19})")
#: an explicit TP suffix in a worker's process name: ``Worker_TP0``, ``Worker_PP1_TP0``, ``VllmWorker TP0``
_TP_SUFFIX = lazy(r"(?:_| )TP\d")
#: no speculative method drafts more tokens per step than this; a larger (or inf/nan) K is a damaged line
MAX_SPEC_TOKENS = 1024


@dataclass(slots=True)  # slots: one Context a deployment, 1.2 KiB less each (a dict of 50 fields)
class Context:
    vllm_version: str | None = None
    #: where vllm_version comes from when no line prints it (e.g. the vendored adapter's line numbers)
    vllm_version_source: str | None = None
    lmcache_version: str | None = None
    lmcache_version_evidence: list[str] = field(default_factory=list)
    lmcache_version_note: str | None = None
    lmcache_vendored_adapter: bool = False
    model: str | None = None
    tensor_parallel_size: int | None = None
    #: how tensor_parallel_size is known: "config" (printed), "LMCache world_size", or "rank labels" — the
    #: last is only a lower bound (TP ≥ highest rank + 1): the other ranks' logs may simply not be given
    tensor_parallel_size_source: str | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    ranks_seen: list[str] = field(default_factory=list)
    lmcache_config: dict[str, Any] | None = None
    lmcache_config_source: str | None = None
    lmcache_configs_differ: bool = False
    chunk_size: int | None = None
    use_mla: bool | None = None
    num_draft_layers: int | None = None
    speculative: dict[str, Any] | None = None
    prefix_caching: bool | None = None
    kv_connector: str | None = None
    kv_role: str | None = None
    kv_load_failure_policy: str | None = None
    kv_load_failure_policy_source: str | None = None
    lmcache_degraded: bool = False
    hash_algorithm: str | None = None
    none_hashes: list[str] = field(default_factory=list)
    pythonhashseed_warning: bool = False
    device: str | None = None
    #: a startup line (version, non-default args, engine config, KV cache size) is in the inputs: the excerpt
    #: covers the server's start, so "from the start" and "no such config line" mean something
    startup_seen: bool = False
    #: vLLM's ``non-default args`` line is in the inputs: it lists ``kv_transfer_config`` whenever one is set,
    #: so a KV connector absent from it is absent from the server
    vllm_args_seen: bool = False
    #: the request-path options of vLLM's ``non-default args`` line that rules weigh (``SERVING_OPTIONS``): async
    #: scheduling, the reasoning and tool-call parsers, the structured-output backend; scalars only
    serving_options: dict[str, Any] = field(default_factory=dict)
    #: the context the engine runs with (its config line's ``max_seq_len``): what requests are refused above
    max_seq_len: int | None = None
    #: SpecDecoding/Speculative metrics lines seen (one per logging interval and engine)
    spec_intervals: int = 0
    #: the year of the log's vLLM times, from lines of the same input that carry one; None = unknown
    log_year: int | None = None
    log_year_source: str | None = None
    #: rank per process key from LMCache's "Initialize storage manager on rank N" (Ray workers carry no TP name)
    rank_by_proc: dict[str, str] = field(default_factory=dict)

    @property
    def tensor_parallel_size_inferred(self) -> bool:
        """True when the TP size is only a lower bound from the highest rank label seen (TP ≥ N)."""
        return bool(self.tensor_parallel_size_source and self.tensor_parallel_size_source.startswith("rank labels"))

    def cfg(self, key: str, default: Any = None) -> Any:
        if not self.lmcache_config:
            return default
        return self.lmcache_config.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return {
            "vllm_version": self.vllm_version,
            "vllm_version_source": self.vllm_version_source,
            "lmcache_version": self.lmcache_version,
            "lmcache_version_evidence": self.lmcache_version_evidence,
            "lmcache_version_note": self.lmcache_version_note,
            "lmcache_vendored_adapter": self.lmcache_vendored_adapter,
            "model": self.model,
            # a lower bound from rank labels is not the TP size: consumers reading only that integer would get a
            # size the log never stated, so it goes to its own key and the size stays null (unknown)
            "tensor_parallel_size": None if self.tensor_parallel_size_inferred else self.tensor_parallel_size,
            "tensor_parallel_size_at_least": self.tensor_parallel_size if self.tensor_parallel_size_inferred else None,
            "tensor_parallel_size_source": self.tensor_parallel_size_source,
            "tensor_parallel_size_inferred": self.tensor_parallel_size_inferred,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "data_parallel_size": self.data_parallel_size,
            "ranks_seen": self.ranks_seen,
            "lmcache_config": _jsonable(self.lmcache_config),
            "lmcache_config_source": self.lmcache_config_source,
            "chunk_size": self.chunk_size,
            "use_mla": self.use_mla,
            "num_draft_layers": self.num_draft_layers,
            "speculative": _jsonable(self.speculative),
            "prefix_caching": self.prefix_caching,
            "kv_connector": self.kv_connector,
            "kv_role": self.kv_role,
            "kv_load_failure_policy": self.kv_load_failure_policy,
            "kv_load_failure_policy_source": self.kv_load_failure_policy_source,
            "lmcache_degraded": self.lmcache_degraded,
            "hash_algorithm": self.hash_algorithm,
            "device": self.device,
            "startup_seen": self.startup_seen,
            "spec_intervals": self.spec_intervals,
            "serving_options": dict(self.serving_options),
            "max_seq_len": self.max_seq_len,
            "time_basis": TIME_BASIS,
            "log_year": self.log_year,
            "log_year_source": self.log_year_source,
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def default_failure_policy(vllm_version: str | None) -> str | None:
    """vLLM's default ``kv_load_failure_policy`` for a version (None when unknown). For a range inferred from
    line numbers (``0.19.0..0.28.0``) both ends must agree: a range across a change of default says nothing."""
    from specdiag.fingerprints import version_tuple

    if vllm_version and ".." in vllm_version:
        lo, _, hi = vllm_version.partition("..")
        policy = default_failure_policy(lo)
        return policy if policy == default_failure_policy(hi) else None
    v = version_tuple(vllm_version)
    if v is None:
        return None
    if v < (0, 11, 2):
        return "none"  # no handling: failed blocks are used as they are
    if v < (0, 20, 0):
        return "recompute"
    return "fail"


#: lines the scanner only counts, never handing their records on: their first row (``run.first``) places
#: the build too
SCANNED_KEY_LINES = ("S1", "R4", "L1")


class ContextBuilder(Observer):
    """Observes configuration/startup events and fills the deployment's Context in ``finish``.

    Every LMCache record with a ``(file:line:logger)`` suffix reaches ``observe_record`` too (recognised or
    not): the version fingerprint places the build from the first record of each printed location.
    """

    EVENTS = {
        "C10", "C11", "C12", "C13", "C16", "C18", "C20", "C21", "C21b", "C22", "C23", "C24", "C32", "C33", "C37",
        "V_VERSION", "V_LOGO", "V_ARGS", "V_ARGS_OLD", "V_ENGINE_CFG", "V_CONNECTOR", "V_CREATE_CONNECTOR",
        "V1", "V2", "E_BANNER", "E_NO_CONNECTOR", "V_KV_SIZE", "V_DUMP_INPUT",
    }
    #: lines vLLM prints only while the server starts
    STARTUP = frozenset({"V_VERSION", "V_LOGO", "V_ARGS", "V_ARGS_OLD", "V_ENGINE_CFG", "V_KV_SIZE"})

    events = frozenset(EVENTS)
    tables = frozenset({"metrics"})  # the SpecDecoding lines: how many intervals, and K from their positions

    def __init__(self, ctx: Context, lmcache_config_file: dict[str, Any] | None = None,
                 lmcache_config_path: str | None = None):
        self.ctx = ctx
        self.fp = VersionFingerprint()
        self.ranks: set[str] = set()
        self.tp_suffix = False  # a worker name carried an explicit TP suffix (printed only when TP > 1)
        #: LMCache's config dumps as ``_lmcache_config`` reads them: the first, whether a later one differs
        #: (its instance id aside), and the ``lmcache.*`` overrides of ``kv_connector_extra_config`` in order.
        #: Not every dump: a TP=8 server prints eight, and a log of 400 interleaved pods held 3,200 (19 MiB)
        self.first_dump: dict[str, Any] | None = None
        self.dumps_differ = False
        self.overrides: dict[str, Any] = {}
        self.user_config = lmcache_config_file
        self.user_config_path = lmcache_config_path
        self.world_sizes: set[int] = set()
        self.lmcache_exact: str | None = None
        self.k_from_positions: int | None = None
        self.k_source = "per-position acceptance rates (SpecDecoding metrics)"
        self.input_years: dict[str, int | None] = {}

    def observe_input_year(self, name: str, year: int | None) -> None:
        """The year ingest settled on for one input (``None``/nominal: no line of it carries one)."""
        self.input_years[name] = None if is_nominal_year(year) else year

    def _log_year(self) -> None:
        """Context view of the inputs' years: one year, several, or unknown (never the current year by default)."""
        years = {y for y in self.input_years.values() if y is not None}
        unknown = [n for n, y in self.input_years.items() if y is None]
        c = self.ctx
        if not years:
            c.log_year_source = ("unknown: no line of the input carries a year (vLLM prints month-day only); "
                                 "times are shown as month-day and time") if self.input_years else None
            return
        c.log_year = max(years)
        src = "from timestamps that carry a year in the same input (LMCache lines, collector wrappers)"
        if len(years) > 1:
            src += f"; inputs differ ({', '.join(str(y) for y in sorted(years))})"
        if unknown:
            src += f"; unknown for {', '.join(unknown[:4])}"
        c.log_year_source = src

    def observe(self, ev: Event) -> None:
        if ev.id in self.EVENTS:
            self._observe_config(ev)

    def observe_record(self, rec: Record) -> None:
        """A suffixed LMCache record, whatever its template (or none): its location to the fingerprint."""
        self.fp.observe_record(rec)

    def _observe_config(self, ev: Event) -> None:
        if ev.id in self.STARTUP:
            self.ctx.startup_seen = True
        if ev.id.startswith("V"):
            self._observe_vllm_config(ev.id, ev.f)
        else:
            self._observe_lmcache_config(ev)

    def _observe_lmcache_config(self, ev: Event) -> None:
        """LMCache's own lines (its version banner, config dump, rank, hashing, device, degraded mode)."""
        c = self.ctx
        tid = ev.id
        f = ev.f
        if tid == "C18":
            v = f["lmcache_version"]
            if v.endswith("-gNone") or v.endswith("-g"):
                v = v.rsplit("-g", 1)[0]
            self.lmcache_exact = self.lmcache_exact or v
            if f.get("vllm_version") and not c.vllm_version:
                c.vllm_version = f["vllm_version"]
            if m := _WORLD.search(f.get("metadata") or ""):
                if (ws := to_int(m.group(1), lo=1, hi=1 << 20)) is not None:
                    self.world_sizes.add(ws)
            if (f.get("metadata") or "").strip() == "None" and "WORKER" in f.get("role", ""):
                c.lmcache_degraded = True
        elif tid == "E_BANNER":
            self.lmcache_exact = self.lmcache_exact or f["version"]
        elif tid == "C16":
            o = ev.rec.origin
            if o.pid is not None and o.rank_label is None:
                self.ctx.rank_by_proc[o.key] = f"TP{f['rank']}"
        elif tid == "C12":
            if f.get("chunk_size"):
                c.chunk_size = f["chunk_size"]
            c.use_mla = f.get("mla") == "True"
            if f.get("draft_layers") is not None:
                c.num_draft_layers = f["draft_layers"]
        elif tid == "C13":
            d = parse_dict(f["dict"])
            if d:
                self._note_dump(d)
        elif tid == "C10":
            self._spec_from_repr(f["spec"])
        elif tid in ("C32", "C33", "E_NO_CONNECTOR"):
            c.lmcache_degraded = True
        elif tid in ("C22", "C23", "C24"):
            c.pythonhashseed_warning = True
        elif tid in ("C21",):
            c.hash_algorithm = f["algo"]
        elif tid == "C20":
            h = f.get("none_hash") or "0"
            if h not in c.none_hashes and len(c.none_hashes) < 16:
                c.none_hashes.append(h)
        elif tid == "C37":
            c.device = f.get("device_type")

    def _observe_vllm_config(self, tid: str, f: dict) -> None:
        """vLLM's start-up lines (version, engine config, arguments, connector) and its load-failure policy."""
        c = self.ctx
        if tid in ("V_VERSION", "V_LOGO"):
            c.vllm_version = c.vllm_version or f["version"]
            if f.get("model"):
                c.model = c.model or f["model"].strip()
        elif tid in ("V_ENGINE_CFG", "V_DUMP_INPUT"):  # the crash dump prints the same config repr
            c.vllm_version = c.vllm_version or f["version"]
            cfg = f["cfg"]
            for k, v in _CFG_INT.findall(cfg):
                setattr(c, k, getattr(c, k) or to_int(v, lo=1, hi=1 << 20))
            if m := _CFG_BOOL.search(cfg):
                c.prefix_caching = {"True": True, "False": False}.get(m.group(2))
            if m := _CFG_MODEL.search(cfg):
                c.model = c.model or m.group(1)
            if m := _CFG_MAX_SEQ.search(cfg):
                c.max_seq_len = c.max_seq_len or to_int(m.group(1), lo=1, hi=1 << 30)
            self._spec_from_repr(cfg)
        elif tid in ("V_ARGS", "V_ARGS_OLD"):
            c.vllm_args_seen = True
            self._from_args(f["args"])
        elif tid == "V_CREATE_CONNECTOR":
            c.kv_connector = c.kv_connector or f["name"]
        elif tid == "V_CONNECTOR":
            c.kv_connector = c.kv_connector or "LMCacheConnectorV1"
        elif tid == "V1":
            c.kv_load_failure_policy = c.kv_load_failure_policy or "recompute"
            c.kv_load_failure_policy_source = c.kv_load_failure_policy_source or "observed"
        elif tid == "V2":
            c.kv_load_failure_policy = f.get("policy") or "fail"
            c.kv_load_failure_policy_source = "observed"
        elif tid == "V_KV_SIZE":
            c.device = c.device or f["device"].lower().replace("gpu", "cuda")

    def observe_metrics(self, rows: MetricRows) -> None:
        """Count the SpecDecoding intervals; the first ones also give K when no config line says it.

        vLLM prints one per-position acceptance rate per draft position, i.e. ``num_speculative_tokens``
        of them (``v1/spec_decode/metrics.py``: ``num_accepted_tokens_per_pos`` has K entries); the V0 line
        prints ``Number of speculative tokens`` itself.
        """
        if self.k_from_positions is not None and self.ctx.spec_intervals >= 16:  # K is known: count them
            self.ctx.spec_intervals += rows.kinds.count("spec")
            return
        for k, kind in enumerate(rows.kinds):
            if kind != "spec":
                continue
            self.ctx.spec_intervals += 1
            if self.k_from_positions is None or self.ctx.spec_intervals <= 16:
                self._k_from_spec(rows.spec(k))

    def _k_from_spec(self, d: dict) -> None:
        pos = d.get("per_position")
        k = len(pos) if pos else d.get("num_spec_tokens")
        if isinstance(k, int) and 0 < k <= 64:
            self.k_from_positions = max(self.k_from_positions or 0, k)
            if not pos:
                self.k_source = "Number of speculative tokens (V0 Speculative metrics)"

    def _spec_from_repr(self, text: str) -> None:
        m = _SPEC_REPR.search(text)
        if not m:
            return
        spec = dict(self.ctx.speculative or {})
        spec.setdefault("enabled", True)
        spec.setdefault("method", m.group("method"))
        if (k := to_int(m.group("k"), lo=0, hi=MAX_SPEC_TOKENS)) is not None:
            spec.setdefault("num_speculative_tokens", k)
            spec.setdefault("num_speculative_tokens_source", "config")
        if m.group("model"):
            spec.setdefault("model", m.group("model"))
        self.ctx.speculative = spec

    def _from_args(self, args: str) -> None:
        c = self.ctx
        simple = parse_dict(args) if args.startswith("{") else parse_call_kwargs(args)
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            v = simple.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 20:
                setattr(c, key, v)
        if isinstance(simple.get("model"), str):
            c.model = c.model or simple["model"]
        if simple.get("enable_prefix_caching") is not None and isinstance(simple["enable_prefix_caching"], bool):
            c.prefix_caching = simple["enable_prefix_caching"]
        if "no_enable_prefix_caching" in args:
            c.prefix_caching = False
        c.serving_options.update((k, simple[k]) for k in SERVING_OPTIONS
                                 if isinstance(simple.get(k), (str, int, float, bool)))
        raw_spec = value_after(args, "speculative_config")
        if raw_spec and raw_spec.startswith("{"):
            d = parse_dict(raw_spec)
            sched = value_after(raw_spec, "num_speculative_tokens_per_batch_size")
            spec = dict(c.speculative or {})
            spec.update({k: v for k, v in d.items() if not isinstance(v, dict)})
            spec["enabled"] = True
            if "num_speculative_tokens" in spec:
                spec.setdefault("num_speculative_tokens_source", "config")
            if sched:
                spec["per_batch_size"] = _schedule(sched)
            _clean_spec_numbers(spec)
            c.speculative = spec
        kvt = value_after(args, "kv_transfer_config")
        if kvt:
            kv = parse_dict(kvt) if kvt.startswith("{") else parse_call_kwargs(kvt)
            if kv.get("kv_connector"):
                c.kv_connector = kv["kv_connector"]
            if kv.get("kv_role"):
                c.kv_role = kv["kv_role"]
            if kv.get("kv_load_failure_policy"):
                c.kv_load_failure_policy = kv["kv_load_failure_policy"]
                c.kv_load_failure_policy_source = "kv_transfer_config"
            extra = value_after(kvt, "kv_connector_extra_config")
            if extra and extra.startswith("{") and extra != "{}":
                ed = parse_dict(extra)
                overrides = {k.split(".", 1)[1]: v for k, v in ed.items() if k.startswith("lmcache.")}
                self.overrides.update(overrides)
                if ed.get("use_native"):
                    c.lmcache_vendored_adapter = True

    def _vllm_from_vendored(self) -> None:
        """The vLLM version from the vendored adapter's line numbers, only when no line prints it."""
        c = self.ctx
        if c.vllm_version is None:
            v, vev = self.fp.infer_vllm()
            if v:
                c.vllm_version = v
                c.vllm_version_source = f"inferred from the line numbers of vLLM's vendored LMCache adapter ({', '.join(vev)})"

    def _tp_size(self) -> None:
        """TP from the config, else LMCache's world_size, else a lower bound from the rank labels seen.

        A rank label TP2 proves TP ≥ 3, not TP = 3: the other ranks' logs may just not be in the inputs.
        """
        c = self.ctx
        if c.tensor_parallel_size is not None:
            c.tensor_parallel_size_source = "config"
        elif self.world_sizes and c.pipeline_parallel_size in (None, 1):
            c.tensor_parallel_size = max(self.world_sizes)
            c.tensor_parallel_size_source = "LMCache world_size"
        elif self.ranks:
            tps = [int(m.group(1)) for r in self.ranks if (m := re.search(r"TP(\d+)", r))]
            if tps:
                # vLLM names a worker ``Worker_TP<t>`` (0.10.2+) / ``VllmWorker TP<t>`` (0.10.1) only when TP > 1
                # (v1/executor/multiproc_executor.py, 0.32.0 :1088-1103): a ``TP0`` suffix already proves TP ≥ 2
                low = max(max(tps) + 1, 2 if self.tp_suffix else 1)
                c.tensor_parallel_size = low
                c.tensor_parallel_size_source = f"rank labels: a lower bound (TP ≥ {low})"

    def _k_fallback(self) -> None:
        """K from the per-position rates when no config line states ``num_speculative_tokens``."""
        k = self.k_from_positions
        spec = self.ctx.speculative
        if k is None or (spec and isinstance(spec.get("num_speculative_tokens"), int)):
            return
        spec = dict(spec or {})
        spec.setdefault("enabled", True)
        spec["num_speculative_tokens"] = k
        spec["num_speculative_tokens_source"] = self.k_source
        self.ctx.speculative = spec

    def finish(self, ctx: Context, run: RunState) -> list:
        """Complete ``ctx`` (the one given at construction) from what was observed; no findings."""
        c = self.ctx
        self._absorb_run(run)
        self._log_year()
        c.ranks_seen = sorted(self.ranks, key=_rank_sort)
        version, evidence, note = self.fp.infer()
        c.lmcache_vendored_adapter = c.lmcache_vendored_adapter or self.fp.vendored
        self._vllm_from_vendored()
        self._lmcache_version(version, evidence, note)
        cfg = self._lmcache_config()
        c.lmcache_config = cfg
        if c.chunk_size is None and cfg and isinstance(cfg.get("chunk_size"), int):
            c.chunk_size = cfg["chunk_size"]
        self._tp_size()
        self._k_fallback()
        self._default_failure_policy()
        return []

    def _absorb_run(self, run: RunState) -> None:
        """What the run state holds and no event delivered here: the scanner's key lines (fingerprinted as
        their events would be), the workers' rank labels and the years the inputs carry."""
        for tid in SCANNED_KEY_LINES:  # the scanner's first lookup row places the build as its event did
            ev = run.first(tid)
            if ev is not None and ev.rec.kind == "lmcache":
                self.fp.observe_record(ev.rec)
        for origin in run.origins:
            if origin.role == "Worker" and origin.rank_label:
                self.ranks.add(origin.rank_label)
                self.tp_suffix = self.tp_suffix or _TP_SUFFIX.search(origin.proc) is not None
        for name, year in run.input_years.items():
            self.observe_input_year(name, year)

    def _lmcache_version(self, version: str | None, evidence: list[str], note: str | None) -> None:
        """The printed LMCache version wins over the line-number fingerprint; the note says only where they
        disagree (a fingerprint that merely predates the release's publication is no disagreement)."""
        c = self.ctx
        if self.lmcache_exact:
            c.lmcache_version = self.lmcache_exact
            c.lmcache_version_evidence = ["'LMCache initialized for role … with version' line", *evidence]
            if version and not version.startswith("~"):
                c.lmcache_version_note = f"line numbers match {version}" if self.lmcache_exact.split("-g")[0] not in version else None
            elif version and not (note and "published" in note and in_span(self.lmcache_exact, version)):
                c.lmcache_version_note = f"line numbers are nearest to {version.lstrip('~')} (no release matches exactly)"
            # else: the lines match the printed release and only predate its publication: the printed version
            # proves the build existed then, so there is nothing to note
        elif version:
            c.lmcache_version, c.lmcache_version_evidence, c.lmcache_version_note = version, evidence, note
        elif note:  # the lines place no release: the version stays unknown, and the note says why
            c.lmcache_version_evidence, c.lmcache_version_note = evidence, note

    def _note_dump(self, d: dict[str, Any]) -> None:
        """An LMCache config dump: kept when it is the first, else compared with the first."""
        if self.first_dump is None:
            self.first_dump = d
        elif not self.dumps_differ:
            self.dumps_differ = _without_instance(d) != _without_instance(self.first_dump)

    def _lmcache_config(self) -> dict[str, Any] | None:
        """LMCache config: the engine dump(s), then kv_connector_extra_config overrides, else the user's file.

        The log's dump is what the engine ran with, so the user's file only fills keys the dump lacks.
        """
        c = self.ctx
        overrides = self.overrides
        if self.first_dump is not None:
            cfg = dict(self.first_dump)
            c.lmcache_config_source = "log (Creating LMCacheEngine with config)"
            c.lmcache_configs_differ = self.dumps_differ
            if self.user_config:
                for k, v in self.user_config.items():
                    cfg.setdefault(k, v)
        elif self.user_config is not None:
            cfg = dict(self.user_config)
            c.lmcache_config_source = f"--lmcache-config {self.user_config_path}"
        else:
            cfg = None
        if overrides:
            cfg = {**(cfg or {}), **overrides}
        return cfg

    def _default_failure_policy(self) -> None:
        """vLLM's default kv_load_failure_policy for its version when no line sets one: the KV rules weigh
        what happens to a failed load by it."""
        c = self.ctx
        if c.kv_load_failure_policy is None:
            d = default_failure_policy(c.vllm_version)
            if d:
                c.kv_load_failure_policy = d
                c.kv_load_failure_policy_source = f"default for vLLM {c.vllm_version}"


def _without_instance(dump: dict[str, Any]) -> dict[str, Any]:
    """A config dump without its ``lmcache_instance_id``, which differs on every rank."""
    return {k: v for k, v in dump.items() if k != "lmcache_instance_id"}


def _schedule(text: str) -> list[list[int]] | str:
    """``num_speculative_tokens_per_batch_size`` as ``[[start, end, K], ...]`` of bounded ints; anything else
    (a flat list, ``inf``, unclosed brackets) stays the raw text, which no rule reads as a schedule."""
    import ast

    try:
        rows = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    if not isinstance(rows, (list, tuple)) or not rows or len(rows) > 4096:
        return text
    out = []
    for row in rows:
        if not isinstance(row, (list, tuple)) or len(row) != 3:
            return text
        vals = [finite_or_none(x) for x in row]
        if not all(isinstance(x, int) and 0 <= x < 1 << 31 for x in vals):
            return text
        out.append(vals)
    return out


def _clean_spec_numbers(spec: dict[str, Any]) -> None:
    """K must be a bounded integer (``inf``/``nan``/5,000 digits are a damaged dump: drop it, keep the rest)."""
    if "num_speculative_tokens" in spec:
        k = finite_or_none(spec["num_speculative_tokens"])
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        if isinstance(k, int) and 0 <= k <= MAX_SPEC_TOKENS:
            spec["num_speculative_tokens"] = k
        else:
            spec.pop("num_speculative_tokens")


def _rank_sort(label: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", label))


def load_lmcache_yaml(path: str) -> dict[str, Any]:
    """Read an LMCache YAML config (``yaml.safe_load``); raises ValueError with a one-line reason."""
    return read_mapping(path, "LMCache keys")


__all__ = ["Context", "ContextBuilder", "default_failure_policy", "load_lmcache_yaml"]
