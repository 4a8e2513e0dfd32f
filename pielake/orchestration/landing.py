"""Runs when events land: a registered query's landing folder, watched by Airflow's triggerer, and the files each
run takes from it.

A query registered with `landing: /landing/cars/*.csv` runs when new files land there, not on a clock. Its
scheduled DAG is scheduled on an Asset of the folder, whose watcher (`LandingTrigger`) lists the folder every few
seconds and fires when it holds files the query has not taken. The run's first task (`take_landed`) takes every
such file: it links it into a folder of the run's own in the lake, `<lake>/_landed/<query>/<stream>/<run>/`, and
the run's ingest reads that folder. So:

- the landed files stay where they are, for every other query over the stream and for the user's own retention;
- what a query has taken is what its `_landed` folders hold: a file is taken once, by name, and a retried run reads
  the folder its first attempt filled (with what landed since);
- a watcher that fires again for the same files (the triggerer restarted) costs a run that takes nothing and skips.

A file is taken as it is. A writer lands it under a name starting with `.` or `_`, which is never taken, and
renames it once it is complete, as Spark's own writers and most log shippers do.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from pielake.errors import PielakeError

HIDDEN = (".", "_")  # names a writer lands a file under before it is complete; never taken
WILDCARDS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Landing:
    """Where a stream's files land: a folder, and the pattern of the names to take from it."""

    folder: Path
    pattern: str = "*"

    @classmethod
    def parse(cls, setting: str) -> Landing:
        """`/landing/cars/*.csv`, or a folder (`/landing/cars/`: every file in it)."""
        path = Path(setting).expanduser()
        if not path.is_absolute():
            raise PielakeError(f"landing '{setting}' is not an absolute path (e.g. /landing/cars/*.csv)")
        if setting.endswith("/") or path.is_dir():
            return cls(path, "*")
        if WILDCARDS.search(str(path.parent)):
            raise PielakeError(f"landing '{setting}': only the file name may hold wildcards; name a folder and "
                               "a pattern of file names (e.g. /landing/cars/*.csv)")
        return cls(path.parent, path.name)

    def __str__(self) -> str:
        return str(self.folder / self.pattern)

    def files(self) -> list[Path]:
        """The complete files in the folder whose names match, in name order."""
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:  # not created yet: nothing has landed
            return []
        return sorted(Path(e.path) for e in entries
                      if e.is_file() and not e.name.startswith(HIDDEN) and fnmatchcase(e.name, self.pattern))


def taken(ledger: Path) -> set[str]:
    """The names of the files a query has taken from one stream's landing: those in its runs' folders."""
    return {path.name for path in ledger.glob("*/*") if not path.name.startswith(HIDDEN)}


def untaken(landing: Landing, ledger: Path) -> list[Path]:
    """The landed files a query has not taken yet."""
    done = taken(ledger)
    return [path for path in landing.files() if path.name not in done]


def run_folder(ledger: Path, run_id: str) -> Path:
    """A run's folder of taken files. Airflow's run ids hold `:` and `+`, which Hadoop's paths refuse."""
    return ledger / re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)


def take(landing: Landing, ledger: Path, run_id: str) -> str | None:
    """Take every untaken file into the run's folder. Returns the run's files as the run reads them (its folder
    and the landing's pattern, whose suffix names their format), or None when the run has taken nothing. A file is
    hard-linked (no copy, and atomic), or copied under a hidden name and renamed where the lake is on another file
    system."""
    folder = run_folder(ledger, run_id)
    for path in untaken(landing, ledger):
        folder.mkdir(parents=True, exist_ok=True)
        _link(path, folder / path.name)
    held = folder.is_dir() and any(not p.name.startswith(HIDDEN) for p in folder.iterdir())
    return str(folder / landing.pattern) if held else None


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:  # another file system, or one without hard links
        part = target.with_name(f".{target.name}.part")
        shutil.copyfile(source, part)
        part.replace(target)


class LandingTrigger(BaseEventTrigger):
    """Fires when a landing folder holds files a query has not taken, once for each such file: Airflow's triggerer
    runs it as the watcher of the query's landing Asset, so each firing is an Asset event that queues a run. What it
    has fired for lives in its memory only; started again, it fires again for the files still untaken."""

    def __init__(self, *, landing: str, ledger: str, poke_interval: float = 2.0) -> None:
        super().__init__()
        self.landing, self.ledger, self.poke_interval = landing, ledger, poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__name__}",
                {"landing": self.landing, "ledger": self.ledger, "poke_interval": self.poke_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        landing, ledger = Landing.parse(self.landing), Path(self.ledger)
        fired: set[str] = set()
        while True:
            waiting = {path.name for path in await asyncio.to_thread(untaken, landing, ledger)}
            new = sorted(waiting - fired)
            if new:
                yield TriggerEvent({"landing": self.landing, "files": new})
            fired = waiting
            await asyncio.sleep(self.poke_interval)
