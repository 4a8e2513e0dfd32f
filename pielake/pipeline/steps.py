"""The steps of a run, in order, and the spark-submit job that runs each: pure names, no Spark imported.

Airflow parses DAG files often; building a DAG needs the steps of a query but must not start or import Spark.
"""

from __future__ import annotations

from pielake.query.analyzer import QueryPlan

GATED = ("events", "situations", "pairs", "matches")


def step_names(plan: QueryPlan) -> list[str]:
    """ingest, check_events, situations, check_situations, pairs_<c>..., check_pairs, matches, check_matches,
    publish."""
    return ["ingest", "check_events", "situations", "check_situations", *(f"pairs_{c.id}" for c in plan.constraints),
            "check_pairs", "matches", "check_matches", "publish"]


def job_of(step: str) -> tuple[str, list[str]]:
    """The job file (`jobs/<job>.py`) that runs `step`, and the arguments that pick the step inside it."""
    if step.startswith("check_"):
        return "check", ["--gate", step.removeprefix("check_")]
    if step.startswith("pairs_"):
        return "pairs", ["--constraint", step.removeprefix("pairs_")]
    return step, []


def step_of(job: str, *, gate: str | None = None, constraint: str | None = None) -> str:
    """The inverse of `job_of`."""
    return {"check": f"check_{gate}", "pairs": f"pairs_{constraint}"}.get(job, job)
