"""A query that runs when events land (`pielake.orchestration.landing`): each run takes the files that landed since
the last one, once each, leaving them where they landed; the watcher Airflow's triggerer runs fires once for each
file no run has taken."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pielake import vocabulary as V
from pielake.errors import PielakeError
from pielake.lake.landed import Landing, held, ledger_of, release, take
from pielake.orchestration.landing import LandingTrigger, look
from pielake.pipeline.registry import STAGES
from pielake.pipeline.run_folder import RunEnd, StepRecord, record_end, record_step, unadmitted_runs
from tests.helpers import land

SHM = Path("/dev/shm")


def names(folder: str | None) -> list[str]:
    """The files a run took, by their path in its folder."""
    return [] if folder is None else sorted(held(Path(folder)))


def test_each_run_takes_the_files_landed_since_the_last_once_each_and_leaves_them_where_they_landed(
        tmp_path: Path) -> None:
    inbox, ledger = tmp_path / "landing", tmp_path / "lake" / "_landed" / "q" / "Flags"
    landing = Landing.parse(f"{inbox}/*.json")
    first = [land(inbox, "a.json"), land(inbox, "b.json")]
    (inbox / ".c.json.part").write_text("half a file")  # still being written
    (inbox / "notes.txt").write_text("not a stream's file")
    taken = take(landing, ledger, "scheduled__2026-11-29T10:00:00+00:00")
    assert taken == f"{ledger}/scheduled__2026-11-29T10_00_00_00_00"  # a path Hadoop takes
    assert names(taken) == ["a.json", "b.json"]
    assert [(Path(taken) / p.name).stat().st_ino for p in first] == [p.stat().st_ino for p in first]

    land(inbox, "d.json")  # lands while the run is retried: the retry takes it too, into the same folder
    assert names(take(landing, ledger, "scheduled__2026-11-29T10:00:00+00:00")) == ["a.json", "b.json", "d.json"]
    assert take(landing, ledger, "asset_triggered__1") is None  # nothing landed since
    (inbox / ".c.json.part").rename(inbox / "c.json")
    assert names(take(landing, ledger, "asset_triggered__2")) == ["c.json"]
    assert sorted(p.name for p in inbox.iterdir()) == ["a.json", "b.json", "c.json", "d.json", "notes.txt"]


def test_a_run_takes_again_what_runs_that_ended_before_admitting_their_events_took(tmp_path: Path) -> None:
    """A run that failed on its input, or was stopped by the events gate, admitted none of what it took: the next
    run takes it, with what landed since; a run that ended later, or published, keeps its take."""
    inbox, lake = tmp_path / "landing", tmp_path / "lake"
    ledger, landing = ledger_of(lake, "q") / "Flags", Landing.parse(f"{tmp_path}/landing/")
    ends = {"refused": RunEnd(V.FAILED, "ingest"), "audited": RunEnd(V.STOPPED, "check_events"),
            "late": RunEnd(V.FAILED, "situations"), "done": RunEnd(V.PUBLISHED, "publish"), "running": None}
    for run, end in ends.items():
        land(inbox, f"{run}.json")
        take(landing, ledger, run)
        record_step(lake, "q", run, StepRecord("ingest", datetime.now(UTC), 1.0))
        record_end(lake, "q", run, end)
    retaken = unadmitted_runs(lake, "q", STAGES.before_admission())
    assert retaken == ["audited", "refused"]
    land(inbox, "new.json")
    assert names(take(landing, ledger, "next", retaken)) == ["audited.json", "new.json", "refused.json"]
    assert sorted(p.name for p in ledger.iterdir()) == ["done", "late", "next", "running"]
    assert take(landing, ledger, "after", retaken) is None  # taken once


def test_files_in_partition_folders_are_taken_once_each_by_their_path_in_the_landing_folder(tmp_path: Path) -> None:
    """A writer that partitions (`day=…/part-0.json`) names files alike in every folder; a subfolder that is no
    partition, and a writer's hidden work folder, are not the landing's files, as Spark does not read them."""
    inbox, lake = tmp_path / "landing", tmp_path / "lake"
    ledger, landing = ledger_of(lake, "q") / "Flags", Landing.parse(f"{inbox}/*.json")
    for folder in ("day=2026-11-30", "day=2026-12-01", "archive", "_temporary/0"):
        land(inbox / folder, "part-0.json")
    land(inbox, "top.json")
    first = take(landing, ledger, "refused")
    assert names(first) == ["day=2026-11-30/part-0.json", "day=2026-12-01/part-0.json", "top.json"]
    land(inbox / "day=2026-12-01", "part-1.json")
    assert look(landing, ledger, set())[0] == {"day=2026-12-01/part-1.json"}

    # A run that took them and ended before admitting its events hands them, paths and all, to the next run.
    assert names(take(landing, ledger, "next", ["refused"])) == [
        "day=2026-11-30/part-0.json", "day=2026-12-01/part-0.json", "day=2026-12-01/part-1.json", "top.json"]
    assert sorted(p.name for p in ledger.iterdir()) == ["next"]
    assert take(landing, ledger, "after") is None
    os.utime(ledger / "next", (time.time() - 3 * 86_400,) * 2)
    assert release(ledger.parent, keep_days=1) == 4


def test_a_lake_on_another_file_system_gets_a_copy_of_each_landed_file(tmp_path: Path) -> None:
    if not SHM.is_dir() or SHM.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system at /dev/shm")
    landed = land(tmp_path / "landing", "a.json", '{"key": "k", "ts": 1}\n')
    with tempfile.TemporaryDirectory(dir=SHM) as lake:
        taken = take(Landing.parse(f"{tmp_path}/landing/"), Path(lake) / "Flags", "r1")
        assert taken is not None and names(taken) == ["a.json"]  # no part of a copy left behind
        copied = Path(taken) / "a.json"
        assert copied.read_text() == landed.read_text() and copied.stat().st_ino != landed.stat().st_ino


def test_maintenance_releases_the_data_of_files_taken_days_ago_and_keeps_their_names(tmp_path: Path) -> None:
    """A hard link holds its file's data: once released, the landed file's space is the system's when the user's
    retention deletes it, and the file is still never taken again."""
    inbox, query = tmp_path / "landing", tmp_path / "lake" / "_landed" / "q"
    landing = Landing.parse(f"{inbox}/*.json")
    old = land(inbox, "old.json", '{"key": "k", "ts": 1}\n')
    days_ago = Path(take(landing, query / "Flags", "r1"))
    os.utime(days_ago, (time.time() - 3 * 86_400,) * 2)
    land(inbox, "new.json", '{"key": "k", "ts": 2}\n')
    today = Path(take(landing, query / "Flags", "r2"))

    assert release(query, keep_days=1) == 1
    assert (days_ago / "old.json").read_text() == "" and old.read_text() == '{"key": "k", "ts": 1}\n'
    assert old.stat().st_nlink == 1  # its data held by the landed file alone
    assert (today / "new.json").read_text() == '{"key": "k", "ts": 2}\n'
    assert take(landing, query / "Flags", "r3") is None  # both still taken
    assert release(query, keep_days=1) == 0


@pytest.mark.parametrize(("setting", "said"), [
    ("landing/*.csv", "is not an absolute path"),
    ("/landing/*/cars.csv", "only the file name may hold wildcards"),
])
def test_a_landing_that_names_no_folder_is_refused_with_an_example(setting: str, said: str) -> None:
    with pytest.raises(PielakeError, match=said):
        Landing.parse(setting)


class Watcher:
    """A trigger run as Airflow's triggerer runs it, its events gathered as they come."""

    def __init__(self, trigger: LandingTrigger) -> None:
        self.events: asyncio.Queue = asyncio.Queue()
        self.task = asyncio.create_task(self._gather(trigger.run()))

    async def _gather(self, events: AsyncIterator) -> None:
        async for event in events:
            await self.events.put(event.payload)

    async def next(self, seconds: float = 2.0) -> dict | None:
        """Its next event, or None if it fires none within `seconds`."""
        try:
            return await asyncio.wait_for(self.events.get(), seconds)
        except TimeoutError:
            return None

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def test_the_watcher_fires_once_for_each_file_no_run_has_taken(tmp_path: Path) -> None:
    inbox, ledger = tmp_path / "landing", tmp_path / "ledger"
    glob = f"{inbox}/*.json"

    async def watch() -> None:
        land(inbox, "a.json")
        watcher = Watcher(LandingTrigger(landing=glob, ledger=str(ledger), poke_interval=0.02))
        assert await watcher.next() == {"landing": glob, "files": ["a.json"]}
        assert await watcher.next(0.3) is None  # waiting for a run: not fired again
        land(inbox, "b.json")
        assert await watcher.next() == {"landing": glob, "files": ["b.json"]}
        take(Landing.parse(glob), ledger, "r1")
        assert await watcher.next(0.3) is None
        (inbox / "a.json").unlink()  # the user's retention, then a file of the same name lands again
        await asyncio.sleep(0.1)
        land(inbox, "a.json")
        assert await watcher.next(0.3) is None  # taken once, by name
        land(inbox, "c.json")
        assert await watcher.next() == {"landing": glob, "files": ["c.json"]}
        await watcher.stop()

        # A watcher started again (the triggerer restarted) fires for what no run has taken, once.
        again = Watcher(LandingTrigger(**LandingTrigger(landing=glob, ledger=str(ledger)).serialize()[1]))
        assert await again.next() == {"landing": glob, "files": ["c.json"]}
        await again.stop()

    asyncio.run(watch())


def test_a_look_reads_the_ledger_only_when_a_name_it_has_not_seen_taken_lands(tmp_path: Path) -> None:
    """A ledger holds a file for every file a query ever took: a look every two seconds lists the landing folder
    alone while nothing new lands."""
    inbox, ledger = tmp_path / "landing", tmp_path / "ledger"
    landing = Landing.parse(f"{inbox}/*.json")
    land(inbox, "a.json")
    take(landing, ledger, "r1")
    waiting, known = look(landing, ledger, set())
    assert (waiting, known) == (set(), {"a.json"})
    shutil.rmtree(ledger)  # were the ledger read again, a.json would be waiting
    assert look(landing, ledger, known) == (set(), {"a.json"})
    land(inbox, "b.json")  # a name not known: the ledger is read again
    assert look(landing, ledger, known) == ({"a.json", "b.json"}, set())
