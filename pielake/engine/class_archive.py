"""The class archive: the classes a pielake run loads into Spark's JVM, in one file every later JVM maps.

A JVM that starts Spark with Delta loads some ten thousand classes from hundreds of jars, reading, verifying and
linking each, before it runs anything; a process that runs one step and exits (a CLI run in process, an Airflow
task under spark-submit, a test's subprocess) pays that every time. HotSpot's class data sharing keeps them ready:
a JVM started with `-XX:ArchiveClassesAtExit` writes, as it exits, every class it loaded that the JDK's own
archive lacks, and a JVM started with `-XX:SharedArchiveFile` maps them from that file (docs/performance.md has
the measurement). JDK 17 cannot build the archive as a side effect of ordinary runs, so `make setup` builds it
(`python -m pielake.engine.class_archive`): one small batch run and one micro-batch, in a JVM of their own.

An archive fits one Java runtime and one set of Spark's jars: a JVM given one that does not fit starts as it would
without it, so the file's name carries a fingerprint of both (and of Delta's version), and a change of either
makes setup build a new one. `PIELAKE_CLASS_ARCHIVE=0` starts JVMs without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

from pielake.engine.jvm import file_option

ARCHIVE_DIR = Path(sys.prefix) / "share" / "pielake"  # beside the jars it fits: in the environment pielake runs in
QUIET = "-Xlog:cds*=off"  # an archive that does not fit is not an error: the JVM starts as without it


def archive_path() -> Path | None:
    """Where the archive that fits this machine's Java and this environment's Spark and Delta is, or goes; None
    on a machine without Java (one that only plans, such as Airflow's scheduler parsing the DAGs)."""
    java = _java()
    return None if java is None else ARCHIVE_DIR / f"spark-classes-{_fingerprint(java)}.jsa"


def archive_options() -> str:
    """The driver JVM's options that map the archive, when it is built and not turned off; else none."""
    path = None if os.environ.get("PIELAKE_CLASS_ARCHIVE", "1") == "0" else archive_path()
    return f"{file_option('-XX:SharedArchiveFile=', path)} {QUIET}" if path is not None and path.is_file() else ""


def _fingerprint(java: Path) -> str:
    """What the archive depends on: the Java runtime Spark starts (its binary's path, size and time), the jars on
    its class path (pyspark's, by name) and Delta's version."""
    jars = sorted(p.name for p in _pyspark_jars().glob("*.jar"))
    facts = [str(java), str(java.stat().st_size), str(java.stat().st_mtime_ns), version("delta-spark"), *jars]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]


def _pyspark_jars() -> Path:
    """pyspark's jars, found without importing pyspark: the CLI's commands that run no Spark import none."""
    spec = find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed; run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def _java() -> Path | None:
    """The `java` Spark's launcher runs: `$JAVA_HOME/bin/java`, else the first on PATH; None where there is none."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else (Path(w) if (w := shutil.which("java")) else None)
    return found.resolve() if found is not None and found.is_file() else None


def build(say: Callable[[str], None] = print) -> Path:
    """Build the archive unless it is there: a JVM that runs a small batch run and a micro-batch writes it as it
    exits, to a file of its own that then takes the archive's name (a JVM never maps a half-written one)."""
    target = archive_path()
    if target is None:
        raise RuntimeError("no java on PATH and no JAVA_HOME: Spark needs Java 17")
    if target.is_file():
        say(f"class archive: {target} (built before)")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="pielake-classes-") as work:
        _train(Path(work), f"{file_option('-XX:ArchiveClassesAtExit=', partial)} {QUIET}")
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no class archive to {partial}")
    partial.replace(target)
    say(f"class archive: {target} ({target.stat().st_size // 2**20} MB)")
    return target


def _train(work: Path, options: str) -> None:
    """A batch run of a small chain query, then a micro-batch, in a session whose JVM has `options`; the JVM's
    exit awaited, since it writes the archive as it exits."""
    import pyarrow.compute as pc  # noqa: PLC0415 (only setup trains)
    import pyarrow.csv as pacsv  # noqa: PLC0415
    from pyspark import SparkContext  # noqa: PLC0415

    from pielake.bench.queries import chain_query  # noqa: PLC0415
    from pielake.engine.session import build_session, end_jvm  # noqa: PLC0415
    from pielake.lake.delta import Lake  # noqa: PLC0415
    from pielake.pipeline.job import RunRequest  # noqa: PLC0415
    from pielake.pipeline.runner import run_query  # noqa: PLC0415
    from pielake.pipeline.synthetic import keys_table  # noqa: PLC0415
    from pielake.query.analyzer import load_query  # noqa: PLC0415

    events = keys_table([(k, 2_000) for k in range(2)], 3, 7)
    files = [work / "history.csv", work / "landed.csv"]
    pacsv.write_csv(events.filter(pc.less(events["ts"], 1_500)), files[0])
    pacsv.write_csv(events.filter(pc.greater_equal(events["ts"], 1_500)), files[1])
    spark = build_session("local[2]", conf={"spark.driver.extraJavaOptions": options})
    lake, plan = Lake(spark, work / "lake"), load_query(chain_query(3), "train")
    for index, (mode, path) in enumerate(zip(("batch", "incremental"), files, strict=True)):
        run_query(lake, plan, f"train-{index}", RunRequest(mode=mode, events_path=str(path), checks=False))
    gateway = SparkContext._gateway
    spark.stop()
    end_jvm(gateway)
    SparkContext._gateway = SparkContext._jvm = None  # a session built after this one starts a JVM of its own


if __name__ == "__main__":
    build()
