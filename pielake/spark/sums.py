"""Sums that do not depend on the order of their terms (docs/semantics.md §2).

A situation's `sum` (and so its `avg`) is the same whichever way its events fall into tasks, micro-batches and
backfills: the kernel sums each run's events in the task that holds them, and a run that crosses a task's edge
is the sum of its fragments' sums. Whole numbers are summed as 38-digit decimals (`EXACT_SUM`), which no sum of
fewer than 10^19 BIGINTs overflows. Doubles added one after another round at every step, and the result depends
on the order (ten times 0.1 is 0.9999999999999999 left to right, 1.0 pairwise), so a sum of doubles is their exact
sum rounded once, and a run's partial sum (`EXACT_DOUBLE_SUM`) starts with that rounding. A run at a task's edge,
which the stitch may join with the fragments beside it, keeps its whole *expansion*: a few doubles whose exact
sum is the exact sum of its values; the stitch concatenates its fragments' expansions and expands them again
(`joined`). The reference sums the same values as fractions, and the tests hold the two to each other.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pyspark.sql.functions as F
from pyspark.sql import Column

EXACT_SUM = "DECIMAL(38,0)"  # a partial sum of whole numbers; RETURN's value is a BIGINT, NULL beyond 64 bits
EXACT_DOUBLE_SUM = "ARRAY<DOUBLE>"  # a partial sum of any other numbers: its expansion


def expansion(values: Sequence[float]) -> list[float] | None:
    """The exact sum of finite doubles as an expansion: its rounding to a double (as `math.fsum` rounds, exactly
    once), then the rounding of what that leaves of the sum, and so on until nothing is left. None for no values.

    Most sums are two terms or one. A sum beyond a double's range is its infinity alone, and terms of both
    infinities NaN: such an expansion is no longer exact, but no sum of a situation's events can pass a double's
    range unless they hold values near 1e308."""
    if not len(values):
        return None
    terms: list[float] = []
    while True:
        term = _exactly_rounded(itertools.chain(values, (-t for t in terms)))
        if terms and term == 0.0:
            return terms
        terms.append(term)
        if term == 0.0 or not math.isfinite(term):
            return terms


def _exactly_rounded(values: Iterable[float]) -> float:
    """The exact sum of `values` rounded once to a double; `math.fsum` refuses sums whose running terms pass a
    double's range, which are then summed as fractions."""
    values = list(values)
    try:
        return math.fsum(values)
    except ValueError:  # an infinity of each sign among the terms
        return math.nan
    except OverflowError:
        exact = sum(map(Fraction, values), Fraction(0))
        try:
            return float(exact)
        except OverflowError:
            return math.inf if exact > 0 else -math.inf


def run_expansions(column: pa.ChunkedArray, starts: np.ndarray, wanted: np.ndarray, edges: np.ndarray) -> pa.Array:
    """The partial sums of a floating or DECIMAL column over a partition's runs (a run is the events from
    `starts[i]` to the next run's start; the first starts at 0), its NULLs skipped; NULL for a run of NULLs alone
    and for the runs not `wanted`.

    Only a run at a task's edge (`edges`) may be joined with others, so only it needs its whole expansion; any
    other run's sum is final, and its partial is that sum alone. The sum of one or two values is one addition,
    which rounds once, so numpy adds those; longer runs are summed by `math.fsum`, a run at a time."""
    values = _doubles(column)
    present = ~np.isnan(values)
    counts = np.add.reduceat(present.astype(np.int64), starts)
    summed = wanted & (counts > 0)
    short = summed & ~edges & (counts <= 2)
    bounds = np.append(starts, len(values))

    def present_in(run: int) -> np.ndarray:
        events = slice(bounds[run], bounds[run + 1])
        return values[events][present[events]]

    longer = {i: expansion(present_in(i)) if edges[i] else [_exactly_rounded(present_in(i))]
              for i in np.flatnonzero(summed & ~short)}
    lengths = short.astype(np.int64)
    for i, terms in longer.items():
        lengths[i] = len(terms)
    offsets = np.append(0, np.cumsum(lengths))
    flat = np.empty(offsets[-1], dtype=np.float64)
    # + 0.0: a sum of zeros is +0.0 whatever their signs, as the exact sum's rounding is
    flat[offsets[:-1][short]] = np.add.reduceat(np.where(present, values, 0.0), starts)[short] + 0.0
    for i, terms in longer.items():
        flat[offsets[i]:offsets[i + 1]] = terms
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat), mask=pa.array(~summed))


def _doubles(column: pa.ChunkedArray) -> np.ndarray:
    """A column's values as doubles, NULL as NaN (events hold no NaN). A DECIMAL is rounded once, as Spark's cast
    rounds it (docs/semantics.md §1: a DECIMAL attribute is computed with as a double)."""
    if pa.types.is_decimal(column.type):
        return np.array([math.nan if v is None else float(v) for v in column.to_pylist()], dtype=np.float64)
    return column.cast(pa.float64()).to_numpy(zero_copy_only=False)


def joined(expansions: Column) -> Column:
    """Expansions concatenated, or values (an ARRAY<DOUBLE> of their terms), as one expansion of their sum; NULL for
    none. Spark has no exact sum of doubles, so this runs in Python (over an aggregate, in a step Spark adds after
    it), on the few rows a stitch joins and on an interval stream's situations."""
    return F.pandas_udf(_expand_each, EXACT_DOUBLE_SUM)(expansions)  # type: ignore[call-overload]


def _expand_each(terms: pd.Series) -> pd.Series:
    return terms.map(lambda t: None if t is None else expansion([float(v) for v in t]))


def rounded(expansions: Column) -> Column:
    """What RETURN publishes of a partial sum of doubles: its expansion's first term."""
    return F.element_at(expansions, 1)


def whole_sums(values: pd.Series, labels: np.ndarray) -> pd.Series:
    """Each run's sum of whole numbers (`labels` name each value's run), exact (`EXACT_SUM`) where numpy's 64-bit
    sums would wrap around: a sum in doubles finds the runs whose sum may be beyond 64 bits (any beyond 2^62),
    which are summed again as Python integers; NULL for a run of NULLs alone (as SQL's `sum`)."""
    sums = values.groupby(labels).sum(min_count=1)
    large = values.astype(float).groupby(labels).sum().abs() >= 2.0**62
    if not large.any():
        return sums
    exact = sums.astype(object).map(lambda v: None if pd.isna(v) else Decimal(int(v)))
    for label in large.index[large]:
        exact[label] = Decimal(sum(int(v) for v in values[labels == label].dropna()))
    return exact
