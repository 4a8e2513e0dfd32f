"""A situation's sum of doubles is the same however its events are split and in whatever order they are added:
the kernel's expansions (pielake/spark/sums.py) against the reference's fractions (docs/semantics.md §2)."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pielake.semantics.reference import exact_sum
from pielake.spark.sums import expansion

# Doubles of every magnitude a reading has, and of magnitudes far apart, so that sums lose digits when added in turn.
READINGS = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([0.1, 0.7, 1e16, -1e16, 1e-300, 3.3]),
                     st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(READINGS, min_size=1, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=4),
       seed=st.integers(0, 2**32))
def test_an_expansion_is_the_exact_sum_its_first_term_that_sum_rounded_once_however_it_is_split(
        values: list[float], cuts: list[int], seed: int) -> None:
    terms = expansion(values)
    assert terms is not None
    assert sum(map(Fraction, terms), Fraction(0)) == sum(map(Fraction, values), Fraction(0))
    assert terms[0] == exact_sum(values)
    assert all(abs(later) <= abs(earlier) * 2.0**-52 for earlier, later in itertools.pairwise(terms))
    shuffled = random.Random(seed).sample(values, len(values))
    edges = [0, *sorted(c for c in cuts if c < len(shuffled)), len(shuffled)]
    fragments = [expansion(shuffled[a:b]) for a, b in itertools.pairwise(edges) if a < b]
    joined = expansion([t for fragment in fragments if fragment for t in fragment])
    assert joined is not None and joined[0] == terms[0]


@pytest.mark.parametrize(("values", "expected"), [
    ([0.1] * 10, [1.0, 2.0**-54]),
    ([1e16, 1.0, 1.0, -1e16], [2.0]),
    ([1.0, -1.0], [0.0]),
    ([1e308, 1e308, -1e308], [1e308]),
    ([1e308, 1e308], [math.inf]),
    ([-1e308, -1e308, 5.0], [-math.inf]),
    ([math.inf, -math.inf], [math.nan]),
])
def test_sums_that_fsum_alone_cannot_give_are_still_exact(values: list[float], expected: list[float]) -> None:
    """The running terms of 1e308 + 1e308 - 1e308 pass a double's range although their sum does not; a sum beyond
    it is an infinity, as the reference's is; only infinities of both signs, which no events hold, make NaN."""
    terms = expansion(values)
    assert terms is not None
    assert [t if not math.isnan(t) else "NaN" for t in terms] == [e if not math.isnan(e) else "NaN" for e in expected]
    if all(math.isfinite(v) for v in values):
        assert terms[0] == exact_sum(values)


def test_no_values_have_no_sum() -> None:
    assert expansion([]) is None
