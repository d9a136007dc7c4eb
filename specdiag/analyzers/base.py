"""The rule interface and registry.

A rule has a stable code, a default severity, a title and a docstring that *is* its documentation (the
sections ``Detects``, ``Why it matters``, ``Causes weighed``, ``Fix`` and ``References`` are rendered by
``specdiag explain`` and docs/rules/). It observes only the events it lists in ``events`` and keeps
bounded state; ``finish(ctx, run)`` turns that state into findings once the whole input was read.
"""

from __future__ import annotations

from typing import Any, ClassVar

from specdiag.context import Context
from specdiag.events import Event, message_shape
from specdiag.findings import Finding
from specdiag.observe import Observer, RunState

REGISTRY: dict[str, type[Rule]] = {}
#: the ``levels`` of a rule that reads catalogued messages at WARNING or worse (its own are not in ``events``)
WARNING_OR_WORSE = frozenset({"WARNING", "ERROR", "CRITICAL"})


def register(cls: type[Rule]) -> type[Rule]:
    if cls.code in REGISTRY:
        raise ValueError(f"duplicate rule code {cls.code}")
    REGISTRY[cls.code] = cls
    return cls


class Rule(Observer):
    """An observer that turns what it saw into findings (see ``specdiag.observe`` for the protocol)."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""  # kebab-case, stable (used in SARIF/JUnit)
    title: ClassVar[str] = ""
    severity: ClassVar[str] = "warning"  # default severity; findings may choose a level per occurrence
    #: when a finding's severity depends on what happened (the KV load failure policy, a crash), say how;
    #: shown by ``specdiag rules``, ``config show`` and the rule docs next to the default
    severity_note: ClassVar[str] = ""
    family: ClassVar[str] = ""
    events: ClassVar[frozenset[str]] = frozenset()
    #: tunable thresholds with their defaults (overridable from configuration)
    defaults: ClassVar[dict[str, Any]] = {}
    #: the cause ids this rule may report
    cause_ids: ClassVar[tuple[str, ...]] = ()
    #: finishes after every other rule, when ``run.explained`` names the template ids their findings read
    late: ClassVar[bool] = False
    #: literal parts of upstream messages no hand-written template reads (catalog messages) whose lines this
    #: rule's finding accounts for when it reports one: the consequence lines of what it diagnoses; a message
    #: no catalogued release prints is claimed whole, by its shape (:func:`shape_claim`); one whose text is a variable
    #: (``logger.exception(e)``), by its catalog entry's id
    claims: ClassVar[tuple[str, ...]] = ()
    #: the template ids a reporting finding accounts for, for LOG001; None: all of ``events``. A rule that reads a
    #: general template (``V_EXC``: any logged exception) for a few of its lines names none and claims those lines
    explains: ClassVar[frozenset[str] | None] = None

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        # read only: a rule without configured options shares its class's defaults (one dict per deployment
        # and rule was 3 KiB of every deployment of a stream that names thousands)
        self.options = {**self.defaults, **options} if options else self.defaults

    def observe(self, ev: Event) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self, ctx: Context, run: RunState) -> list[Finding]:  # pragma: no cover - interface
        raise NotImplementedError


#: a rule's list, set or counter before its first line, made on that line (``()`` is empty to read and shared): most logs
#: never print what a rule reads, and an empty container in every rule of every deployment adds up
NOT_YET: Any = ()


def all_rules() -> dict[str, type[Rule]]:
    """Import every rule module once and return the registry, ordered by code."""
    from specdiag import analyzers  # noqa: F401  (imports the rule modules)

    return dict(sorted(REGISTRY.items()))


def shape_claim(msg: str) -> str:
    """How a rule claims (``Rule.claims``) a line no catalogued release prints: the message's shape, its values
    blanked (``events.message_shape``), so every line of that message is claimed at once."""
    return message_shape(msg.strip(), 160)
