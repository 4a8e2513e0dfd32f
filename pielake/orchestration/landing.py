"""Runs when events land: the watcher Airflow's triggerer runs for a query registered with a landing folder.

A query registered with `landing: /landing/cars/*.csv` runs when new files land there, not on a clock. Its
scheduled DAG is scheduled on an Asset whose watcher (`LandingTrigger`) lists the folder every second and
fires when it holds files the query has not taken (`pielake.lake.landed`); the run's first task (`take_landed`)
takes them. A watcher that fires again for the same files (the triggerer restarted) costs a run that takes
nothing and skips.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from pielake.lake.landed import Landing, taken


class LandingTrigger(BaseEventTrigger):
    """Fires when a landing folder holds files a query has not taken, once for each such file: Airflow's triggerer
    runs it as the watcher of the query's landing Asset, so each firing is an Asset event that queues a run. What it
    has fired for lives in its memory only; started again, it fires again for the files still untaken."""

    def __init__(self, *, landing: str, ledger: str, poke_interval: float = 1.0) -> None:
        super().__init__()
        self.landing, self.ledger, self.poke_interval = landing, ledger, poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__name__}",
                {"landing": self.landing, "ledger": self.ledger, "poke_interval": self.poke_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        landing, ledger = Landing.parse(self.landing), Path(self.ledger)
        fired: set[str] = set()
        known: set[str] = set()
        while True:
            waiting, known = await asyncio.to_thread(look, landing, ledger, known)
            new = sorted(waiting - fired)
            if new:
                yield TriggerEvent({"landing": self.landing, "files": new})
            fired = waiting
            await asyncio.sleep(self.poke_interval)


def look(landing: Landing, ledger: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """The names landed and not taken, and the names taken. What a query has taken only grows, so the ledger, a
    file a run ever taken, is read again only when a landed name is not among the `known` taken ones: a look lists
    the landing folder alone while nothing new lands."""
    landed = set(landing.names())
    if landed - known:
        known = taken(ledger)
    return landed - known, known
