"""A run's folder in the lake, `<lake>/_runs/<query>/<run_id>/`: what its steps leave for the steps after them and
for its report, as small JSON files. Under Airflow the steps of one run are processes of their own, and its tasks
read these files before they start a step (`pielake.orchestration`), so nothing here imports Spark.

- `<step>.json`, each step's record (`StepRecord`; a retried step overwrites its own), which become the run's row
  of the `runs` table when it ends (`pielake.pipeline.report`);
- `ended`, how the run ended, once it has (`RunEnd`);
- `upstream.read`, what the ingest of a query over matches read of its upstream (`UpstreamRead`);
- `rebuilds`, that a micro-batch recomputes every row as a batch run does (`record_rebuild`).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pielake import vocabulary as V


@dataclass(frozen=True)
class StepRecord:
    """One step of a run: when it started, how long it took, the rows it wrote; a gate's verdict if a gate."""

    step: str
    started_at: datetime
    seconds: float
    rows: dict[str, int] = field(default_factory=dict)
    passed: bool | None = None
    failed: tuple[str, ...] = ()
    report: str | None = None

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "started_at": self.started_at.isoformat()})

    @classmethod
    def from_json(cls, text: str) -> StepRecord:
        data = json.loads(text)
        return cls(**{**data, "started_at": datetime.fromisoformat(data["started_at"]),
                      "failed": tuple(data["failed"])})


def _folder(root: Path, query: str, run_id: str) -> Path:
    return root / V.RUNS_DIR / query / run_id


@dataclass(frozen=True)
class UpstreamRead:
    """What the ingest of a run of a query over matches read of its upstream (`pielake.pipeline.upstream`): the
    version of the upstream's results table, and whether the run rebuilds from all of it. Kept beside the run's
    step records for its later steps, which under Airflow are processes of their own."""

    version: int
    rebuilds: bool


UPSTREAM_READ = "upstream.read"  # not `*.json`: no step's record
REBUILDS = "rebuilds"
ENDED = "ended"  # how the run ended, once it has


@dataclass(frozen=True)
class RunEnd:
    """How a run ended: its status in `runs`, the step it ended at, and when (so that whoever reads it again can
    tell a new end at the same step from the one it read before: `pielake.orchestration.submit`)."""

    status: str
    step: str
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


def _keep(path: Path, kept: Any) -> None:
    """Write the dataclass `kept` as JSON at `path`, in a run's folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(kept)), encoding="utf-8")


def _kept(path: Path) -> dict[str, Any] | None:
    """What `_keep` wrote at `path`, or None if nothing was."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def record_end(root: Path, query: str, run_id: str, end: RunEnd | None) -> None:
    """Keep how the run ended, or forget it (None: the run goes on again)."""
    path = _folder(root, query, run_id) / ENDED
    if end is None:
        path.unlink(missing_ok=True)
    else:
        _keep(path, end)


def run_end(root: Path, query: str, run_id: str) -> RunEnd | None:
    """How the run ended, or None while it has not. A file of the lake's folder, so a spark-submit step reads it
    before it starts Spark."""
    kept = _kept(_folder(root, query, run_id) / ENDED)
    # An end written without its time reads as of no time, the same at every read: not as of now.
    return None if kept is None else RunEnd(**{"at": "", **kept})


def unadmitted_runs(root: Path, query: str, steps: set[str]) -> list[str]:
    """The query's runs that have ended, failed or stopped, at one of `steps` (those before their events are
    admitted, `Registry.before_admission`): what they took from a landing folder is no stream's yet, and the
    query's next run takes it again (`pielake.lake.landed.take`)."""
    ended = {folder.name: run_end(root, query, folder.name) for folder in (root / V.RUNS_DIR / query).glob("*/")}
    return sorted(run for run, end in ended.items() if end is not None and end.status != V.PUBLISHED
                  and end.step in steps)


def record_upstream_read(root: Path, query: str, run_id: str, read: UpstreamRead) -> None:
    _keep(_folder(root, query, run_id) / UPSTREAM_READ, read)


def upstream_read(root: Path, query: str, run_id: str) -> UpstreamRead | None:
    """The run's `UpstreamRead`, or None before its ingest has read the upstream."""
    kept = _kept(_folder(root, query, run_id) / UPSTREAM_READ)
    return None if kept is None else UpstreamRead(**kept)


def prune_records(root: Path, query: str, *, keep_days: float) -> int:
    """Delete the records of the query's runs last written more than `keep_days` ago (`pielake maintain`): a run
    of days ago has long published, stopped or failed, and its row in `runs` holds its steps. Kept, a run a minute
    would leave a dozen files a run in the lake for good. Returns how many runs' records went."""
    cutoff, pruned = time.time() - keep_days * 86_400, 0
    for folder in (root / V.RUNS_DIR / query).glob("*/"):
        written = max((path.stat().st_mtime for path in folder.iterdir()), default=folder.stat().st_mtime)
        if written < cutoff:
            shutil.rmtree(folder)
            pruned += 1
    return pruned


def record_step(root: Path, query: str, run_id: str, record: StepRecord) -> None:
    folder = _folder(root, query, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{record.step}.json").write_text(record.to_json(), encoding="utf-8")


def step_records(root: Path, query: str, run_id: str) -> list[StepRecord]:
    """The run's step records in the order the steps started: files of the lake's folder, which an Airflow task
    reads without Spark (`pielake.orchestration.submit`)."""
    folder = _folder(root, query, run_id)
    found = [StepRecord.from_json(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")]
    return sorted(found, key=lambda r: r.started_at)


def record_rebuild(root: Path, query: str, run_id: str) -> None:
    """Keep that the micro-batch recomputes every row as a batch run does (`pielake.pipeline.stages`), for its later
    steps and for a retry of the step that found it: they run it as a batch (`pielake.pipeline.job.run_mode`)."""
    path = _folder(root, query, run_id) / REBUILDS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def rebuilds(root: Path, query: str, run_id: str) -> bool:
    """Whether `record_rebuild` was kept for the run."""
    return (_folder(root, query, run_id) / REBUILDS).is_file()
