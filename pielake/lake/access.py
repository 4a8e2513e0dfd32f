"""Who may write a lake: a command that writes one is refused before Spark starts where this account may not, and
one that only reads it (`pielake sql`, `pielake plot`) works where it may only read.

A lake is often shared: written by the account that schedules the runs, read by analysts who may not write it.
A run there would fail deep in its first step (a lock file, a Delta commit) with the operating system's words
only, and a reader would fail before it read anything, on the log Spark writes as it starts.
"""

from __future__ import annotations

import os
import pwd
import tempfile
from pathlib import Path

from pielake import vocabulary as V
from pielake.errors import PielakeError


def check_writable(lake_dir: str) -> None:
    """Refuse a lake this account may not write: its folder (or the folder it would be created in), or one of the
    folders in it (its tables, locks and logs, which a run of another account may have made)."""
    root = Path(lake_dir).resolve()
    existing = _existing(root)
    inside = sorted(p for p in root.iterdir() if p.is_dir()) if existing == root else []
    denied = next((p for p in (existing, *inside) if not _writable(p)), None)
    if denied is not None:
        read = f", or read the lake with `pielake sql --lake {lake_dir}`" if existing == root else ""
        raise PielakeError(f"{_account()} may not write the lake {lake_dir} ({denied} is {_owner(denied)}'s and "
                           "not writable to it): pielake writes its tables, locks and logs there; run this as an "
                           f"account that may{read}")


def log_folder(lake_dir: str) -> Path:
    """Where a command writes Spark's own output: the lake's `_logs/`, or, for a reader who may not write the
    lake, a folder of this account's own in the temporary folder."""
    logs = Path(lake_dir) / V.LOGS_DIR
    if _writable(_existing(logs)):
        return logs
    return Path(tempfile.gettempdir()) / f"pielake-{os.getuid()}" / V.LOGS_DIR


def _existing(path: Path) -> Path:
    """`path`, or the folder nearest it that exists: where it would be created."""
    return next(p for p in (path, *path.parents) if p.exists())


def _writable(folder: Path) -> bool:
    """Whether this account may create files in `folder`."""
    return os.access(folder, os.W_OK | os.X_OK)


def _account() -> str:
    return f"this account ({_name(os.getuid())})"


def _owner(path: Path) -> str:
    return _name(path.stat().st_uid)


def _name(uid: int) -> str:
    """An account's name, or its number where the system lists none (a container's arbitrary user)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
