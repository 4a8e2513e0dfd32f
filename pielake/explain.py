"""`pielake explain`: what a query means and how pielake will run it, in plain text.

Shows the symbols and predicates, the constraints as mPiePairs with the endpoint at which each relation is
decided, the join order, and for every relation its automaton over the O/I/Z/E minterms with the trigger and
completion transitions (PieStream Table 1, corrected as described in `pielake.semantics.automata`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from pielake.query.analyzer import PairConstraint, QueryPlan, SymbolDef
from pielake.query.join_order import join_order, selectivity
from pielake.query.printer import expr_text
from pielake.semantics.automata import (
    ALPHABET,
    AUTOMATA,
    BOUNDARY,
    DONE,
    MINTERM_MEANING,
    START,
    Action,
    PairAutomaton,
)
from pielake.semantics.detection import decided_at_endpoint
from pielake.semantics.relations import RELATIONS


def _rename(text: str, left: str, right: str) -> str:
    """Put the pair's symbol names in place of the generic A and B, in one pass."""
    return re.sub(r"\b[AB]\b", lambda m: left if m.group() == "A" else right, text)


def _seconds(value: Fraction) -> str:
    return f"{float(value):g} s"


def _duration(symbol: SymbolDef) -> str:
    low, high = symbol.min_seconds, symbol.max_seconds
    if low is not None and high is not None:
        return f"  duration in [{_seconds(low)}, {_seconds(high)}]"
    if low is not None:
        return f"  duration >= {_seconds(low)}"
    if high is not None:
        return f"  duration <= {_seconds(high)}"
    return ""


def _symbols(plan: QueryPlan) -> list[str]:
    """One line a symbol; over several streams each says which stream its situations come from."""
    width = max(len(s.name) for s in plan.symbols)
    over = (lambda s: f"  [{s.source}]") if len(plan.sources) > 1 else (lambda s: "")
    return [f"  {s.name:<{width}}  {expr_text(s.predicate)}{_duration(s)}{over(s)}" for s in plan.symbols]


def from_text(plan: QueryPlan) -> str:
    """The query's FROM entries as written, `CarSensors CS, RoadWorks RW`, each stream of another query's
    matches saying so."""
    return ", ".join(s.stream + (f" {s.alias}" if s.alias else "")
                     + (f" (the complete matches of query {s.upstream})" if s.reads_matches else "")
                     for s in plan.sources)


def _constraint(c: PairConstraint) -> list[str]:
    lines = [f"  {c.id}: {c.left} {{{', '.join(c.ordered_relations())}}} {c.right}"
             f"   (estimated selectivity {selectivity(c):.4f})"]
    for name in c.ordered_relations():
        endpoint = decided_at_endpoint(c.relations, name)
        lines.append(f"      if {c.left} {name} {c.right}: decided at {_rename(endpoint or '-', c.left, c.right)}")
    return lines


def _symbols_text(symbols: frozenset[str]) -> str:
    return ",".join(s for s in (BOUNDARY, *ALPHABET) if s in symbols)


def _automaton(a: PairAutomaton, left: str, right: str) -> list[str]:
    completion = _rename(a.completion_endpoint, left, right) if a.completion_endpoint else "the trigger event"
    lines = [f"    {left} {a.relation} {right}:  {a.sre}",
             f"      trigger at {_rename(a.trigger_endpoint, left, right)}; complete at {completion}"]
    for t in a.transitions:
        mark = {Action.TRIGGER: "   <- trigger", Action.COMPLETE: "   <- completion"}.get(t.action, "")
        lines.append(f"      {t.source:>5} --{_symbols_text(t.symbols):<7}--> {t.target:<5} [{t.action.value}]{mark}")
    return lines


def found_by(relation: str) -> str:
    """How a constraint's pairs in one relation are found: the PiePair automaton over its minterm runs, or a range
    join of the situations (`before`/`after`, which have no automaton). Across two streams alike: the kernels read
    the streams as one timeline (`pielake.spark.timeline`)."""
    return "automaton" if relation in AUTOMATA else "range join"


def _timeline_note(plan: QueryPlan, c: PairConstraint) -> list[str]:
    """A pair across two streams is found on their one timeline, and decided no later than both have told."""
    if not plan.crosses_streams(c):
        return []
    left, right = plan.symbol(c.left).source, plan.symbol(c.right).source
    return [f"    across streams {left} and {right}: read as one timeline (each symbol's truth carried from its own "
            f"stream's latest event); a pair counts once decided by the key's time in the slower of the two"]


def _pair_detection(plan: QueryPlan, c: PairConstraint) -> list[str]:
    legend = ", ".join(f"{m} = {_rename(MINTERM_MEANING[m], c.left, c.right)}" for m in ALPHABET)
    lines = [f"  {c.id} ({c.left}, {c.right}): {legend}", *_timeline_note(plan, c)]
    for name in c.ordered_relations():
        if name in AUTOMATA:
            lines += _automaton(AUTOMATA[name], c.left, c.right)
        else:
            cond = f"{c.left}.te < {c.right}.ts" if name == "before" else f"{c.right}.te < {c.left}.ts"
            lines.append(f"    {c.left} {name} {c.right}:  range join on {cond}, bounded by the window; "
                         f"decided at {'%s.ts' % (c.right if name == 'before' else c.left)}")
    return lines


SITUATIONS_OF = {
    False: "symbols (situations = maximal runs of events satisfying the predicate)",
    True: "symbols (situations = unions of the interval rows satisfying the predicate; the automata read the rows' "
          "starts and ends as events)",
}


def _situations_heading(plan: QueryPlan, intervals: frozenset[str]) -> str:
    if len(plan.sources) == 1:
        return SITUATIONS_OF[plan.sources[0].stream in intervals]
    rows = ", ".join(s.label for s in plan.sources if s.stream in intervals)
    return ("symbols, each over its stream (situations = maximal runs of its stream's events satisfying the "
            "predicate" + (f"; of {rows}, unions of the interval rows satisfying it" if rows else "") + ")")


def explain(plan: QueryPlan, *, intervals: frozenset[str] = frozenset()) -> str:
    """The explain report of an analyzed query, as text; `intervals`: the streams whose rows are intervals
    (docs/semantics.md §2)."""
    keys = ", ".join(plan.keys) or "(none: one global key)"
    order = join_order(plan.constraints)
    intervals |= {s.stream for s in plan.sources if s.reads_matches}  # a query's matches are interval rows
    out = [f"query {plan.name}: FROM {from_text(plan)}",
           f"  partition by: {keys}",
           f"  window: {_seconds(plan.window_seconds)}  (max(te) - min(ts) over the bound situations)",
           "", _situations_heading(plan, intervals), *_symbols(plan),
           "", "constraints (mPiePairs, normalised to definition order)"]
    for c in plan.constraints:
        out += _constraint(c)
    out += ["", "join order (most selective first, connected joins on the shared symbols' start times)"]
    joined: set[str] = set()
    for step, c in enumerate(order, 1):
        on = sorted({c.left, c.right} & joined)
        how = f"join on key, {', '.join(f'{s}.ts' for s in on)}" if on else \
            ("scan" if step == 1 else "cross product on key, bounded by the window")
        out.append(f"  {step}. {c.id} ({c.left}, {c.right})  {how}")
        joined |= {c.left, c.right}
    out += ["", "pair detection (automata over the minterms of each pair's predicates; ^ = before a key's first "
            "event)"]
    for c in plan.constraints:
        out += _pair_detection(plan, c)
    out += ["", "a match is detected at the latest decision time of its constraints (and not before any start, "
            "nor before the end of a duration-constrained situation)"]
    for warning in plan.warnings:
        out.append(warning.render())
    return "\n".join(out) + "\n"


def _dot_text(text: str) -> str:
    """A DOT string literal: the query's own text (string literals included) can never end it early."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_id(*parts: str) -> str:
    return "_".join(re.sub(r"\W", "_", p) for p in parts)


def _node(node: str, label: str, **attributes: str) -> str:
    extra = "".join(f", {k}={v}" for k, v in attributes.items())
    return f"    {node} [label={_dot_text(label)}{extra}];"


def _edge(source: str, target: str, label: str | None = None, **attributes: str) -> str:
    parts = ([f"label={_dot_text(label)}"] if label is not None else []) + [f"{k}={v}" for k, v in attributes.items()]
    return f"    {source} -> {target}" + (f" [{', '.join(parts)}]" if parts else "") + ";"


def _decomposition_dot(plan: QueryPlan) -> list[str]:
    keys = ", ".join(plan.keys) or "one global key"
    title = f"query {plan.name}: FROM {from_text(plan)}, PARTITION BY {keys}, WITHIN {_seconds(plan.window_seconds)}"
    lines = ["  subgraph cluster_query {", f"    label={_dot_text(title)};"]
    for s in plan.symbols:
        lines.append(_node(_dot_id("symbol", s.name), f"{s.name}\n{expr_text(s.predicate)}{_duration(s)}", shape="box"))
    order = [c.id for c in join_order(plan.constraints)]
    for c in plan.constraints:
        label = f"{c.id}: {c.left} {{{', '.join(c.ordered_relations())}}} {c.right}"
        lines += [_node(_dot_id(c.id), f"{label}\nselectivity {selectivity(c):.4f}", shape="ellipse"),
                  _edge(_dot_id("symbol", c.left), _dot_id(c.id)), _edge(_dot_id("symbol", c.right), _dot_id(c.id)),
                  _edge(_dot_id(c.id), "matches", f"join {order.index(c.id) + 1}")]
    lines += [_node("matches", f"matches_{plan.name.lower()}", shape="doubleoctagon"), "  }"]
    return lines


def _automaton_dot(c: PairConstraint, a: PairAutomaton) -> list[str]:
    name = _dot_id(c.id, a.relation)
    lines = [f"  subgraph cluster_{name} {{",
             f"    label={_dot_text(f'{c.id}: {c.left} {a.relation} {c.right}   {a.sre}')};",
             f"    {name}__init [shape=point];", _edge(f"{name}__init", f"{name}_{START}")]
    states = dict.fromkeys(s for t in a.transitions for s in (t.source, t.target))
    lines += [_node(f"{name}_{state}", state, shape="doublecircle" if state == DONE else "circle")
              for state in states]
    style = {Action.TRIGGER: {"color": "red", "penwidth": "2"}, Action.COMPLETE: {"color": "blue", "penwidth": "2"}}
    lines += [_edge(f"{name}_{t.source}", f"{name}_{t.target}", f"{_symbols_text(t.symbols)} {t.action.value}",
                    **style.get(t.action, {})) for t in a.transitions]
    return [*lines, "  }"]


def explain_dot(plan: QueryPlan, *, automata: bool = True) -> str:
    """The decomposition (symbols -> mPiePairs -> matches, in join order) and, with `automata`, every PiePair
    automaton as one Graphviz digraph; trigger transitions red, completions blue. Render with `dot -Tsvg`."""
    lines = [f"digraph {_dot_text(f'pielake {plan.name}')} {{", "  rankdir=LR;", "  compound=true;",
             '  node [fontname="Helvetica", fontsize=10];', '  edge [fontname="Helvetica", fontsize=9];',
             *_decomposition_dot(plan)]
    for c in plan.constraints if automata else ():
        for relation in c.ordered_relations():
            if relation in AUTOMATA:
                lines += _automaton_dot(c, AUTOMATA[relation])
    return "\n".join([*lines, "}"]) + "\n"


class _Endpoint(str):
    """An endpoint's name; comparing two gives the comparison's text, so a relation's condition prints itself."""

    __slots__ = ()

    def __lt__(self, other: object) -> _Endpoint:  # type: ignore[override]
        return _Endpoint(f"{self} < {other}")

    def __eq__(self, other: object) -> _Endpoint:  # type: ignore[override]
        return _Endpoint(f"{self} = {other}")

    def __and__(self, other: object) -> _Endpoint:
        return _Endpoint(f"{self} and {other}")

    __hash__ = str.__hash__


@dataclass(frozen=True)
class _Named:
    ts: _Endpoint
    te: _Endpoint


# One example (A, B) per relation on a small time line, drawn by `relation_pictures`.
RELATION_EXAMPLES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "before": ((1, 4), (6, 9)), "after": ((6, 9), (1, 4)), "meets": ((1, 5), (5, 9)), "met-by": ((5, 9), (1, 5)),
    "overlaps": ((1, 6), (4, 9)), "overlapped-by": ((4, 9), (1, 6)), "starts": ((1, 5), (1, 9)),
    "started-by": ((1, 9), (1, 5)), "during": ((3, 6), (1, 9)), "contains": ((1, 9), (3, 6)),
    "finishes": ((5, 9), (1, 9)), "finished-by": ((1, 9), (5, 9)), "equals": ((2, 8), (2, 8)),
    "followed-by": ((1, 4), (6, 9)), "follows": ((6, 9), (1, 4)),
}


def _bar(span: tuple[int, int]) -> str:
    start, end = span
    return " " * (3 * start) + "├" + "─" * (3 * (end - start) - 1) + "┤"


def relation_pictures() -> str:
    """Every relation drawn on an example, with its condition as `pielake.semantics.relations` defines it."""
    a = _Named(_Endpoint("A.ts"), _Endpoint("A.te"))
    b = _Named(_Endpoint("B.ts"), _Endpoint("B.te"))
    out = []
    for name, relation in RELATIONS.items():
        condition = str(relation.condition(a, b))
        if relation.needs_quiet_gap:
            condition += ", and no event in [A.te, B.ts) satisfies A's or B's predicate"
            if name == "follows":
                condition = condition.replace("[A.te, B.ts)", "[B.te, A.ts)")
        left, right = RELATION_EXAMPLES[name]
        out += [f"A {name} B:  {condition}", f"  A {_bar(left)}", f"  B {_bar(right)}", ""]
    return "\n".join(out)
