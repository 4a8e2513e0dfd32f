"""A query whose definition changed after it published (`pielake.pipeline.notes`): a micro-batch of it is
refused, since its tables would hold rows of both definitions; a batch run starts it over, and micro-batches go on
from there. A change of layout or comments is no change. So it is for a results table that stores a whole-number
column narrower than a run computes it."""

from __future__ import annotations

from pathlib import Path

import pyspark.sql.functions as F
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from pielake.cli import main
from pielake.errors import PielakeError
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest
from pielake.pipeline.notes import ChangedQueryError
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import load_query
from pielake.semantics.reference import derive_situations, find_matches
from pielake.streams import StreamSchema, save_schema
from tests.helpers import drawn, json_lines
from tests.integration.test_incremental import situation_rows
from tests.integration.test_queries_over_matches import _hand_case, case_lake, events_file
from tests.spark.kernels import reference_rows, spark_rows

pytestmark = pytest.mark.heavy(seconds=55)


def test_a_micro_batch_of_a_changed_query_is_refused_and_a_batch_run_starts_it_over(spark: SparkSession,
                                                                                    tmp_path: Path) -> None:
    case, batches = _hand_case()
    root = tmp_path / "lake"
    lake = case_lake(spark, root, case)
    files = [events_file(root / f"b{i}.json", case, batch) for i, batch in enumerate(batches)]
    first = load_query(case.query, "up")
    with pytest.raises(PielakeError, match=r"holds no events of stream \w+ to run it over: give them"):
        run_query(lake, first, "r", RunRequest(checks=False))  # a batch over the lake's events, and it has none
    run_query(lake, first, "r0", RunRequest(mode="incremental", events_path=files[0], checks=False))
    relaid = load_query("-- the same query, laid out anew\n" + case.query.replace(" DEFINE", "\n  DEFINE"), "up")
    run_query(lake, relaid, "r1", RunRequest(mode="incremental", events_path=files[1], checks=False))

    changed = load_query(case.query.replace("WITHIN 5 s", "WITHIN 3 s"), "up")
    with pytest.raises(ChangedQueryError) as caught:
        run_query(lake, changed, "r2", RunRequest(mode="incremental", events_path=files[2], checks=False))
    assert "query up is not the query that published results_up" in str(caught.value)
    assert "Run it once in batch mode" in str(caught.value)
    assert lake.read("events_s").count() == len(batches[0]) + len(batches[1])  # nothing of the refused batch

    (tmp_path / "up.tpq").write_text(changed.source)  # started over as the refusal says: no --events
    again = CliRunner().invoke(main, ["run", str(tmp_path / "up.tpq"), "--lake", str(root), "--no-checks"])
    assert again.exit_code == 0 and "ingest: 0 rows in" in again.output, again.output
    run_query(lake, changed, "r4", RunRequest(mode="incremental", events_path=files[2], checks=False))
    rows = case.kernel_rows(case.rows)
    assert spark_rows(lake.read("matches_up"), changed) == reference_rows(
        find_matches(rows, changed, time_unit_seconds=case.unit), changed)
    assert situation_rows(lake, changed) == sorted((s.key, s.symbol, s.ts, s.te)
                                                   for s in derive_situations(rows, changed))


def test_a_micro_batch_into_a_table_storing_a_whole_number_narrower_is_refused_until_a_batch_run(
        spark: SparkSession, tmp_path: Path) -> None:
    """RETURN's `max(A.i) + max(A.i)` of an INT attribute is a BIGINT; a table that stores it as an INT (as a
    version that computed it in 32 bits published it) would fail the MERGE at the first sum past 2^31, so the
    micro-batch is refused by name before it merges; a batch run rewrites the table as BIGINT."""
    stream = StreamSchema("S", ("key",), "ts", "s", (("key", "STRING"), ("ts", "BIGINT"), ("a", "BOOLEAN"),
                                                     ("b", "BOOLEAN"), ("i", "INT")))
    root = tmp_path / "lake"
    save_schema(stream, root / "_streams")
    lake = Lake(spark, root)
    rows = drawn(a="XX....XX....XX..", b=".XX....XX....XX.")
    for row in rows:
        row["i"] = 5 if row["ts"] < 5 else 2**31 - 1
    batches = [rows[:5], rows[5:10], rows[10:]]
    files = []
    for n, batch in enumerate(batches):
        (tmp_path / f"b{n}.json").write_text(json_lines(batch))
        files.append(str(tmp_path / f"b{n}.json"))
    plan = load_query("FROM S PARTITION BY key DEFINE A AS a, B AS b PATTERN A overlaps B WITHIN 1 h "
                      "RETURN max(A.i) + max(A.i) AS twice, max(A.i) AS hi", "w")
    run_query(lake, plan, "r0", RunRequest(events_path=files[0], checks=False))
    results = lake.path("results_w")
    published = spark.read.format("delta").load(results)
    (published.withColumn("matches", F.col("matches").withField("twice", F.col("matches.twice").cast("int")))
     .write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy("kind").save(results))

    with pytest.raises(ChangedQueryError) as caught:
        run_query(lake, plan, "r1", RunRequest(mode="incremental", events_path=files[1], checks=False))
    assert "results_w stores matches column 'twice' as INT, and this run computes it as BIGINT" in str(caught.value)
    assert "Run the query once in batch mode" in str(caught.value)

    run_query(lake, plan, "r2", RunRequest(checks=False))
    run_query(lake, plan, "r3", RunRequest(mode="incremental", events_path=files[2], checks=False))
    matches = lake.read("matches_w")
    assert spark_rows(matches, plan) == reference_rows(find_matches(rows, plan), plan)
    assert sorted(r.twice for r in matches.collect()) == [10, 2**32 - 2, 2**32 - 2]
    assert dict(matches.dtypes)["twice"] == "bigint"
