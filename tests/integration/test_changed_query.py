"""A query whose definition changed after it published (`pielake.pipeline.notes`): a micro-batch of it is
refused, since its tables would hold rows of both definitions; a batch run starts it over, and micro-batches go on
from there. A change of layout or comments is no change."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.pipeline.job import RunRequest
from pielake.pipeline.notes import ChangedQueryError
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import load_query
from pielake.semantics.reference import derive_situations, find_matches
from tests.integration.test_incremental import situation_rows
from tests.integration.test_queries_over_matches import _hand_case, case_lake, events_file
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=60)


def test_a_micro_batch_of_a_changed_query_is_refused_and_a_batch_run_starts_it_over(spark: SparkSession,
                                                                                    tmp_path: Path) -> None:
    case, batches = _hand_case()
    root = tmp_path / "lake"
    lake = case_lake(spark, root, case)
    files = [events_file(root / f"b{i}.json", case, batch) for i, batch in enumerate(batches)]
    first = load_query(case.query, "up")
    run_query(lake, first, "r0", RunRequest(mode="incremental", events_path=files[0], checks=False))
    relaid = load_query("-- the same query, laid out anew\n" + case.query.replace(" DEFINE", "\n  DEFINE"), "up")
    run_query(lake, relaid, "r1", RunRequest(mode="incremental", events_path=files[1], checks=False))

    changed = load_query(case.query.replace("WITHIN 5 s", "WITHIN 3 s"), "up")
    with pytest.raises(ChangedQueryError) as caught:
        run_query(lake, changed, "r2", RunRequest(mode="incremental", events_path=files[2], checks=False))
    assert "query up is not the query that published results_up" in str(caught.value)
    assert "Run it once in batch mode" in str(caught.value)
    assert lake.read("events_s").count() == len(batches[0]) + len(batches[1])  # nothing of the refused batch

    run_query(lake, changed, "r3", RunRequest(checks=False))
    run_query(lake, changed, "r4", RunRequest(mode="incremental", events_path=files[2], checks=False))
    rows = case.kernel_rows(case.rows)
    assert spark_rows(lake.read("matches_up"), changed) == reference_rows(
        find_matches(rows, changed, time_unit_seconds=case.unit), changed)
    assert situation_rows(lake, changed) == sorted((s.key, s.symbol, s.ts, s.te)
                                                   for s in derive_situations(rows, changed))
