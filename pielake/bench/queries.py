"""The queries of the benchmarks: PieStream's Figure 4 chain, TPStream's star, and TPStream's Q1-Q3, over the
synthetic law's columns a_1 ... a_n (`pielake.pipeline.synthetic`)."""

from __future__ import annotations

CHAIN_RELATIONS = "meets;overlaps;overlapped-by;starts;started-by;contains"  # PieStream Figure 4
WINDOW = 10_000
TPSTREAM_QUERIES = {  # the TPStream paper, section 6.4.1, over a_1, a_2, a_3
    "q1": "A overlaps B AND A overlaps C AND B starts C",
    "q2": "A overlaps B AND A before C AND B overlaps C",
    "q3": "A before B AND A before C AND B before C",
}


def _query(symbols: int, pattern: str, names: list[str] | None = None, window: int = WINDOW) -> str:
    names = names or [f"A{i}" for i in range(1, symbols + 1)]
    defines = ", ".join(f"{name} AS a_{i}" for i, name in enumerate(names, 1))
    return f"FROM Synthetic PARTITION BY id DEFINE {defines} PATTERN {pattern} WITHIN {window} s"


def chain_query(symbols: int, window: int = WINDOW) -> str:
    """A_1 r A_2, A_2 r A_3, ... with r = PieStream Figure 4's six relations."""
    pattern = " AND ".join(f"A{i} {CHAIN_RELATIONS} A{i + 1}" for i in range(1, symbols))
    return _query(symbols, pattern, window=window)


def star_query(symbols: int, window: int = WINDOW) -> str:
    """A_1 r A_i for every other i: TPStream's Star, with the chain's relations instead of random ones."""
    pattern = " AND ".join(f"A1 {CHAIN_RELATIONS} A{i}" for i in range(2, symbols + 1))
    return _query(symbols, pattern, window=window)


def shape_query(shape: str, symbols: int) -> tuple[str, int]:
    """The query text of a shape and the number of symbols it really has (Q1-Q3 have three)."""
    if shape == "chain":
        return chain_query(symbols), symbols
    if shape == "star":
        return star_query(symbols), symbols
    if shape in TPSTREAM_QUERIES:
        return _query(3, TPSTREAM_QUERIES[shape], ["A", "B", "C"]), 3
    raise ValueError(f"unknown shape '{shape}'; use chain, star, {', '.join(TPSTREAM_QUERIES)}")
