"""Spark's scratch space: a folder of each process's own, and what processes that died left in theirs removed.

A local Spark session keeps its shuffle and spilled blocks (`blockmgr-*`), the files it hands its workers
(`spark-*`), Spark Connect's artifacts and Hive's session resources in temporary folders, and deletes them as its
JVM exits. A JVM the system kills (the out-of-memory killer, a container's limit, `kill -9`) deletes nothing, and
what it shuffled stays on the disk (docs/operations.md, "Scratch space"). So each process that builds a session
gives its JVM one folder under `SCRATCH` (Spark's `spark.local.dir` and the JVM's `java.io.tmpdir`) and holds a lock
on it for its life; the next process to build a session removes every folder whose lock no one holds.
`SPARK_LOCAL_DIRS`, which Spark reads before `spark.local.dir`, still decides where the blocks go where it is set (a
larger disk).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import IO

SCRATCH = Path(tempfile.gettempdir()) / f"pielake-scratch-{os.getuid()}"
OWNER = ".owner"  # the file each folder's process holds its lock on
MAKING_SECONDS = 60  # far longer than a folder takes to be made and locked
_held: dict[Path, tuple[Path, IO[str]]] = {}  # root: this process's folder, and the file whose lock it holds


def own_folder(root: Path = SCRATCH) -> Path | None:
    """This process's scratch folder under `root`, made and locked the first time it is asked for, after the folders
    of processes that died are removed; None where `root` cannot be this account's alone (another account made it,
    or the file system refuses), and Spark keeps its own temporary folders."""
    if root in _held:
        return _held[root][0]
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        if root.stat().st_uid != os.getuid() or root.is_symlink():
            return None
        remove_left(root)
        making = Path(tempfile.mkdtemp(prefix=f".{os.getpid()}-", dir=root))
        owner = (making / OWNER).open("w", encoding="utf-8")
        fcntl.flock(owner, fcntl.LOCK_EX)
        folder = making.rename(root / making.name.removeprefix("."))  # named once its lock is held
    except OSError:
        return None
    _held[root] = (folder, owner)
    return folder


def remove_left(root: Path) -> list[Path]:
    """Remove the folders under `root` whose process has ended, as their unheld lock says; returns them."""
    removed = []
    for folder in root.iterdir():
        try:
            ended = folder.is_dir() and not folder.is_symlink() and _ended(folder)
        except OSError:  # named or removed meanwhile, by its own process or another's look
            continue
        if ended:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _ended(folder: Path) -> bool:
    """No process holds `folder`'s lock: its own ended, however it ended, as the kernel then releases it. A folder
    being made (its name starts with a dot until its lock is held) has ended only if it is older than any making
    takes."""
    if folder.name.startswith("."):
        return time.time() - folder.stat().st_mtime > MAKING_SECONDS
    try:
        with (folder / OWNER).open("r", encoding="utf-8") as owner:
            try:
                fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True
    except FileNotFoundError:
        return True
