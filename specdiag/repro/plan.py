"""Plans: which settings each cell of an experiment uses.

A plan is a *base* (settings shared by every cell), *toggles* (settings whose values are crossed into a
matrix) and a *workload* (the client that provokes the symptom). Presets are named plans; ``--toggle`` and
``--set`` adjust them; a YAML file can describe the same thing. Settings are plain strings until
``materialise`` turns them into flags and YAML, so a plan prints and compares exactly as the user typed it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------------------------- settings
#: every setting a cell understands, with its default and what it changes. Keys with a dot prefix
#: (``lmcache.<key>``, ``vllm.<flag>``, ``env.<NAME>``) pass straight through for anything not listed.
SETTINGS: dict[str, tuple[str, str]] = {
    "lmcache": ("on", "on|off: attach LMCacheConnectorV1 (off = plain vLLM)"),
    "chunk_size": ("256", "LMCache chunk_size (tokens)"),
    "local_cpu": ("true", "LMCache local_cpu tier"),
    "max_local_cpu_size": ("1.0", "LMCache max_local_cpu_size (GB)"),
    "save_decode_cache": ("false", "LMCache save_decode_cache"),
    "async_loading": ("false", "LMCache enable_async_loading"),
    "pin_timeout_sec": ("default", "LMCache pin_timeout_sec (default = LMCache's own, 300 s)"),
    "redis_maxmemory": ("off", "off, or a Redis maxmemory (e.g. 4mb): start Redis and use it as remote_url"),
    "redis_policy": ("allkeys-lru", "Redis maxmemory-policy"),
    "spec": ("off", "off|ngram|draft_model (draft_model uses the target model as its own draft)"),
    "num_speculative_tokens": ("3", "K, the maximum number of draft tokens"),
    "dynamic_k": ("off", "off, on (= [[1,1,K],[2,256,0]]) or an explicit JSON schedule"),
    "prefix_caching": ("off", "vLLM prefix caching (off forces every reuse through LMCache)"),
    "kv_load_failure_policy": ("default", "default|fail|recompute (vLLM kv-transfer policy)"),
    "num_gpu_blocks": ("off", "off or N: --num-gpu-blocks-override (KV-block pressure)"),
    "enforce_eager": ("true", "--enforce-eager (fast start; one numeric mode per experiment)"),
    "tp": ("1", "tensor-parallel size (GPUs per cell)"),
    "max_model_len": ("4096", "--max-model-len"),
}
PASSTHROUGH_PREFIXES = ("lmcache.", "vllm.", "env.")

TRUE_WORDS = {"true", "on", "yes", "1"}
FALSE_WORDS = {"false", "off", "no", "0"}


class PlanError(ValueError):
    """A plan the user wrote cannot be understood; the message says which part and why."""


# --------------------------------------------------------------------------------------------- schema limits
#: a plan is a few dozen settings: anything far larger is a mistake or an attack (billion laughs)
MAX_PLAN_BYTES = 256 * 1024
MAX_TOGGLES = 16
MAX_VALUES = 64
MAX_CELLS = 512
MAX_REPEAT = 1000
MAX_TEXT = 4096
MAX_LIST = 4096
SCALARS = (str, int, float, bool, type(None))


def _scalar(value: Any, where: str) -> Any:
    """A YAML scalar of bounded size; a list, mapping or object is an error naming ``where``."""
    if isinstance(value, float) and value != value:
        raise PlanError(f"{where}: nan is not a value")
    if not isinstance(value, SCALARS):
        raise PlanError(f"{where}: expected a single value, got a {type(value).__name__}")
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise PlanError(f"{where}: value longer than {MAX_TEXT} characters")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        raise PlanError(f"{where}: number out of range")
    return value


def _schedule(value: Any, where: str) -> str:
    """``dynamic_k`` given as a YAML list: ``[[start, end, K], ...]`` of small integers, stored as JSON."""
    import json

    if (not isinstance(value, list) or not value or len(value) > MAX_LIST
            or not all(isinstance(r, list) and len(r) == 3 for r in value)):
        raise PlanError(f"{where}: a schedule is a list of [start, end, K] triples")
    for row in value:
        for x in row:
            if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 1 << 31:
                raise PlanError(f"{where}: schedule entries must be non-negative integers, got {x!r}")
    return json.dumps(value)


def _setting_value(key: str, value: Any, where: str) -> str:
    if key == "dynamic_k" and isinstance(value, list):
        return _schedule(value, where)
    return normalise_value(_scalar(value, where))


def _mapping(value: Any, where: str, limit: int = MAX_LIST) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PlanError(f"{where}: expected a mapping (key: value), got {type(value).__name__}")
    if len(value) > limit:
        raise PlanError(f"{where}: more than {limit} entries")
    return value


def _load_yaml(text: str | bytes) -> Any:
    """``yaml.safe_load`` without aliases (a 473-byte plan of nested aliases expands to gigabytes), size-bounded,
    every YAML error as one line."""
    import yaml

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PlanError(f"plan file: not UTF-8 text (byte {e.start})") from None
    if len(text) > MAX_PLAN_BYTES:
        raise PlanError(f"plan file: larger than {MAX_PLAN_BYTES // 1024} KiB")

    class _NoAliases(yaml.SafeLoader):
        def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
            if self.check_event(yaml.AliasEvent):
                raise PlanError("plan file: YAML aliases (*name) are not supported in plans")
            return super().compose_node(parent, index)

    try:
        return yaml.load(text, Loader=_NoAliases)  # noqa: S506 - a SafeLoader subclass
    except PlanError:
        raise
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as e:  # ValueError: a 5,000-digit integer
        first = " ".join(str(e).split())[:200]
        raise PlanError(f"plan file: not a valid plan ({first})") from None


def as_bool(value: str, key: str) -> bool:
    v = str(value).strip().lower()
    if v in TRUE_WORDS:
        return True
    if v in FALSE_WORDS:
        return False
    raise PlanError(f"{key}: expected true/false (or on/off), got {value!r}")


def normalise_value(value: Any) -> str:
    """YAML gives bools/ints/floats; the command line gives strings. Store one spelling."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "default"
    return str(value).strip()


def check_key(key: str) -> str:
    key = key.strip()
    if len(key) > 200:
        raise PlanError("a setting name longer than 200 characters")
    if key in SETTINGS or (key.startswith(PASSTHROUGH_PREFIXES) and len(key.split(".", 1)[1]) > 0):
        return key
    known = ", ".join(sorted(SETTINGS))
    raise PlanError(f"unknown setting {key!r}; known: {known}; or lmcache.<key>, vllm.<flag>, env.<NAME>")


# --------------------------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class WorkloadSpec:
    """Which client to run against each cell and its parameters (see ``workload.py``)."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "params": dict(self.params)}


WORKLOAD_KINDS = ("multi_turn", "alternating_batch", "distinct_prefixes", "pin_window")


# --------------------------------------------------------------------------------------------- calibration
#: how a calibrated workload parameter is named in the words a run prints ("320 prompts, reuse 4")
SIZE_WORDS = {"prompts": "prompts", "repeats_back_to_back": "reuse", "prompt_words": "words per prompt",
              "rounds": "rounds", "conversations": "conversations", "turns": "turns", "iterations": "iterations"}


@dataclass(frozen=True)
class Calibration:
    """How a preset sizes its workload before the matrix (``calibrate.py`` runs it).

    A preset whose symptom sits at a capacity edge (a 4 MB Redis, a 16-chunk CPU tier) cannot know in
    advance how much traffic its smallest cell needs before LMCache attempts enough loads to show a
    shortfall; fixed sizes left such cells with a 0-1 % hit rate and every comparison undecided. So the
    base cell (the first value of every toggle) runs first at the preset's own sizes, then at larger ones
    (each step multiplies every ``grow`` parameter by its factor, never past its ``limits`` value), until
    its ``exposure`` count reaches ``threshold``, the sizes stop changing, ``max_steps`` ran or
    ``budget_minutes`` have passed; the matrix then runs with the sizes of the last step.
    """

    #: workload parameter → factor per step (2 doubles it; 0.5 halves it, e.g. a shorter prompt fits more)
    grow: dict[str, float]
    #: workload parameter → the value no step goes past: a maximum for a factor > 1, a minimum for < 1
    limits: dict[str, int]
    #: the count in ``evidence.exposure`` that must reach ``threshold`` in the base cell
    exposure: str = "loads_attempted"
    #: 50 loads: a run of 50 shows at least one shortfall with probability 64 % if 2 % of loads come up
    #: short (92 % at 5 %), so per-run presence (what Fisher's test counts) means something for a rare loss
    threshold: int = 50
    #: sizes tried at most, the preset's own included
    max_steps: int = 4
    #: no further step starts after this many minutes of calibration (a started step is never cut)
    budget_minutes: float = 20.0

    def ladder(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The workload parameters of every step calibration may try, the preset's own first; it ends
        early when no parameter can move further. A ``grow`` key the workload lacks is not grown."""
        steps = [dict(params)]
        while len(steps) < self.max_steps:
            last = steps[-1]
            nxt = dict(last)
            for key, factor in self.grow.items():
                if isinstance(last.get(key), int) and not isinstance(last.get(key), bool):
                    nxt[key] = _grown(last[key], factor, self.limits.get(key))
            if nxt == last:
                break
            steps.append(nxt)
        return steps

    def sizes(self, params: dict[str, Any]) -> dict[str, Any]:
        """The calibrated parameters only (what the words and the record show)."""
        return {k: params[k] for k in self.grow if k in params}

    def to_dict(self) -> dict[str, Any]:
        return {"exposure": self.exposure, "threshold": self.threshold, "grow": dict(self.grow),
                "limits": dict(self.limits), "max_steps": self.max_steps, "budget_minutes": self.budget_minutes}


def _grown(value: int, factor: float, limit: int | None) -> int:
    """One step of one parameter: multiplied, moved by at least 1, clamped at its limit (never past it)."""
    if factor > 1:
        nxt = max(value + 1, round(value * factor))
        return nxt if limit is None else max(value, min(nxt, limit))
    if factor < 1:
        nxt = max(1, min(value - 1, round(value * factor)))
        return nxt if limit is None else min(value, max(nxt, limit))
    return value


def size_words(sizes: dict[str, Any]) -> str:
    """``{"prompts": 320, "repeats_back_to_back": 4}`` → ``320 prompts, reuse 4``."""
    parts = []
    for k, v in sizes.items():
        word = SIZE_WORDS.get(k, k)
        parts.append(f"{v} {word}" if word in ("prompts", "rounds", "conversations", "turns", "iterations")
                     else f"{word} {v}")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------- presets
@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    base: dict[str, str]
    toggles: dict[str, list[str]]
    workload: WorkloadSpec
    #: toggle → the cause id (``specdiag/analyzers/causes.py``) whose mechanism a symptom that follows it shows
    causes: dict[str, str] = field(default_factory=dict)
    #: toggle → the values whose cells must really evict (else the cell tested nothing about eviction)
    must_evict: dict[str, list[str]] = field(default_factory=dict)
    #: size the workload on the base cell before the matrix (None: the workload's sizes are used as given)
    calibration: Calibration | None = None


PRESETS: dict[str, Preset] = {
    "save-decode-cache": Preset(
        name="save-decode-cache",
        description=(
            "save_decode_cache x speculative decoding (ngram) on/off; multi-turn conversations whose next "
            "prompt contains the previous generated tokens, so decode-phase chunks are what gets reused"
        ),
        base={"max_local_cpu_size": "0.05"},
        toggles={"save_decode_cache": ["false", "true"], "spec": ["off", "ngram"]},
        workload=WorkloadSpec(
            "multi_turn",
            {"conversations": 6, "turns": 5, "concurrency": 3, "prefix_words": 300, "turn_words": 40,
             "max_tokens": 96},
        ),
        causes={"save_decode_cache": "lookup-retrieve-eviction"},
    ),
    "dynamic-k": Preset(
        name="dynamic-k",
        description=(
            "dynamic K (num_speculative_tokens_per_batch_size with K=0 at batch >= 2) vs fixed K, draft_model "
            "with the target as its own draft (healthy acceptance ~100%); batch sizes alternate 1 and 2 and "
            "acceptance is measured per phase from /metrics. No LMCache: LMCache 0.5.6 miscounts "
            "draft_model layers and crashes at the first store"
        ),
        base={"lmcache": "off", "spec": "draft_model", "prefix_caching": "on"},
        toggles={"dynamic_k": ["off", "on"]},
        workload=WorkloadSpec(
            "alternating_batch",
            {"phases": [1, 2, 1, 2, 1], "prompt_words": 200, "max_tokens": 64},
        ),
        causes={"dynamic_k": "stale-draft-kv"},
    ),
    "eviction": Preset(
        name="eviction",
        description=(
            "local CPU tier pressure: a tiny max_local_cpu_size vs a large one, more distinct long prefixes "
            "than fit, each reused right after it was stored"
        ),
        base={},
        toggles={"max_local_cpu_size": ["0.004", "1.0"]},
        workload=WorkloadSpec(
            "distinct_prefixes",
            {"prompts": 16, "prompt_words": 560, "repeats_back_to_back": 2, "rounds": 2, "concurrency": 4,
             "max_tokens": 8},
        ),
        causes={"max_local_cpu_size": "lookup-retrieve-eviction"}, must_evict={"max_local_cpu_size": ["0.004"]},
        # the prompt length stays: 4 concurrent prompts of 4 chunks are the 16-chunk tier's edge
        calibration=Calibration(grow={"prompts": 2, "repeats_back_to_back": 2},
                                limits={"prompts": 64, "repeats_back_to_back": 8}),
    ),
    "remote-eviction": Preset(
        name="remote-eviction",
        description=(
            "LMCache with a remote Redis started by specdiag on 127.0.0.1 (tiny maxmemory, LRU) and no local "
            "CPU tier: remote backends cannot pin, so chunks can vanish between lookup and retrieve; a large "
            "Redis is the control, save_decode_cache the suspect"
        ),
        base={"local_cpu": "false", "max_local_cpu_size": "0.5", "lmcache.remote_serde": "naive"},
        toggles={"redis_maxmemory": ["4mb", "1gb"], "save_decode_cache": ["false", "true"]},
        workload=WorkloadSpec(
            "distinct_prefixes",
            {"prompts": 16, "prompt_words": 560, "repeats_back_to_back": 2, "rounds": 2, "concurrency": 4,
             "max_tokens": 8},
        ),
        causes={"redis_maxmemory": "remote-backend-loss", "save_decode_cache": "remote-backend-loss"},
        must_evict={"redis_maxmemory": ["4mb"]},
        # shorter prompts (2 chunks, not 4) let a reuse find its chunks in a 4 MB Redis; more of them keep
        # it evicting (the must_evict condition)
        calibration=Calibration(grow={"prompts": 2, "repeats_back_to_back": 2, "prompt_words": 0.5},
                                limits={"prompts": 64, "repeats_back_to_back": 8, "prompt_words": 280}),
    ),
    "pin-timeout": Preset(
        name="pin-timeout",
        description=(
            "a request held between its lookup and its retrieve by KV-block pressure (36 blocks) while "
            "another request decodes; tiny local CPU tier (4 chunks), pin_timeout_sec 1: with "
            "save_decode_cache the decode-phase stores evict the force-unpinned chunks"
        ),
        base={"max_local_cpu_size": "0.001", "pin_timeout_sec": "1", "num_gpu_blocks": "36"},
        toggles={"save_decode_cache": ["false", "true"]},
        workload=WorkloadSpec(
            "pin_window",
            {"iterations": 4, "p_words": 560, "a_words": 1750, "b_words": 50, "a_max_tokens": 500,
             "b_max_tokens": 500, "p_max_tokens": 8, "delay_s": 0.2},
        ),
        causes={"save_decode_cache": "pin-timeout", "pin_timeout_sec": "pin-timeout"},
    ),
}


# --------------------------------------------------------------------------------------------- plan + cells
@dataclass(frozen=True)
class Cell:
    """One combination of toggle values; ``settings`` is the full, merged set the cell runs with."""

    index: int
    toggled: dict[str, str]
    settings: dict[str, str]

    @property
    def name(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.toggled.items()) or "base"

    @property
    def slug(self) -> str:
        safe = "".join(c if c.isalnum() or c in "._=-" else "_" for c in self.name.replace(",", "__"))
        return f"c{self.index:02d}-{safe}"[:120]


@dataclass
class Plan:
    name: str
    base: dict[str, str]
    toggles: dict[str, list[str]]
    workload: WorkloadSpec
    repeat: int = 1
    description: str = ""
    causes: dict[str, str] = field(default_factory=dict)
    must_evict: dict[str, list[str]] = field(default_factory=dict)
    calibration: Calibration | None = None
    #: what calibration did (``calibrate.run_calibration``): written to plan.json in place of the plan of it
    calibrated: dict[str, Any] | None = None

    def calibration_dict(self) -> dict[str, Any] | None:
        """The calibration as plan.json records it: what was done once it ran, else what would be tried
        (its settings, the base cell and the sizes of each step) with ``result`` null."""
        if self.calibrated is not None:
            return self.calibrated
        if self.calibration is None:
            return None
        cal = self.calibration
        return {**cal.to_dict(), "base_cell": self.cells()[0].name,
                "ladder": [cal.sizes(p) for p in cal.ladder(self.workload.params)], "result": None}

    def cells(self) -> list[Cell]:
        """The matrix: every combination of toggle values, first toggle varying slowest."""
        keys = list(self.toggles)
        merged_base = {k: v for k, (v, _) in SETTINGS.items()}
        merged_base.update(self.base)
        out: list[Cell] = []
        for i, combo in enumerate(itertools.product(*(self.toggles[k] for k in keys))):
            toggled = dict(zip(keys, combo, strict=True))
            settings = dict(merged_base)
            settings.update(toggled)
            out.append(Cell(index=i, toggled=toggled, settings=settings))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "base": dict(self.base),
            "toggles": {k: list(v) for k, v in self.toggles.items()},
            "workload": self.workload.to_dict(),
            "repeat": self.repeat,
            "causes": dict(self.causes),
            "must_evict": {k: list(v) for k, v in self.must_evict.items()},
        } | ({"calibration": cal} if (cal := self.calibration_dict()) is not None else {})


def parse_assignment(text: str) -> tuple[str, list[str]]:
    """``key=v1,v2`` → (key, [v1, v2]). A JSON value (``dynamic_k=[[1,1,3],[2,8,0]]``) stays whole."""
    if "=" not in text:
        raise PlanError(f"expected key=value[,value...], got {text!r}")
    key, _, raw = text.partition("=")
    key = check_key(key)
    raw = raw.strip()
    if not raw:
        raise PlanError(f"{key}: no value given")
    if len(raw) > MAX_TEXT:
        raise PlanError(f"{key}: value longer than {MAX_TEXT} characters")
    if raw.startswith(("[", "{")):
        import json

        try:
            json.loads(raw)
        except ValueError as e:
            raise PlanError(f"{key}: {raw[:40]!r} is not valid JSON ({e.msg})") from None
    values = [raw] if raw.startswith(("[", "{")) else [v.strip() for v in raw.split(",")]
    if len(values) > MAX_VALUES:
        raise PlanError(f"{key}: more than {MAX_VALUES} values")
    if any(not v for v in values):
        raise PlanError(f"{key}: empty value in {raw!r}")
    if len(set(values)) != len(values):
        raise PlanError(f"{key}: duplicate values in {raw!r}")
    return key, values


def _workload_from(data: Any, where: str) -> WorkloadSpec:
    if not isinstance(data, dict) or "kind" not in data:
        raise PlanError(f"{where}: workload must be a mapping with 'kind' (one of {', '.join(WORKLOAD_KINDS)})")
    kind = str(data["kind"])
    if kind not in WORKLOAD_KINDS:
        raise PlanError(f"{where}: unknown workload kind {kind!r} (one of {', '.join(WORKLOAD_KINDS)})")
    params = data.get("params", {k: v for k, v in data.items() if k != "kind"})
    if not isinstance(params, dict):
        raise PlanError(f"{where}: workload params must be a mapping")
    for k, v in _mapping(params, f"{where}: workload params", 64).items():
        if isinstance(v, list):
            if len(v) > MAX_LIST:
                raise PlanError(f"{where}: workload {k}: more than {MAX_LIST} entries")
            for x in v:
                _scalar(x, f"{where}: workload {k}")
        else:
            _scalar(v, f"{where}: workload {k}")
    return WorkloadSpec(kind, dict(params))


@dataclass
class _PlanDraft:
    """The plan as it is being assembled: each source (preset, plan file, command line) edits it in turn."""

    name: str = "custom"
    description: str = ""
    base: dict[str, str] = field(default_factory=dict)
    toggles: dict[str, list[str]] = field(default_factory=dict)
    workload: WorkloadSpec = field(
        default_factory=lambda: WorkloadSpec("distinct_prefixes", dict(PRESETS["eviction"].workload.params)))
    repeat: int = 1
    causes: dict[str, str] = field(default_factory=dict)
    must_evict: dict[str, list[str]] = field(default_factory=dict)
    calibration: Calibration | None = None


def _apply_preset(draft: _PlanDraft, pname: str) -> None:
    """Lay a preset over the draft: its name, description and workload replace, its base and toggles merge."""
    if pname not in PRESETS:
        raise PlanError(f"unknown preset {pname!r}; presets: {', '.join(PRESETS)}")
    p = PRESETS[pname]
    draft.name, draft.description, draft.workload = p.name, p.description, p.workload
    draft.calibration = p.calibration
    draft.causes.update(p.causes)
    draft.must_evict.update({k: list(v) for k, v in p.must_evict.items()})
    draft.base.update(p.base)
    draft.toggles.update({k: list(v) for k, v in p.toggles.items()})


def _plan_file_toggles(draft: _PlanDraft, data: dict[Any, Any]) -> None:
    """The plan file's ``toggles``: each key replaces the draft's toggle. A bare ``dynamic_k`` list of
    integers is one value, not a list of values."""
    for k, vs in _mapping(data.get("toggles"), "plan file: toggles", MAX_TOGGLES).items():
        key = check_key(str(_scalar(k, "plan file: toggles key")))
        vals = vs if isinstance(vs, list) and not (key == "dynamic_k" and vs and isinstance(vs[0], int)) else [vs]
        if not vals:
            raise PlanError(f"plan file: toggle {key!r} has no values")
        if len(vals) > MAX_VALUES:
            raise PlanError(f"plan file: toggle {key!r} has more than {MAX_VALUES} values")
        draft.toggles[key] = [_setting_value(key, v, f"plan file: toggles.{key}") for v in vals]


def _apply_plan_file(draft: _PlanDraft, plan_yaml: str | bytes) -> None:
    """Lay a YAML plan file over the draft; its own ``preset:`` is applied first, then its other keys."""
    data = _load_yaml(plan_yaml)
    if not isinstance(data, dict):
        raise PlanError("plan file: expected a mapping at the top level")
    unknown = {str(k) for k in data} - {"preset", "name", "description", "base", "set", "toggles", "workload",
                                        "repeat"}
    if unknown:
        raise PlanError(f"plan file: unknown top-level keys {sorted(unknown)}")
    if data.get("preset"):
        _apply_preset(draft, str(_scalar(data["preset"], "plan file: preset")))
    draft.name = str(_scalar(data.get("name", draft.name), "plan file: name"))
    draft.description = str(_scalar(data.get("description", draft.description), "plan file: description"))
    for section in ("base", "set"):
        for k, v in _mapping(data.get(section), f"plan file: {section}").items():
            key = check_key(str(_scalar(k, f"plan file: {section} key")))
            draft.base[key] = _setting_value(key, v, f"plan file: {section}.{key}")
    _plan_file_toggles(draft, data)
    if "workload" in data:  # sizes written out by the user are taken as given, never calibrated
        draft.workload = _workload_from(data["workload"], "plan file")
        draft.calibration = None
    if "repeat" in data:
        r = data["repeat"]
        if isinstance(r, bool) or not isinstance(r, int):
            raise PlanError(f"plan file: repeat must be a whole number, got {r!r}")
        draft.repeat = r


def _apply_command_line(draft: _PlanDraft, sets: list[str] | None, toggles: list[str] | None,
                        repeat: int | None) -> None:
    """``--set`` pins a key (dropping its toggle), then ``--toggle`` crosses one (dropping its base value)."""
    for s in sets or []:
        k, vs = parse_assignment(s)
        if len(vs) != 1:
            raise PlanError(f"--set {k}: one value only (use --toggle for several)")
        draft.base[k] = vs[0]
        draft.toggles.pop(k, None)
    for t in toggles or []:
        k, vs = parse_assignment(t)
        draft.toggles[k] = vs
        draft.base.pop(k, None)
    if repeat is not None:
        draft.repeat = repeat


def _check_plan_limits(draft: _PlanDraft) -> None:
    """Refuse a plan too large to run: repeats, toggle count and matrix size are all bounded."""
    if draft.repeat < 1 or draft.repeat > MAX_REPEAT:
        raise PlanError(f"repeat must be between 1 and {MAX_REPEAT}")
    if len(draft.toggles) > MAX_TOGGLES:
        raise PlanError(f"at most {MAX_TOGGLES} toggles")
    cells = 1
    for vs in draft.toggles.values():
        cells *= len(vs)
    if cells > MAX_CELLS:
        raise PlanError(f"the matrix has {cells} cells; at most {MAX_CELLS} (fewer toggles or values)")


def build_plan(
    preset: str | None = None,
    toggles: list[str] | None = None,
    sets: list[str] | None = None,
    plan_yaml: str | bytes | None = None,
    repeat: int | None = None,
    calibrate: bool | None = None,
) -> Plan:
    """Combine a preset, a YAML plan file's text and command-line toggles (applied in that order).

    A later source replaces a toggle key entirely (``--toggle max_local_cpu_size=0.5,20`` on top of the
    ``eviction`` preset runs exactly those two sizes). ``calibrate``: None keeps the preset's calibration
    (if it declares one), False drops it, True insists on one.
    """
    draft = _PlanDraft()
    if preset:
        _apply_preset(draft, preset)
    if plan_yaml is not None:
        _apply_plan_file(draft, plan_yaml)
    _apply_command_line(draft, sets, toggles, repeat)
    _check_plan_limits(draft)
    if not preset and plan_yaml is None and not toggles and not sets:
        raise PlanError("nothing to run: give --preset, --plan FILE or --toggle key=v1,v2")
    if calibrate and draft.calibration is None:
        with_cal = ", ".join(n for n, p in PRESETS.items() if p.calibration)
        raise PlanError(f"--calibrate: this plan declares no calibration (presets that do: {with_cal}; a plan "
                        "file's own workload is never calibrated)")
    return Plan(name=draft.name, base=draft.base, toggles=draft.toggles, workload=draft.workload,
                repeat=draft.repeat, description=draft.description, causes=draft.causes,
                must_evict=draft.must_evict, calibration=None if calibrate is False else draft.calibration)


def check_plan_dict(data: Any, where: str) -> dict[str, Any]:
    """A ``plan.json`` read back (``--from-run``): the shape ``Plan.to_dict`` writes, else one PlanError."""
    if not isinstance(data, dict):
        raise PlanError(f"{where}: expected a JSON object, got {type(data).__name__}")
    for key, kind in (("name", str), ("base", dict), ("toggles", dict), ("workload", dict)):
        if key in data and not isinstance(data[key], kind):
            raise PlanError(f"{where}: {key!r} must be a {kind.__name__}")
    for k, vs in (data.get("toggles") or {}).items():
        if not isinstance(vs, list) or not all(isinstance(v, SCALARS) for v in vs):
            raise PlanError(f"{where}: toggle {k!r} must be a list of values")
    if data.get("calibration") is not None and not isinstance(data["calibration"], dict):
        raise PlanError(f"{where}: 'calibration' must be an object")
    return data
