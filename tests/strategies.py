"""Hypothesis strategies shared by the property tests: random keyed streams and random queries over them."""

from __future__ import annotations

from hypothesis import strategies as st

from pielake.semantics.relations import RELATIONS

RELATION_NAMES = sorted(RELATIONS)


@st.composite
def key_stream(draw: st.DrawFn, key: str) -> list[dict]:
    """One key's events: gaps in time, runs of several lengths (single events too), a numeric attribute."""
    rows, t = [], draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 28))):
        t += draw(st.sampled_from([1, 1, 1, 2, 5]))
        rows.append({"key": key, "ts": t, "a": draw(st.booleans()), "b": draw(st.booleans()),
                     "c": draw(st.booleans()), "x": float(draw(st.integers(-3, 9)))})
    return rows


@st.composite
def scenario(draw: st.DrawFn) -> tuple[str, list[dict]]:
    """A query over 2-3 symbols (self pairs, duration constraints and cyclic patterns included) and a 1-4 key
    stream."""
    relations = st.lists(st.sampled_from(RELATION_NAMES), min_size=1, max_size=4, unique=True)
    predicates = ["a", "b", "c", "a AND b", "a OR c", "NOT b"]
    first, second = draw(st.sampled_from(predicates)), draw(st.sampled_from(predicates))
    durations = ["", "", " AT LEAST 2 s", " AT MOST 3 s", " BETWEEN 1 s AND 4 s"]
    defines = [f"A AS {first}{draw(st.sampled_from(durations))}", f"B AS {second}"]
    pattern = [f"A {';'.join(draw(relations))} B"]
    if draw(st.booleans()):
        defines.append(f"C AS {draw(st.sampled_from(predicates))}")
        other = draw(st.sampled_from(["A", "B"]))
        pattern.append(f"{other} {';'.join(draw(relations))} C")
        if draw(st.booleans()):  # close the cycle A-B-C: the last join is on two symbols already bound
            pattern.append(f"{'B' if other == 'A' else 'A'} {';'.join(draw(relations))} C")
    window = draw(st.integers(2, 40))
    query = (f"FROM S PARTITION BY key DEFINE {', '.join(defines)} PATTERN {' AND '.join(pattern)} "
             f"WITHIN {window} s RETURN sum(A.x) AS sa, count(B.x) AS nb, duration(A) AS da")
    keys = draw(st.lists(st.sampled_from(["k1", "k2", "k3", "k4"]), min_size=1, max_size=4, unique=True))
    rows = [r for k in keys for r in draw(key_stream(k))]
    return query, rows
