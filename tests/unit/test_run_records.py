"""A run's records in the lake's folder (`pielake.pipeline.run_folder`): how a run ended, read back as written and
forgotten when it goes on; and maintenance deletes the records of runs last written over `keep_days` ago, whichever
of their files was written last."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pielake import vocabulary as V
from pielake.pipeline.run_folder import RunEnd, prune_records, record_end, run_end

DAY = 86_400


def test_how_a_run_ended_is_read_back_and_forgotten_when_it_goes_on(tmp_path: Path) -> None:
    assert run_end(tmp_path, "q", "r1") is None
    first = RunEnd("stopped", "check_situations")
    record_end(tmp_path, "q", "r1", first)
    assert run_end(tmp_path, "q", "r1") == first
    assert run_end(tmp_path, "q", "r2") is None and run_end(tmp_path, "other", "r1") is None
    record_end(tmp_path, "q", "r1", None)
    assert run_end(tmp_path, "q", "r1") is None
    time.sleep(0.001)
    record_end(tmp_path, "q", "r1", RunEnd("stopped", "check_situations"))  # a retry that ends it again
    again = run_end(tmp_path, "q", "r1")
    assert again is not None and again != first and (again.status, again.step) == (first.status, first.step)
    ended = tmp_path / V.RUNS_DIR / "q" / "r1" / "ended"
    ended.write_text('{"status": "failed", "step": "ingest"}')  # an end kept without its time
    assert run_end(tmp_path, "q", "r1") == run_end(tmp_path, "q", "r1") == RunEnd("failed", "ingest", at="")


def records(root: Path, run_id: str, *, days_ago: float, last_step_days_ago: float | None = None) -> Path:
    """A run's folder of two step records, written `days_ago`, its second one `last_step_days_ago`."""
    folder = root / V.RUNS_DIR / "q" / run_id
    folder.mkdir(parents=True)
    for name, age in (("ingest.json", days_ago), ("publish.json", last_step_days_ago or days_ago)):
        path = folder / name
        path.write_text("{}")
        os.utime(path, (time.time() - age * DAY, time.time() - age * DAY))
    os.utime(folder, (time.time() - days_ago * DAY, time.time() - days_ago * DAY))
    return folder


def test_maintenance_deletes_the_records_of_runs_last_written_over_keep_days_ago(tmp_path: Path) -> None:
    old = records(tmp_path, "old", days_ago=3)
    retried = records(tmp_path, "retried", days_ago=3, last_step_days_ago=0.5)  # a step written again since
    new = records(tmp_path, "new", days_ago=0.1)
    assert prune_records(tmp_path, "q", keep_days=1) == 1
    assert not old.exists() and retried.exists() and new.exists()
    assert prune_records(tmp_path, "q", keep_days=1) == 0
    assert prune_records(tmp_path, "nothing_ran", keep_days=1) == 0
    assert prune_records(tmp_path, "q", keep_days=0) == 2
    assert not any((tmp_path / V.RUNS_DIR / "q").iterdir())
