"""A stage is one declaration in a registry and its function: a registry with one more stage than pielake's has it
in the run's steps, in the summary of a run, and in the scheduled DAG's task graph, with nothing else changed."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pielake import vocabulary as V
from pielake.lake.delta import Lake
from pielake.pipeline.job import RunRequest, StageResult, StepContext, timed
from pielake.pipeline.registry import STAGES, Registry, Stage
from pielake.pipeline.runner import run_query
from pielake.query.analyzer import load_query
from pielake.streams import StreamSchema, save_schema
from tests.dags.test_dag_integrity import load_dags
from tests.helpers import FLAGS_QUERY as QUERY
from tests.helpers import drawn, json_lines


def tally(ctx: StepContext) -> StageResult:
    """A stage of this test's own: counts the staged matches, stages nothing."""
    return timed("tally", lambda: {"staged matches": ctx.job.staged(V.MATCHES).count()})


*BEFORE_PUBLISH, PUBLISH = STAGES.stages
REGISTRY = Registry((*BEFORE_PUBLISH, Stage("tally", f"{__name__}:tally", reads=(V.MATCHES,), stages=()), PUBLISH))
BUILD = ("import json\nfrom pathlib import Path\nfrom pielake.orchestration.airflow import build_dags\n"
         f"from {__name__} import REGISTRY\n"
         "dags = build_dags(Path({dags!r}), REGISTRY)\n"
         "print(json.dumps({{i: {{t.task_id: sorted(t.downstream_task_ids) for t in d.tasks}}\n"
         "                   for i, d in dags.items()}}))")


def test_a_stage_declared_in_a_registry_is_a_step_of_the_run_and_of_its_dag(tmp_path: Path,
                                                                           spark: SparkSession) -> None:
    plan = load_query(QUERY, "flags")
    steps = [s.name for s in REGISTRY.steps(plan)]
    assert steps[steps.index("check_matches") + 1:] == ["tally", "publish"]

    save_schema(StreamSchema("Flags", ("key",), "ts", "s", (("key", "STRING"), ("ts", "BIGINT"), ("a", "BOOLEAN"),
                                                           ("b", "BOOLEAN"))), tmp_path / "lake" / "_streams")
    events = tmp_path / "flags.json"
    events.write_text(json_lines(drawn(a="XXX...XX.", b=".XXXX..XX")))
    summary = run_query(Lake(spark, tmp_path / "lake"), plan, "r1", RunRequest(events_path=str(events)),
                        registry=REGISTRY)
    [line] = [line for line in summary.render().splitlines() if line.strip().startswith("tally")]
    assert line.endswith(f"staged matches: {sum(summary.matches.values())}")

    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "flags.tpq").write_text(QUERY)
    graph = load_dags(tmp_path / "airflow", queries, queries, BUILD)["pielake_flags"]
    assert (graph["check_matches"], graph["tally"], graph["publish"]) == (["tally"], ["publish"], [])
