"""The files a query registered with a landing folder takes from it (`pielake.orchestration.landing` runs it):
each run's take, and what the query has taken.

A run takes every file that landed since the last run by linking it into a folder of the run's own in the lake,
`<lake>/_landed/<query>/<stream>/<run>/`, which the run's ingest reads. So:

- the landed files stay where they are, for every other query over the stream and for the user's own retention;
- what a query has taken is what its `_landed` folders hold: a file is taken once, by name, and a retried run reads
  the folder its first attempt filled (with what landed since);
- a link holds its file's data until maintenance releases it (`release`), keeping its name.

A file in a partition folder of the landing folder (`day=2026-01-01/part-0.parquet`, as Spark, Hive and pyarrow
write a table, and many log shippers a stream) is taken too, keeping its path within the folder: a file is known
by that path, and its partition's value is a column of its rows, as when a folder is read
(`pielake.lake.inputs.folder_files`).

A file is taken as it is. A writer lands it under a name starting with `.` or `_`, which is never taken, and
renames it once it is complete, as Spark's own writers and most log shippers do.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from pielake import vocabulary as V
from pielake.errors import PielakeError
from pielake.lake.inputs import folder_files

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

    def names(self) -> list[str]:
        """The complete files in the folder and its partition folders whose names match, by their path in the
        folder (`day=2026-01-01/part-0.parquet`), in that order. A name starting with `.` or `_` is a file a
        writer has not completed, and is never taken. The watcher looks every second at a folder that may hold
        months of partitions, so a look builds names alone (`held_names`)."""
        return [name for name in held_names(self.folder) if fnmatchcase(os.path.basename(name), self.pattern)]

    def files(self) -> dict[str, Path]:
        """`names`, each with its path."""
        return {name: self.folder / name for name in self.names()}


def held_names(folder: Path) -> list[str]:
    """The files a folder holds as Spark reads it (`folder_files`), by their path in it, in that order; none if it
    is missing. Each walked path starts with the folder's own, so its name is what follows, cut from it: making
    each path relative (`os.path.relpath`) and a `Path` was most of a look's time (docs/performance.md)."""
    start = len(os.path.join(str(folder), ""))
    return [file[start:] for file in folder_files(str(folder))]


def held(folder: Path) -> dict[str, Path]:
    """`held_names`, each with its path."""
    return {name: folder / name for name in held_names(folder)}


def ledger_of(lake_root: Path, query: str) -> Path:
    """Where a query keeps the files its runs took, a folder a stream, in it a folder a run."""
    return lake_root / V.LANDED_DIR / query


def taken(ledger: Path) -> set[str]:
    """The files a query has taken from one stream's landing, by their path in it: those in its runs' folders."""
    return {name for run in _runs(ledger) for name in held_names(run)}


def untaken(landing: Landing, ledger: Path) -> dict[str, Path]:
    """The landed files a query has not taken yet, by their path in the landing folder."""
    done = taken(ledger)
    return {name: path for name, path in landing.files().items() if name not in done}


def run_folder(ledger: Path, run_id: str) -> Path:
    """A run's folder of taken files. Airflow's run ids hold `:` and `+`, which Hadoop's paths refuse."""
    return ledger / re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)


def take(landing: Landing, ledger: Path, run_id: str, retaken: Collection[str] = ()) -> str | None:
    """Take every untaken file into the run's folder, at its path in the landing folder, and the files of the runs
    `retaken` names, which ended before their events were admitted
    (`pielake.pipeline.run_folder.unadmitted_runs`: a file of the wrong format, a query that did not fit) and so
    would otherwise be read by no run: moved into this run's folder. Returns the run's folder, which the run reads
    as a folder (the files' suffixes name their format), or None when the run has taken nothing. A file is
    hard-linked (no copy, and atomic), or copied under a hidden name and renamed where the lake is on another
    file system."""
    folder = run_folder(ledger, run_id)
    for earlier in {run_folder(ledger, run) for run in retaken} - {folder}:
        for name, path in held(earlier).items():
            path.replace(_place(folder / name))
        shutil.rmtree(earlier, ignore_errors=True)
    new = untaken(landing, ledger)
    for name, path in new.items():
        _link(path, _place(folder / name))
    if new:
        os.utime(folder)  # a run's folder is as old as its last take (`release`), wherever in it a file went
    return str(folder) if held_names(folder) else None


def take_each(landings: dict[str, Landing], query_ledger: Path, run_id: str,
              retaken: Collection[str] = ()) -> dict[str, str]:
    """Each stream's take (`take`) into the query's ledger: the files each stream's run reads, by stream; a
    stream that took none left out."""
    taken = {stream: take(landing, query_ledger / stream, run_id, retaken) for stream, landing in landings.items()}
    return {stream: files for stream, files in taken.items() if files}


def _runs(ledger: Path) -> list[Path]:
    """A stream's ledger's run folders."""
    return [entry for entry in ledger.iterdir() if entry.is_dir()] if ledger.is_dir() else []


def _place(target: Path) -> Path:
    """`target`, its folder made."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:  # another file system, or one without hard links
        part = target.with_name(f".{target.name}.part")
        shutil.copyfile(source, part)
        part.replace(target)


def release(query_ledger: Path, *, keep_days: float) -> int:
    """Release the data of the files runs took more than `keep_days` ago, keeping their names: each becomes an
    empty file, so that it is never taken again, and the landed file's space is the system's once the user's
    retention deletes it (a hard link would hold it). A run's folder is as old as its last take; a run of days ago
    has long published or failed for good. Returns how many files were released."""
    cutoff, released = time.time() - keep_days * 86_400, 0
    for folder in query_ledger.glob("*/*/"):
        if folder.stat().st_mtime >= cutoff:
            continue
        for path in held(folder).values():
            if path.stat().st_size:
                path.unlink()  # not a truncation: that would empty the landed file it is a link of
                path.touch()
                released += 1
    return released
