"""Spark's Python worker daemon, started with the runs kernel's imports done (`spark.python.daemon.module`).

Spark runs Python tasks in workers that one daemon process forks, and stops a worker that has been idle for a
minute. A freshly forked worker imports what its task's function needs: for the runs kernel (`mapInArrow`) that is
pielake's kernel module with numpy, pyarrow and pandas, 2-5 s on this machine, paid by the first wave of the
kernel's tasks of every run that comes a minute or more after the previous one (every scheduled micro-batch, every
run of a benchmark). Imported here, before the daemon forks, every worker starts with them loaded.

The daemon writes its port to standard output, so nothing imported here may print.
"""

from pyspark.daemon import manager

import pielake.spark.runs  # noqa: F401  (the kernel, and numpy, pyarrow and pandas with it)

if __name__ == "__main__":
    manager()
