"""The steps of a run, in order, and the spark-submit job that runs each: pure names, no Spark imported.

Airflow parses DAG files often; building a DAG needs the steps of a query but must not start or import Spark.
"""

from __future__ import annotations

from pielake.query.analyzer import QueryPlan

GATED = ("events", "situations", "pairs", "matches")


def step_names(plan: QueryPlan, *, parallel: bool = True) -> list[str]:
    """ingest, check_events, situations, check_situations, pairs_<c>..., check_pairs, matches, check_matches,
    publish.

    `parallel`: one PiePair step per constraint, for an orchestrator to run side by side; otherwise one `pairs`
    step detects them all in one Spark plan (a run in one process: one pass and one write instead of one each).
    """
    pairs = [f"pairs_{c.id}" for c in plan.constraints] if parallel else ["pairs"]
    return ["ingest", "check_events", "situations", "check_situations", *pairs, "check_pairs", "matches",
            "check_matches", "publish"]


PICKED_BY = {"check": "--gate", "pairs": "--constraint"}  # jobs that run one of several steps


def split_step(step: str) -> tuple[str, str]:
    """`check_pairs` -> ("check", "pairs"), `pairs_c1` -> ("pairs", "c1"), `ingest` -> ("ingest", "")."""
    for job in PICKED_BY:
        if step.startswith(f"{job}_"):
            return job, step.removeprefix(f"{job}_")
    return step, ""


def job_of(step: str) -> tuple[str, list[str]]:
    """The job file (`jobs/<job>.py`) that runs `step`, and the arguments that pick the step inside it."""
    job, picked = split_step(step)
    return job, [PICKED_BY[job], picked] if job in PICKED_BY else []


def step_of(job: str, *, gate: str | None = None, constraint: str | None = None) -> str:
    """The inverse of `job_of`."""
    return {"check": f"check_{gate}", "pairs": f"pairs_{constraint}"}.get(job, job)
