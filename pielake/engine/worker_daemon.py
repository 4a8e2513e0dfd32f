"""Spark's Python worker daemon, started with the runs kernel's imports done (`spark.python.daemon.module`).

Spark runs Python tasks in workers that one daemon process forks, and stops a worker that has been idle for a
minute. A freshly forked worker imports what its task's function needs: for the runs kernel (`mapInArrow`) that is
pielake's kernel module with numpy, pyarrow and pandas, seconds of CPU, paid by the first wave of the
kernel's tasks of every run that comes a minute or more after the previous one (every scheduled micro-batch, every
run of a benchmark). Imported here, before the daemon forks, every worker starts with them loaded.

A worker also paid at the start of every task. pyspark calls `importlib.invalidate_caches()` there, and Python
3.11's zip importer answers it by reading its archive's directory again, whether the archive changed or not.
Spark puts zip archives first on the workers' path (pyspark.zip, py4j's zip, the spark-core jar, the jars of
`spark.jars.packages`: Delta's hold thousands of entries), every module lookup leaves an importer for each of them
cached, and one archive may have several (one per package imported from it), so every task paid for reading them
all again, a large share of a kernel task's CPU. Here zip importers read a directory again
only when the archive's size or modification time has changed (`ArchiveImporter`).

The daemon writes its port to standard output, so nothing imported here may print.
"""

import os
import sys
import zipimport


def _stamp(archive: str) -> tuple[int, int] | None:
    try:
        status = os.stat(archive)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


class ArchiveImporter(zipimport.zipimporter):
    """Python's zip importer, except that invalidating its cache reads the archive again only if it changed."""

    def __init__(self, path: str):
        super().__init__(path)
        self._stamp = _stamp(self.archive)

    def invalidate_caches(self) -> None:
        stamp = _stamp(self.archive)
        if stamp != self._stamp:
            self._stamp = stamp
            super().invalidate_caches()


def use_archive_importer() -> None:
    """Put `ArchiveImporter` in the zip importer's place among the path hooks, and forget the importers cached so
    far (those of the module lookups that started this process), so that each is made again as one."""
    sys.path_hooks[:] = [ArchiveImporter if hook is zipimport.zipimporter else hook for hook in sys.path_hooks]
    for entry, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter) and not isinstance(finder, ArchiveImporter):
            del sys.path_importer_cache[entry]


if __name__ == "__main__":
    use_archive_importer()
    from pyspark.daemon import manager  # found through the new importers

    import pielake.spark.runs  # noqa: F401  (the kernel, and numpy, pyarrow and pandas with it)

    manager()
