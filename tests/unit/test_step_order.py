"""The order of a run's steps as a resumed step reads it (`Registry.before`): every step of an earlier layer, none
of the steps beside it, in either form of a per-constraint stage; and which steps come after the step a run ended
at (`Registry.after`), which then have nothing to do."""

from __future__ import annotations

from pielake.pipeline.registry import STAGES
from pielake.query.analyzer import load_query

CHAIN = """FROM Machines PARTITION BY id
DEFINE A AS a > 0, B AS b > 0, C AS c > 0
PATTERN A meets B AND B overlaps C
WITHIN 10 s"""


def test_a_step_comes_after_every_earlier_layer_and_not_after_the_steps_beside_it() -> None:
    plan = load_query(CHAIN, "chain")

    def before(name: str) -> list[str]:
        return [step.name for step in STAGES.before(plan, name)]

    assert before("ingest") == []
    assert before("pairs_c2") == ["ingest", "check_events", "situations", "check_situations"]
    assert before("pairs") == before("pairs_c1") == before("pairs_c2")
    assert before("matches") == [*before("pairs_c1"), "pairs_c1", "pairs_c2", "check_pairs"]
    assert before("publish") == [s.name for s in STAGES.steps(plan)][:-1]


def test_the_steps_after_the_one_a_run_ended_at_are_those_of_later_layers_and_those_beside_it() -> None:
    plan = load_query(CHAIN, "chain")
    assert STAGES.after(plan, "pairs_c1", "check_situations") and STAGES.after(plan, "publish", "check_events")
    assert STAGES.after(plan, "pairs_c2", "pairs_c1")  # beside the pairs step that failed the run
    assert not STAGES.after(plan, "check_situations", "check_situations")  # the gate's retry checks again
    assert not STAGES.after(plan, "situations", "check_situations")  # a step before it: the run goes on from there
    assert not STAGES.after(plan, "situations", "publish")  # a published run runs again from any step
    assert not STAGES.after(plan, "matches", "no_such_step")
