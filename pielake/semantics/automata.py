"""PiePair automata: each relation between two predicates as a recogniser over the minterm alphabet.

The PieStream paper (Table 1) maps every event to one of four minterms of the pair's predicates φ (left
symbol A) and ψ (right symbol B):

    O = ¬φ∧¬ψ    I = ¬φ∧ψ    Z = φ∧¬ψ    E = φ∧ψ

and recognises each relation as a symbolic regular expression over that stream. The automata here are the
corrected versions: the paper's `starts`/`equals`/`started-by` need an O before the common start, which misses
pairs that start with a key's first event, so a virtual boundary event `^` (acting as O) precedes every key;
and after the trigger, the open situation may contain events of the other predicate (E), which the paper's
completion rule would reject. `before`/`after` have no automaton (a situation may precede unboundedly many
others); they are found by a range join bounded by the window.

An automaton recognises one pair instance. A recogniser starts a new instance at every event (regex search);
instances that have not triggered yet are merged by state (their futures are identical), triggered ones are
kept apart until their completion, because several pairs can wait for the same end (B contains A1, A2, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from pielake.errors import PielakeError
from pielake.semantics.relations import RANGE_JOIN_RELATIONS, RELATIONS

O, I, Z, E = "O", "I", "Z", "E"
BOUNDARY = "^"
ALPHABET = (O, I, Z, E)
MINTERM_MEANING = {O: "¬A ∧ ¬B", I: "¬A ∧ B", Z: "A ∧ ¬B", E: "A ∧ B"}
START, ARMED, BODY, GAP, OPEN, DONE = "start", "armed", "body", "gap", "open", "done"


class Action(Enum):
    TAKE = "take"  # the event belongs to the pattern before the decision; stay on the path
    TRIGGER = "trigger"  # the relation is decided at this event (PieStream's trigger condition)
    IGNORE = "ignore"  # decided already; this event does not end the situation still open
    COMPLETE = "complete"  # the situation still open ends here: the pair is complete


class MalformedAutomatonError(PielakeError):
    """An automaton definition that is not a valid recogniser."""


@dataclass(frozen=True)
class Transition:
    source: str
    symbols: frozenset[str]
    action: Action
    target: str


@dataclass(frozen=True)
class PairAutomaton:
    """The recogniser of `A <relation> B`, plus what its trigger and completion events mean."""

    relation: str
    sre: str
    transitions: tuple[Transition, ...]
    trigger_endpoint: str
    completion_endpoint: str | None  # None: the trigger event also completes the pair

    def step(self, state: str, symbol: str) -> Transition | None:
        return next((t for t in self.transitions if t.source == state and symbol in t.symbols), None)

    def unfolded(self) -> set[tuple[str, str, str, str]]:
        """(source, symbol, action, target) for every symbol: the shape tests compare."""
        return {(t.source, s, t.action.value, t.target) for t in self.transitions for s in t.symbols}


@dataclass(frozen=True)
class _Shape:
    """The phases of one relation, from which its automaton is built."""

    before: frozenset[str]  # the event right before the pattern (last event of the earlier situation, or O)
    middle: str | None  # BODY (E+ shared by both) or GAP (O+ between them) or None
    trigger: frozenset[str]
    tail: frozenset[str]  # events that keep the still-open situation going after the trigger
    trigger_endpoint: str
    completion_endpoint: str | None


def _f(*symbols: str) -> frozenset[str]:
    return frozenset(symbols)


_FORWARD_SHAPES: dict[str, _Shape] = {
    "meets": _Shape(_f(Z), None, _f(I), _f(I, E), "A.te = B.ts", "B.te"),
    "overlaps": _Shape(_f(Z), BODY, _f(I), _f(I, E), "A.te", "B.te"),
    "starts": _Shape(_f(O, BOUNDARY), BODY, _f(I), _f(I, E), "A.te", "B.te"),
    "during": _Shape(_f(I), BODY, _f(I), _f(I, E), "A.te", "B.te"),
    "finishes": _Shape(_f(I), BODY, _f(O), _f(), "A.te = B.te", None),
    "equals": _Shape(_f(O, BOUNDARY), BODY, _f(O), _f(), "A.te = B.te", None),
    "followed-by": _Shape(_f(Z, E), GAP, _f(I, E), _f(I, E), "B.ts", "B.te"),
}
_SWAP = {O: O, I: Z, Z: I, E: E, BOUNDARY: BOUNDARY}


def _mirror(shape: _Shape) -> _Shape:
    """The inverse relation: swap the roles of A and B, so I and Z trade places."""

    def swap(symbols: frozenset[str]) -> frozenset[str]:
        return frozenset(_SWAP[s] for s in symbols)

    def rename(endpoint: str | None) -> str | None:
        if endpoint is None:
            return None
        parts = [p.replace("A.", "#.").replace("B.", "A.").replace("#.", "B.") for p in endpoint.split(" = ")]
        return " = ".join(sorted(parts))

    return _Shape(swap(shape.before), shape.middle, swap(shape.trigger), swap(shape.tail),
                  rename(shape.trigger_endpoint) or "", rename(shape.completion_endpoint))


def _sre(shape: _Shape) -> str:
    def alt(symbols: frozenset[str]) -> str:
        names = [s for s in (BOUNDARY, *ALPHABET) if s in symbols]
        return names[0] if len(names) == 1 else "(" + "|".join(names) + ")"

    parts = [alt(shape.before)]
    if shape.middle == BODY:
        parts.append("E+")
    elif shape.middle == GAP:
        parts.append("O+")
    parts.append(alt(shape.trigger))
    if shape.completion_endpoint is not None:
        parts.append(f"{alt(shape.tail)}* {alt(_f(*ALPHABET) - shape.tail)}")
    return " · ".join(parts)


def _build(relation: str, shape: _Shape) -> PairAutomaton:
    after_trigger = OPEN if shape.completion_endpoint else DONE
    loop_before = shape.before - {BOUNDARY}
    transitions = [Transition(START, shape.before, Action.TAKE, ARMED),
                   Transition(ARMED, loop_before, Action.TAKE, ARMED)]
    if shape.middle is None:
        transitions.append(Transition(ARMED, shape.trigger, Action.TRIGGER, after_trigger))
    else:
        middle_symbol = _f(E) if shape.middle == BODY else _f(O)
        transitions += [Transition(ARMED, middle_symbol, Action.TAKE, shape.middle),
                        Transition(shape.middle, middle_symbol, Action.TAKE, shape.middle),
                        Transition(shape.middle, shape.trigger, Action.TRIGGER, after_trigger)]
    if shape.completion_endpoint:
        transitions += [Transition(OPEN, shape.tail, Action.IGNORE, OPEN),
                        Transition(OPEN, _f(*ALPHABET) - shape.tail, Action.COMPLETE, DONE)]
    automaton = PairAutomaton(relation, _sre(shape), tuple(t for t in transitions if t.symbols),
                              shape.trigger_endpoint, shape.completion_endpoint)
    validate(automaton)
    return automaton


def validate(automaton: PairAutomaton) -> None:
    """Reject an automaton that is not deterministic, uses foreign symbols, or cannot trigger.

    Raises:
        MalformedAutomatonError: naming the relation and the defect.
    """
    name = automaton.relation
    seen: dict[tuple[str, str], Transition] = {}
    for t in automaton.transitions:
        extra = t.symbols - set(ALPHABET) - ({BOUNDARY} if t.source == START else set())
        if extra:
            raise MalformedAutomatonError(f"{name}: transition from {t.source} reads unknown symbols {sorted(extra)}")
        for symbol in t.symbols:
            if (t.source, symbol) in seen:
                raise MalformedAutomatonError(f"{name}: two transitions from {t.source} on {symbol}")
            seen[(t.source, symbol)] = t
    triggers = [t for t in automaton.transitions if t.action is Action.TRIGGER]
    if len(triggers) != 1:
        raise MalformedAutomatonError(f"{name}: needs exactly one trigger transition, has {len(triggers)}")
    reachable, frontier = {START}, [START]
    while frontier:
        state = frontier.pop()
        for t in automaton.transitions:
            if t.source == state and t.target not in reachable:
                reachable.add(t.target)
                frontier.append(t.target)
    if DONE not in reachable:
        raise MalformedAutomatonError(f"{name}: the final state cannot be reached")


AUTOMATA: dict[str, PairAutomaton] = {}
for _name, _shape in _FORWARD_SHAPES.items():
    AUTOMATA[_name] = _build(_name, _shape)
    _inverse = RELATIONS[_name].inverse
    if _inverse != _name:
        AUTOMATA[_inverse] = _build(_inverse, _mirror(_shape))
assert set(AUTOMATA) == set(RELATIONS) - RANGE_JOIN_RELATIONS


@dataclass(frozen=True)
class Recognition:
    """One recognised pair: indexes into the minterm stream of its trigger and completion events."""

    trigger: int
    completion: int | None


def minterm(phi: bool, psi: bool) -> str:
    return {(False, False): O, (False, True): I, (True, False): Z, (True, True): E}[(phi, psi)]


def recognise(automaton: PairAutomaton, minterms: Sequence[str]) -> list[Recognition]:
    """Run the recogniser over one key's minterm stream (without the boundary, which is added here)."""
    waiting: dict[str, int] = {}  # not yet triggered: state -> any start (merged: same future)
    open_pairs: list[int] = []  # triggered, waiting for completion: trigger indexes
    done: list[Recognition] = []
    for i, symbol in enumerate([BOUNDARY, *minterms]):
        index = i - 1
        still_open = []
        for trig in open_pairs:
            t = automaton.step(OPEN, symbol)
            if t is None:
                continue
            if t.action is Action.COMPLETE:
                done.append(Recognition(trig, index))
            else:
                still_open.append(trig)
        open_pairs = still_open
        moved: dict[str, int] = {}
        for state, start in [*waiting.items(), (START, index)]:
            t = automaton.step(state, symbol)
            if t is None:
                continue
            if t.action is Action.TRIGGER:
                if t.target == DONE:
                    done.append(Recognition(index, index))
                else:
                    open_pairs.append(index)
            else:
                moved.setdefault(t.target, start)
        waiting = moved
    done.extend(Recognition(trig, None) for trig in open_pairs)
    return sorted(done, key=lambda r: r.trigger)
