"""Which constraints detection can find a pair of twice: those that the pairs stage must group to remove repeats."""

from __future__ import annotations

import pytest

from pielake.query.analyzer import PairConstraint
from pielake.semantics.relations import RELATIONS
from pielake.spark.pairs import found_twice

ALLEN = frozenset(RELATIONS) - {"followed-by", "follows"}


@pytest.mark.parametrize(("relations", "twice"), [
    (ALLEN, False),  # exclusive relations: one detector each, one pair one relation
    ({"meets", "overlaps", "overlapped-by", "starts", "started-by", "contains"}, False),  # the benchmark's chain
    ({"followed-by", "meets"}, False),
    ({"before", "followed-by"}, True),  # a followed-by pair is also before, found by the range join too
    ({"after", "follows", "during"}, True),
    ({"before", "follows"}, False),  # follows is a specialisation of after, not of before
])
def test_only_a_relation_with_its_specialisation_finds_a_pair_twice(relations: set[str], twice: bool) -> None:
    assert found_twice(PairConstraint("c1", "A", "B", frozenset(relations))) is twice
