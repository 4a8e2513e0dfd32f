"""PiePair run patterns: what every constraint's automata read of its minterm runs, as data (no Spark).

Every PiePair automaton (`pielake.semantics.automata`) reads at most three consecutive minterm runs: the run before
the pattern, an optional middle run (E+ shared by both situations, or the O+ gap of followed-by), and the run that
triggers the decision. So each pattern is a set of (previous, current, next) minterm values, read from the
automaton's own transitions, with where its two situations sit relative to those runs (`Locator`). The runs
kernel keeps only the runs some pattern reads (`read_runs`); PiePair detection joins the runs to the patterns
(`pielake.spark.pairs`).

Where a constraint holds a whole prefix group (`overlaps; finished-by; contains`, `starts; equals; started-by`,
`overlapped-by; finishes; during`) the pair is decided at the later start (docs/semantics.md §5), which a two-run
pattern (previous, E) finds.
"""

from __future__ import annotations

from dataclasses import dataclass

from pielake.query.analyzer import PairConstraint
from pielake.semantics.automata import AUTOMATA, BOUNDARY, Action, PairAutomaton
from pielake.spark import columns as C
from pielake.spark.runs import NO_RUN

MINTERM_CODE = {"O": 0, "I": 1, "Z": 2, "E": 3}  # 2 * left + right, as the runs kernel encodes them
PREFIX_GROUPS = {  # the relations sharing a start order, and what precedes their common E run
    frozenset({"overlaps", "finished-by", "contains"}): frozenset({"Z"}),
    frozenset({"starts", "equals", "started-by"}): frozenset({"O", BOUNDARY}),
    frozenset({"overlapped-by", "finishes", "during"}): frozenset({"I"}),
}


@dataclass(frozen=True)
class Locator:
    """Which situation: the one whose `kind` (ts or te) equals `source` (a run boundary or a since column)."""

    kind: str  # "ts" | "te"
    source: str  # "trigger" | "cur_start" | LEFT_SINCE | RIGHT_SINCE


def _l(kind: str, source: str) -> Locator:
    return Locator(kind, source)


TRIG, CUR_START = "trigger", "cur_start"
# Where A (left) and B (right) sit relative to the pattern's runs; cur = the middle run, or the trigger run.
LOCATE: dict[str, tuple[Locator, Locator]] = {
    "meets": (_l("te", TRIG), _l("ts", TRIG)), "met-by": (_l("ts", TRIG), _l("te", TRIG)),
    "overlaps": (_l("te", TRIG), _l("ts", CUR_START)), "overlapped-by": (_l("ts", CUR_START), _l("te", TRIG)),
    "starts": (_l("te", TRIG), _l("ts", CUR_START)), "started-by": (_l("ts", CUR_START), _l("te", TRIG)),
    "during": (_l("te", TRIG), _l("ts", C.RIGHT_SINCE)), "contains": (_l("ts", C.LEFT_SINCE), _l("te", TRIG)),
    "finishes": (_l("te", TRIG), _l("te", TRIG)), "finished-by": (_l("te", TRIG), _l("te", TRIG)),
    "equals": (_l("te", TRIG), _l("te", TRIG)),
    "followed-by": (_l("te", CUR_START), _l("ts", TRIG)), "follows": (_l("ts", TRIG), _l("te", CUR_START)),
}
GROUP_LOCATE = {
    frozenset({"overlaps", "finished-by", "contains"}): (_l("ts", C.LEFT_SINCE), _l("ts", TRIG)),
    frozenset({"starts", "equals", "started-by"}): (_l("ts", TRIG), _l("ts", TRIG)),
    frozenset({"overlapped-by", "finishes", "during"}): (_l("ts", TRIG), _l("ts", C.RIGHT_SINCE)),
}


@dataclass(frozen=True)
class RunPattern:
    """Consecutive runs (previous, current[, next]) that decide `relations` for one pair."""

    relations: frozenset[str]
    previous: frozenset[str]  # may hold BOUNDARY: the current run is its key's first
    current: frozenset[str]
    following: frozenset[str] | None  # None: decided at the current run's start
    a: Locator
    b: Locator

    @property
    def relation(self) -> str | None:
        """The relation a match means, or None for a prefix group (known only once an end is seen)."""
        return next(iter(self.relations)) if len(self.relations) == 1 else None


def _symbols(automaton: PairAutomaton, source: str, action: Action | None = None) -> frozenset[str]:
    return frozenset().union(*(t.symbols for t in automaton.transitions
                               if t.source == source and t.target != source and (action is None or t.action is action)))


def single_pattern(relation: str) -> RunPattern:
    """The run pattern of one relation, read off its automaton: start->armed, armed->middle, ->trigger."""
    automaton = AUTOMATA[relation]
    previous = _symbols(automaton, "start")
    trigger = next(t for t in automaton.transitions if t.action is Action.TRIGGER)
    middle = _symbols(automaton, "armed", Action.TAKE)
    a, b = LOCATE[relation]
    if trigger.source == "armed":
        return RunPattern(frozenset({relation}), previous, trigger.symbols, None, a, b)
    return RunPattern(frozenset({relation}), previous, middle, trigger.symbols, a, b)


def patterns_for(constraint: PairConstraint) -> list[RunPattern]:
    """Run patterns that together find every pair satisfying the constraint, each at its decision time."""
    remaining = set(constraint.relations) - {"before", "after"}
    patterns = []
    for group, previous in PREFIX_GROUPS.items():
        if group <= constraint.relations:
            a, b = GROUP_LOCATE[group]
            patterns.append(RunPattern(group, previous, frozenset({"E"}), None, a, b))
            remaining -= group
    patterns += [single_pattern(r) for r in sorted(remaining)]
    return patterns


def _codes(symbols: frozenset[str]) -> list[int]:
    return [NO_RUN if s == BOUNDARY else MINTERM_CODE[s] for s in symbols]


def read_runs(constraint: PairConstraint) -> frozenset[tuple[int, int, int | None]]:
    """The (previous, current, next) values of the runs the constraint's patterns join as their current run
    (next None: any; `NO_RUN` for a missing neighbour): the only runs of its series detection reads as rows (the
    others only as a neighbour's `prev`/`next`), so the only ones the runs kernel needs to emit. Empty for a
    `before`/`after`-only constraint, which reads situations instead."""
    return frozenset(values for pattern in patterns_for(constraint) for values in run_values(pattern))


def run_values(pattern: RunPattern) -> list[tuple[int, int, int | None]]:
    """Every (previous, current, next) value a pattern accepts (next None: any, it is decided at the current
    run's start)."""
    following = [None] if pattern.following is None else _codes(pattern.following)
    return [(prev, value, nxt) for prev in _codes(pattern.previous) for value in _codes(pattern.current)
            for nxt in following]
