"""Progress of a long step: every few seconds, which Spark stage runs and how many of its tasks are done.

Spark's console progress bar is off (`spark.ui.showConsoleProgress`): it redraws one line with carriage returns,
which garbles log files. A step instead says one plain line per interval while Spark is busy, so the same lines
read well in a terminal and in an Airflow task's log (spark-submit's stderr ends up there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

from pyspark.sql import SparkSession

from pielake.environment import number

EVERY_SECONDS = number("PIELAKE_PROGRESS_EVERY", 10, "seconds")


class StageProgress:
    """A context manager: while its block runs, a daemon thread reports the active Spark stages of the session.

    A quiet step (nothing running in Spark, or shorter than one interval) says nothing.
    """

    def __init__(self, spark: SparkSession, step: str, say: Callable[[str], None], every: float = EVERY_SECONDS):
        self.tracker = spark.sparkContext.statusTracker()
        self.step = step
        self.say = say
        self.every = every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, name=f"progress-{step}", daemon=True)

    def __enter__(self) -> StageProgress:
        self.started = time.perf_counter()
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stopped.set()
        self.thread.join()

    def _watch(self) -> None:
        while not self.stopped.wait(self.every):
            for line in self.lines():
                self.say(line)

    def lines(self) -> list[str]:
        """One line per active stage: elapsed time of the step, the stage's id and name, its tasks done."""
        elapsed = time.perf_counter() - self.started
        out = []
        for stage_id in sorted(self.tracker.getActiveStageIds()):
            info = self.tracker.getStageInfo(stage_id)
            if info is None:  # finished between the two calls
                continue
            name = info.name.split(" at ")[0]
            name = "adaptive query stage" if name.startswith("$anonfun") else name  # AQE's stages have no call site
            out.append(f"  {self.step}: {elapsed:.0f} s, Spark stage {stage_id} ({name}): "
                       f"{info.numCompletedTasks}/{info.numTasks} tasks done, {info.numActiveTasks} running")
        return out
