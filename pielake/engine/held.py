"""The runs an engine holds between their steps: an Airflow run's stage outputs, kept in the engine's memory from
one task's step to the next.

Airflow sends a run to the engine one step per task (`pielake.orchestration.tasks`). Handed on through the lake's
`_staging/`, each staged output would cost a Delta commit to write and a snapshot to read back, about a second a
table, and a small micro-batch stages six. The engine is one process that outlives the run's tasks, so it keeps
them as a run in one process keeps them (`SessionStaging`), per run: one Spark session its steps share, the
staged outputs, and which steps have run.

The engine may stop between two steps of a run, or be killed in one; then its memory is gone and the next step
resumes the run (`Run.resume`): the earlier steps run again first, from the same inputs, under the same run id.
The steps of one run take turns: they share a session, whose settings a step changes while it runs
(`settings_within`), so Airflow's side-by-side `pairs_c*` tasks are run one after another.

A run's memory is freed when the run ends (published, stopped by a gate, failed for good), when a step of
another run of the same query has run (it held the query's lock, so the first run had ended without its last
step, and no retry of it will come), and when no step of the run has come for `HELD_IDLE_SECONDS`: a run whose
retries Airflow gave up, of a query that is not run again, would otherwise be held until the engine stops. A
run freed so early costs nothing but time: its next step resumes it as after a restart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from pielake.environment import number
from pielake.lake.staging import SessionStaging

# Longer than any pause between two steps of a run that goes on: Airflow's retries wait 10 minutes at most.
HELD_IDLE_SECONDS = number("PIELAKE_HELD_IDLE", 3600, "seconds")


@dataclass(frozen=True)
class RunKey:
    """A run, as the engine knows it: the lake's folder, the query and the run id."""

    lake: str
    query: str
    run_id: str

    @classmethod
    def of(cls, lake: str | Path, query: str, run_id: str) -> RunKey:
        return cls(str(Path(lake).resolve()), query, run_id)

    def same_query(self, other: RunKey) -> bool:
        return (self.lake, self.query) == (other.lake, other.query)


@dataclass
class HeldRun:
    """What the engine keeps of one run between its steps."""

    session: SparkSession
    staging: SessionStaging = field(default_factory=SessionStaging)
    done: set[str] = field(default_factory=set)  # the steps run since this was made (`Run.resume`)
    turn: threading.Lock = field(default_factory=threading.Lock)
    steps: int = 0  # its steps running or waiting for their turn
    used: float = 0.0  # when its last step ended (`HeldRuns.clock`)


class HeldRuns:
    """The runs an engine holds, by `RunKey`."""

    def __init__(self, spark: SparkSession, idle_seconds: float = HELD_IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.spark = spark
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._runs: dict[RunKey, HeldRun] = {}
        self._lock = threading.Lock()

    @contextmanager
    def turn(self, key: RunKey) -> Iterator[HeldRun]:
        """The run `key`, held from now on if it was not, for one step: the run's other steps wait meanwhile.
        Runs idle for longer than `idle_seconds` are freed first."""
        self.release_idle()
        with self._lock:
            held = self._runs.get(key)
            if held is None:
                held = self._runs[key] = HeldRun(self.spark.newSession())
            held.steps += 1
        try:
            with held.turn:
                yield held
        finally:
            with self._lock:
                held.steps -= 1
                held.used = self.clock()

    def release_idle(self) -> None:
        """Free every run no step of which has come for `idle_seconds`. Each is taken out under the lock that a
        step takes to find its run, so a step coming meanwhile finds none and resumes its run afresh."""
        now = self.clock()
        with self._lock:
            idle = [k for k, held in self._runs.items() if not held.steps and now - held.used > self.idle_seconds]
            freed = [self._runs.pop(k) for k in idle]
        for held in freed:
            held.staging.release()

    def release(self, key: RunKey) -> None:
        """Free the run's staged outputs: it is over."""
        with self._lock:
            held = self._runs.pop(key, None)
        if held is not None:
            with held.turn:
                held.staging.release()

    def release_others(self, key: RunKey) -> None:
        """Free every other run of `key`'s query: a step of `key` has held the query's lock, so they are over."""
        with self._lock:
            others = [k for k in self._runs if k != key and k.same_query(key)]
        for other in others:
            self.release(other)

    def held(self) -> list[RunKey]:
        """The runs held now (the engine's status)."""
        self.release_idle()
        with self._lock:
            return list(self._runs)
