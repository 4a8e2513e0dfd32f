"""Numbers a deployment sets in the environment (`PIELAKE_KEEP_DAYS`, `PIELAKE_LOCK_WAIT`, …), read strictly.

Read where a DAG file, the engine or a run starts, a value that is no number would otherwise stop it with Python's
own words (`could not convert string to float: '1d'`), which name neither the variable nor what it wants.
"""

from __future__ import annotations

import math
import os

from pielake.errors import PielakeError


def number(name: str, default: float, what: str, *, whole: bool = False) -> float:
    """The number the environment variable `name` holds, else `default`: a finite number, at least 0 (a whole one
    where `whole`), or a PielakeError that names the variable, says `what` it counts and how to set it."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if not 0 <= value < math.inf:
        kind = "a whole number" if whole else "a number"
        raise PielakeError(f"{name}='{raw}' is not {kind} of {what} (at least 0); set it as {name}={default:g}, "
                           f"or unset it for {default:g}")
    return value
