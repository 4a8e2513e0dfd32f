"""Numbers a deployment sets in the environment (`PIELAKE_KEEP_DAYS`, `PIELAKE_LOCK_WAIT`, …), read strictly.

Read where a DAG file, the engine or a run starts, a value that is no number would otherwise stop it with Python's
own words (`could not convert string to float: '1d'`), which name neither the variable nor what it wants.
"""

from __future__ import annotations

import math
import os

from pielake.errors import PielakeError

# The longest span of time a setting gives (a wait, a timeout, a retention): a hundred years. No longer one fits
# every clock it reaches (Python's timers hold 292 years, a `timedelta` 2.7 million, Delta's intervals 292,000),
# and an overflow found there stops a task, a DAG file or a maintenance run with the clock's words, not the
# setting's.
LONGEST_SPAN_DAYS = 36_500
SPAN_UNITS = {"seconds": 86_400, "minutes": 1_440, "days": 1}  # how many of each a day holds


def longest(unit: str) -> float:
    """The longest span of time a setting counted in `unit` (one of `SPAN_UNITS`) gives."""
    return LONGEST_SPAN_DAYS * SPAN_UNITS[unit]


def number(name: str, default: float, what: str, *, whole: bool = False) -> float:
    """The number the environment variable `name` holds, else `default`: a finite number, at least 0 (a whole one
    where `whole`), at most `longest(what)` where `what` is a unit of time, or a PielakeError that names the
    variable, says `what` it counts and how to set it."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    most = longest(what) if what in SPAN_UNITS else math.inf
    if not (math.isfinite(value) and 0 <= value <= most):
        kind = "a whole number" if whole else "a number"
        bound = "at least 0" if most == math.inf else f"from 0 to {most:,.0f}, a hundred years"
        raise PielakeError(f"{name}='{raw}' is not {kind} of {what} ({bound}); set it as {name}={default:g}, "
                           f"or unset it for {default:g}")
    return value
