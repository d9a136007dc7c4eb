"""What separates the deployments a rule fired on from the others — stated with counts, not a score.

Attributes come from each deployment's context (versions, TP, model, connector, speculative method, every
scalar LMCache config key). For each rule with findings at ``warning`` or above, each attribute value is
counted among the affected deployments (``a`` of ``A``) and among the others (``b`` of ``U``); a value held
by all affected and none of the others separates them perfectly. Values that every deployment shares, or
that are unique to each one (instance ids), say nothing and are skipped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

SKIP_KEYS = {"lmcache_instance_id", "instance_id", "lmcache_worker_id", "engine_id"}
MAX_VALUE_LEN = 80


def attributes(context: dict[str, Any] | None) -> dict[str, str]:
    """The comparable facts of one deployment, as ``name → value`` strings."""
    c = context or {}
    out: dict[str, str] = {}
    for key in ("vllm_version", "lmcache_version", "tensor_parallel_size", "pipeline_parallel_size", "model",
                "kv_connector", "kv_role", "kv_load_failure_policy", "device", "prefix_caching"):
        if c.get(key) is not None:
            out[key] = str(c[key])
    spec = c.get("speculative") or {}
    if isinstance(spec, dict):
        for key in ("method", "num_speculative_tokens"):
            if spec.get(key) is not None:
                out[f"speculative.{key}"] = str(spec[key])
    cfg = c.get("lmcache_config") or {}
    if isinstance(cfg, dict):
        for key, v in cfg.items():
            if key in SKIP_KEYS or isinstance(v, (dict, list)) or v is None:
                continue
            text = str(v)
            if len(text) <= MAX_VALUE_LEN:
                out[f"lmcache.{key}"] = text
    return out


@dataclass(frozen=True)
class Separator:
    rule: str
    attribute: str
    value: str
    affected_with: int
    affected: int
    others_with: int
    others: int

    @property
    def perfect(self) -> bool:
        return self.affected_with == self.affected and self.others_with == 0

    @property
    def score(self) -> float:
        return self.affected_with / self.affected - (self.others_with / self.others if self.others else 0.0)

    def sentence(self) -> str:
        noun = "deployment" if self.affected == 1 else "deployments"
        head = (f"all {self.affected} {noun} with {self.rule}" if self.affected_with == self.affected
                else f"{self.affected_with} of the {self.affected} {noun} with {self.rule}")
        verb = "has" if self.affected == 1 and self.affected_with == 1 else "have"
        tail = (f"none of the {self.others} others" if self.others_with == 0
                else f"{self.others_with} of the {self.others} others")
        return f"{head} {verb} {self.attribute} = {self.value}; {tail} {'does' if self.others_with == 0 else 'do'}"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "attribute": self.attribute, "value": self.value,
                "affected_with": self.affected_with, "affected": self.affected,
                "others_with": self.others_with, "others": self.others, "perfect": self.perfect,
                "statement": self.sentence()}


def contrast(attrs: dict[str, dict[str, str]], affected_by_rule: dict[str, set[str]], top: int = 3) -> list[Separator]:
    """The best separators per rule (perfect ones first), at most ``top`` per rule."""
    ids = list(attrs)
    out: list[Separator] = []
    for rule, affected in sorted(affected_by_rule.items()):
        affected = affected & set(ids)
        others = [d for d in ids if d not in affected]
        if not affected or not others:
            continue
        found = []
        for name, counts in _value_counts(attrs, ids).items():
            for value in counts:
                a = sum(1 for d in affected if attrs[d].get(name) == value)
                b = sum(1 for d in others if attrs[d].get(name) == value)
                if a == 0:
                    continue
                found.append(Separator(rule, name, value, a, len(affected), b, len(others)))
        found = [s for s in found if s.perfect or (s.affected_with >= 0.75 * s.affected and s.others_with <= 0.1 * s.others)]
        found.sort(key=lambda s: (not s.perfect, -s.score, s.attribute, s.value))
        out.extend(found[:top])
    return out


def _value_counts(attrs: dict[str, dict[str, str]], ids: list[str]) -> dict[str, Counter]:
    """Per attribute, how often each value occurs; attributes that cannot discriminate are left out."""
    names = {n for d in ids for n in attrs[d]}
    out: dict[str, Counter] = {}
    for name in sorted(names):
        counts = Counter(attrs[d][name] for d in ids if name in attrs[d])
        if len(counts) <= 1 and sum(counts.values()) == len(ids):
            continue  # shared by all
        if len(counts) == len(ids) and len(ids) > 2:
            continue  # unique per deployment
        out[name] = counts
    return out


def majority_differences(attrs: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Per deployment, the attributes whose value differs from the fleet's most common value.

    An attribute a deployment's logs do not show is not a difference (its logs may simply lack the dump).
    """
    ids = list(attrs)
    mode: dict[str, str] = {}
    for name in {n for d in ids for n in attrs[d]}:
        counts = Counter(attrs[d].get(name, "(unset)") for d in ids)
        value, n = counts.most_common(1)[0]
        if n > len(ids) / 2:
            mode[name] = value
    return {d: {n: attrs[d][n] for n in sorted(mode) if n in attrs[d] and attrs[d][n] != mode[n]} for d in ids}
