"""What separates the deployments a rule fired on from the others — stated with counts and an exact test.

Attributes come from each deployment's context (versions, TP, model, connector, speculative method, every
scalar LMCache config key). For each rule with findings at ``warning`` or above, every attribute value is
a 2×2 table over the deployments whose logs show that attribute: with / without the value × with / without
the finding. Fisher's exact test (``specdiag.stats``) gives its two-sided p-value; contrasts are ranked by
p, then by the difference of the two rates, and at most ``TOP_PER_RULE`` are shown per rule.

A fleet with one affected deployment cannot say what the affected deployments share: every value unique
to that deployment "separates" it, all with the same p (1/N for N deployments, below 0.05 from N = 21 on),
so a list of them names the deployment, not a cause. Two affected deployments have the same problem
(everything one rollout changed on both ties). Below ``MIN_AFFECTED`` deployments no contrast is drawn
and the report says so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from specdiag.stats import ALPHA, Rate, describe_p, fisher_exact, wilson

SKIP_KEYS = {"lmcache_instance_id", "instance_id", "lmcache_worker_id", "engine_id"}
MAX_VALUE_LEN = 80
#: the fewest affected deployments a contrast may rest on (see the module docstring)
MIN_AFFECTED = 3
#: contrasts stated per rule; the rest are counted as left out
TOP_PER_RULE = 3
METHOD = {"test": "Fisher's exact test, two-sided", "alpha": ALPHA, "min_affected": MIN_AFFECTED,
          "top_per_rule": TOP_PER_RULE}


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
    """One attribute value's 2×2 table for one rule, over the deployments whose logs show the attribute.

    ``affected_with`` of the ``affected`` deployments with the finding hold the value, ``others_with`` of
    the ``others`` (both counts of every analysed deployment, as the report has always given them); the
    ``*_not_shown`` of each group have logs that do not show the attribute and are left out of the table:
    a missing config dump is not another value.
    """

    rule: str
    attribute: str
    value: str
    affected_with: int
    affected: int
    others_with: int
    others: int
    affected_not_shown: int = 0
    others_not_shown: int = 0
    #: other ``(attribute, value)`` pairs held by exactly the same deployments: the fleet cannot tell them apart
    same_deployments: tuple[tuple[str, str], ...] = ()

    @property
    def perfect(self) -> bool:
        return self.affected_with == self.affected and self.others_with == 0

    @property
    def with_value(self) -> Rate:
        """The finding's rate among the deployments that hold the value."""
        return wilson(self.affected_with, self.affected_with + self.others_with)

    @property
    def without_value(self) -> Rate:
        """The finding's rate among the deployments that show another value."""
        return wilson(self._affected_shown - self.affected_with,
                      self._affected_shown + self._others_shown - self.affected_with - self.others_with)

    @property
    def _affected_shown(self) -> int:
        return self.affected - self.affected_not_shown

    @property
    def _others_shown(self) -> int:
        return self.others - self.others_not_shown

    @cached_property
    def p_value(self) -> float:
        a, b = self.affected_with, self.others_with
        return fisher_exact(a, b, self._affected_shown - a, self._others_shown - b)

    @property
    def decisive(self) -> bool:
        return self.p_value < ALPHA

    @property
    def effect(self) -> float:
        """How much more often the finding occurs with the value than without (a difference of rates)."""
        return (self.with_value.value or 0.0) - (self.without_value.value or 0.0)

    def rank_key(self) -> tuple[float, float, str, str]:
        return (self.p_value, -self.effect, self.attribute, self.value)

    def sentence(self) -> str:
        """``KV002 in 5/6 = … of deployments with X = v, in 0/16 = … without (p < 0.001)``."""
        verdict = describe_p(self.p_value) + ("" if self.decisive else ", not significant")
        text = (f"{self.rule} in {self.with_value.describe()} of deployments with {self.attribute} = {self.value}, "
                f"in {self.without_value.describe()} without ({verdict})")
        if self.same_deployments:
            same = ", ".join(f"{n} = {v}" for n, v in self.same_deployments)
            text += f"; the same deployments have {same}, which this fleet cannot tell apart from it"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "attribute": self.attribute, "value": self.value,
                "affected_with": self.affected_with, "affected": self.affected,
                "others_with": self.others_with, "others": self.others,
                "not_shown": {"affected": self.affected_not_shown, "others": self.others_not_shown},
                "perfect": self.perfect, "with_value": _rate_dict(self.with_value),
                "without_value": _rate_dict(self.without_value), "p_value": self.p_value,
                "decisive": self.decisive,
                "same_deployments": [{"attribute": n, "value": v} for n, v in self.same_deployments],
                "statement": self.sentence()}


def _rate_dict(r: Rate) -> dict[str, Any]:
    return {"count": r.hits, "n": r.n, "rate": r.value, "ci95": [r.low, r.high] if r.n else None}


@dataclass(frozen=True)
class RuleContrast:
    """One rule's contrast: whether one can be drawn, the best values stated, and how many were left out."""

    rule: str
    affected: int
    others: int
    shown: tuple[Separator, ...] = ()
    compared: int = 0
    decisive: int = 0
    tied_left_out: int = 0
    #: the smallest p of every contrast compared (None: none compared)
    smallest_p: float | None = None

    @property
    def drawn(self) -> bool:
        return self.affected >= MIN_AFFECTED and self.others > 0

    @property
    def left_out(self) -> int:
        return self.compared - len(self.shown)

    @property
    def left_out_decisive(self) -> int:
        return self.decisive - sum(1 for s in self.shown if s.decisive)

    def heading(self) -> str:
        """The rule's line: how many deployments it rests on, or why no contrast can be drawn."""
        noun = "deployment" if self.affected == 1 else "deployments"
        if self.affected < MIN_AFFECTED:
            return (f"{self.rule}: no contrast can be drawn: only {self.affected} affected {noun} "
                    f"(at least {MIN_AFFECTED} are needed)")
        if not self.others:
            return f"{self.rule}: no contrast can be drawn: all {self.affected} analysed deployments have it"
        head = f"{self.rule}: {self.affected} of {self.affected + self.others} deployments"
        if not self.compared:
            return f"{head}; no attribute value is more common with it than without"
        if not self.decisive:
            return (f"{head}; none of {self.compared} contrast(s) compared is decisive "
                    f"(smallest {describe_p(self.smallest_p or 1.0)})")
        return f"{head}; decisive (p < {ALPHA:g}): {self.decisive} of {self.compared} contrast(s) compared"

    def left_out_note(self) -> str | None:
        """How many contrasts are not stated, and how many of those are as strong as the last stated."""
        if not self.left_out or not self.shown:
            return None  # nothing stated: the heading already counts what was compared
        note = f"{self.left_out} more left out ({self.left_out_decisive} of them decisive"
        if self.tied_left_out:
            note += f"; {self.tied_left_out} with the same p and rates as the last shown"
        return f"{note})"

    def lines(self) -> list[str]:
        """The statements under the heading, plain text (renderers escape them)."""
        note = self.left_out_note()
        return [s.sentence() for s in self.shown] + ([note] if note else [])

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "affected": self.affected, "others": self.others, "drawn": self.drawn,
                "compared": self.compared, "decisive": self.decisive, "shown": len(self.shown),
                "left_out": self.left_out, "left_out_decisive": self.left_out_decisive,
                "tied_left_out": self.tied_left_out, "smallest_p": self.smallest_p, "statement": self.heading()}


def contrast(attrs: dict[str, dict[str, str]], affected_by_rule: dict[str, set[str]],
             top: int = TOP_PER_RULE) -> list[RuleContrast]:
    """Per rule with affected deployments, its contrast (or the reason there is none), rules in code order."""
    ids = list(attrs)
    counts = _value_counts(attrs, ids)
    out = []
    for rule, affected in sorted(affected_by_rule.items()):
        affected = affected & set(ids)
        if not affected:
            continue
        others = len(ids) - len(affected)
        rc = RuleContrast(rule, len(affected), others)
        out.append(_ranked(rc, _candidates(rule, attrs, affected, counts), top) if rc.drawn else rc)
    return out


def _candidates(rule: str, attrs: dict[str, dict[str, str]], affected: set[str],
                counts: dict[str, Counter]) -> list[Separator]:
    """Every value held by an affected deployment and more frequent with the finding than without; values
    held by exactly the same deployments (among the same ones that show them) are one contrast.

    A table rests only on the deployments whose logs show the attribute, so an attribute shown by fewer than
    ``MIN_AFFECTED`` affected deployments gives no contrast.
    """
    by_holders: dict[tuple[frozenset[str], frozenset[str]], list[Separator]] = {}
    for name, values in counts.items():
        shown = [d for d in attrs if name in attrs[d]]
        shown_affected = [d for d in shown if d in affected]
        if len(shown_affected) < MIN_AFFECTED or len(shown_affected) == len(shown):
            continue
        for value, holders in values.items():
            a = sum(1 for d in shown_affected if attrs[d][name] == value)
            if a == 0 or holders == len(shown):
                continue
            n_others, others_shown = len(attrs) - len(affected), len(shown) - len(shown_affected)
            sep = Separator(rule, name, value, a, len(affected), holders - a, n_others,
                            len(affected) - len(shown_affected), n_others - others_shown)
            if sep.effect > 0:
                key = (frozenset(d for d in shown if attrs[d][name] == value), frozenset(shown))
                by_holders.setdefault(key, []).append(sep)
    return [replace(seps[0], same_deployments=tuple((s.attribute, s.value) for s in seps[1:]))
            for seps in by_holders.values()]


def _ranked(rc: RuleContrast, found: list[Separator], top: int) -> RuleContrast:
    """The best ``top`` decisive contrasts by p, then effect. With none decisive, a perfect split is still
    stated, marked not significant: it is what a reader would otherwise take for a cause (3/3 against 0/3
    is p = 0.10); an imperfect one that is not significant supports no sentence and is only counted."""
    found.sort(key=Separator.rank_key)
    decisive = [s for s in found if s.decisive]
    shown = decisive[:top] if decisive else [s for s in found if s.perfect][:1]
    tied = 0
    if shown:
        last = _strength(shown[-1])
        tied = sum(1 for s in found if s not in shown and _strength(s) == last)
    smallest = found[0].p_value if found else None
    return RuleContrast(rc.rule, rc.affected, rc.others, tuple(shown), len(found), len(decisive), tied, smallest)


def _strength(s: Separator) -> tuple[float, float | None, float | None]:
    """What a reader compares two contrasts by: the p and the two rates (a tie on all three is a tie)."""
    return s.p_value, s.with_value.value, s.without_value.value


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
