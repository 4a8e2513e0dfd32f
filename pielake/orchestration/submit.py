"""What an Airflow task of a pielake DAG runs where no engine runs: one step as `spark-submit jobs/step.py --step
<step>`, a Spark application of its own (`SparkSubmitOperator`).

spark-submit tells its operator only whether the step failed, not why; the run's folder in the lake tells the rest
(`pielake.pipeline.run_folder.run_end`). So the task ends as a task on the engine ends (`run_step_on_engine`): a step
after the one its run ended at, or of an ended run cleared without its last step (`skip_if_cleared_alone`), is skipped
before any JVM starts, and a step that ended its run (a failed gate, an input or a query that is wrong) fails for
good, since running it again gives the same answer; any other failure is left to the task's retries. This module
imports Spark's provider, so the DAG file imports it only where a query's steps run with spark-submit
(`pielake.orchestration.airflow._spark_submit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from pielake.engine.client import classic_spark


class ClassicSubmitOperator(SparkSubmitOperator):
    """A spark-submit of one of pielake's jobs, which starts a Spark of its own on the connection's master, in a
    worker whose environment may name an engine for other tasks (`classic_spark`)."""

    def execute(self, context: Any) -> None:
        classic_spark()
        super().execute(context)


class StepSubmitOperator(ClassicSubmitOperator):
    """One step (`step`) of the run `run` of the query in the file `query`, on the lake `lake`, by spark-submit,
    with the settings of the master the task's connection names, as Spark's provider reads it
    (`pielake.engine.settings.master_settings`)."""

    template_fields = (*SparkSubmitOperator.template_fields, "run")

    def __init__(self, *, query: str, lake: str, run: str, step: str, **arguments: Any):
        super().__init__(**arguments)
        self.query, self.lake, self.run, self.step = query, lake, run, step

    def execute(self, context: Any) -> None:
        from pielake.engine.settings import master_settings  # noqa: PLC0415
        from pielake.orchestration.cleared import skip_if_cleared_alone  # noqa: PLC0415
        from pielake.pipeline.run_folder import run_end  # noqa: PLC0415
        from pielake.pipeline.runner import ended  # noqa: PLC0415 (the DAG file's parse imports no Spark)
        from pielake.query.analyzer import load_query_file  # noqa: PLC0415

        plan = load_query_file(self.query)
        over = ended(Path(self.lake), plan, self.run, self.step)
        if over is not None:
            raise AirflowSkipException(over)
        skip_if_cleared_alone(context.get("ti"), self.lake, self.query, self.run, self.step)
        before = run_end(Path(self.lake), plan.name, self.run)
        self.conf = {**(self.conf or {}), **master_settings(self._get_hook()._connection["master"])}
        try:
            super().execute(context)
        except AirflowException as failed:
            end = run_end(Path(self.lake), plan.name, self.run)
            if end is not None and end != before and end.step == self.step:
                raise AirflowFailException(f"step {self.step} ended run {self.run} of {plan.name} ({end.status}): "
                                           f"{self._why(plan.name)}") from failed
            raise

    def _why(self, query: str) -> str:
        """What the step's record says of its end: a wrong input's or query's error, or a gate's failed
        expectations and its report (`pielake.pipeline.run_folder.StepRecord`)."""
        from pielake.pipeline.run_folder import step_records  # noqa: PLC0415

        record = next((r for r in step_records(Path(self.lake), query, self.run) if r.step == self.step), None)
        said = [*record.failed, *([f"report: {record.report}"] if record.report else [])] if record else []
        return "; ".join(said) or "the task's log says why"
