"""A run's summary as the terminal shows it (`RunSummary.render`): where its input rows went first, then a line a
stage with its seconds in one column however long a stage's name is (a stage of several constraints is named by
them all), then the gates and the matches by status."""

from __future__ import annotations

from pielake.pipeline.job import StageResult
from pielake.pipeline.runner import RunSummary


def test_the_stages_seconds_stand_in_one_column() -> None:
    stages = (StageResult("ingest", {"rows in": 3, "staged events": 3, "quarantined": 0,
                                      "exact duplicates dropped": 0}, 7.3),
              StageResult("pairs c1, c2, c3", {"pairs_q[c1, c2, c3]": 926}, 1.22),
              StageResult("publish", {"results_q": 12}, 12.5, {"mode": "batch"}))
    lines = RunSummary("r1", stages, (), {"complete": 4}).render().splitlines()
    assert lines[0] == "run r1" and lines[1].startswith("  ingest: 3 rows in")
    shown = lines[2:5]
    assert [line.index(" s   ") for line in shown] == [len("  pairs c1, c2, c3") + 8] * 3, shown
    assert shown[1] == "  pairs c1, c2, c3    1.22 s   pairs_q[c1, c2, c3]: 926"
    assert shown[2].endswith("results_q: 12   (mode: batch)") and lines[-1] == "  matches by status: complete: 4"
