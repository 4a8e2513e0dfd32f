"""Small builders shared by tests: event streams drawn as strings, one character per event; a file landed as
writers land one; a gate's suite extended; a process in another time zone; a free port; the environment of the
processes tests start; the rows a Spark session holds; a page's text as a browser shows it; the lake's engine lock
held as an engine or a command holds it; the Hadoop configuration of a cluster's edge node."""

from __future__ import annotations

import fcntl
import html
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from pyspark.sql import DataFrame, SparkSession

from pielake import vocabulary as V
from pielake.engine.class_archive import archive_path
from pielake.engine.client import ENGINE_LOCK, free_port
from pielake.engine.settings import SHORT_LIVED_JIT

# The query the Airflow and registry tests schedule: two flags of one keyed stream.
FLAGS_QUERY = "FROM Flags F PARTITION BY key DEFINE A AS a, B AS b PATTERN A overlaps; meets B WITHIN 1 min\n"
DELTA_STATE = "Delta Table State"  # how Delta names the snapshot states it caches of the tables it reads

# A JVM a test starts in a process of its own (a `pielake run`, an Airflow step's spark-submit, a cluster's driver)
# lives for one small run, as a micro-batch's does (`SHORT_LIVED_JIT`), whatever the run. The shared session of the
# test run, which lives for all of it, keeps C2: its later runs gain from it.
SHORT_LIVED_JVM = {"SPARK_SUBMIT_OPTS": SHORT_LIVED_JIT}


def json_lines(rows: Iterable[dict[str, Any]]) -> str:
    """Rows as a JSON-lines file's text, as event files are written."""
    return "\n".join(json.dumps(row) for row in rows)


def land(folder: Path, name: str, text: str = "{}\n") -> Path:
    """A file landed as writers land one: written under a hidden name, then renamed (`pielake.lake.landed`)."""
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f".{name}.part"
    part.write_text(text)
    return part.rename(folder / name)


def extend_suite(folder: Path, suite: str, *expectations: dict[str, Any]) -> None:
    """The suite `folder/<suite>.json` with `expectations` added at its end, as a user extends a gate's suite
    (`events`) or writes one stream's or query's own (`events/<stream>`, begun if there is none yet)."""
    path = folder / f"{suite}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"name": suite, "expectations": []}
    spec["expectations"].extend(expectations)
    path.write_text(json.dumps(spec, indent=2), encoding="utf-8")


@contextmanager
def local_zone(zone: str) -> Iterator[None]:
    """This process's own time zone (`TZ`) set to `zone` for the block, as on a machine set to that zone."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def maps_the_class_archive(pid: int) -> bool:
    """Whether the JVM of process `pid` holds the class archive setup built in its memory: a JVM whose class path
    does not fit the archive unmaps it at start, and maps only the JDK's own (which `java.vm.info` calls sharing
    too)."""
    path = archive_path()
    assert path is not None and path.is_file(), "no class archive for this Java and these jars: run `make setup`"
    return str(path) in Path(f"/proc/{pid}/maps").read_text(encoding="utf-8")


def process_env(**extra: str) -> dict[str, str]:
    """This process's environment for a process a test starts: its JVMs tuned for short lives, plus `extra`."""
    return {**os.environ, **SHORT_LIVED_JVM, **extra}


def drawn(key: Any = "k", start: int = 0, **columns: str) -> list[dict[str, Any]]:
    """Events at times start, start+1, ...; column c is True where its string has 'X'.

    >>> drawn(a="X.", b=".X")
    [{'key': 'k', 'ts': 0, 'a': True, 'b': False}, {'key': 'k', 'ts': 1, 'a': False, 'b': True}]
    """
    length = max(len(v) for v in columns.values())
    return [{"key": key, "ts": start + i, **{c: v[i] == "X" if i < len(v) else False for c, v in columns.items()}}
            for i in range(length)]


def held_rdds(spark: SparkSession) -> int:
    """RDDs whose blocks the session holds (pielake's local checkpoints), without the snapshot states Delta caches
    of the tables it has read: those come and go with Delta's own cache, not with a run."""
    held = spark.sparkContext._jsc.getPersistentRDDs()
    return sum(1 for rdd in held.values() if not str(rdd.name()).startswith(DELTA_STATE))


def browser_text(page: Path) -> str:
    """The text a user sees on a local HTML page, from Debian's Chromium run headless (`make browser` installs it):
    the page's DOM once loaded and its scripts run, without scripts and styles, whitespace collapsed."""
    chromium = shutil.which("chromium")
    assert chromium, "no chromium on PATH: `make browser` installs Debian's package"
    shown = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    text = re.sub(r"<[^>]+>", " ", re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", shown))
    return re.sub(r"\s+", " ", html.unescape(text))


def files_read(df: DataFrame) -> list[int]:
    """Collect `df`; the files each of its scans read, from the scans' `numFiles` metric (after Delta's data
    skipping: the files a reader actually opens)."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.finalPhysicalPlan()
    leaves = plan.collectLeaves()
    metrics = [leaves.apply(i).metrics() for i in range(leaves.size())]
    return [m.apply("numFiles").value() for m in metrics if m.contains("numFiles")]


def held_lock(lake: Path, said: str, how: int = fcntl.LOCK_EX) -> TextIO:
    """The lake's engine lock file, open, saying `said`, held `how` by this handle: exclusive as an engine holds it
    for its life, shared as a command holds it for the instant it looks for one."""
    lock = lake / V.ENGINE_DIR / ENGINE_LOCK
    lock.parent.mkdir(exist_ok=True)
    handle = lock.open("a+", encoding="utf-8")
    handle.write(said)
    handle.flush()
    fcntl.flock(handle, how | fcntl.LOCK_NB)
    return handle


def edge_node_hadoop(folder: Path) -> Path:
    """A Hadoop configuration folder (HADOOP_CONF_DIR) as a cluster's edge node has one, whose default filesystem
    is an HDFS (here one that does not answer, tried once): a path without a scheme is read there unless the
    session says otherwise."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = {"fs.defaultFS": f"hdfs://127.0.0.1:{free_port()}", "ipc.client.connect.max.retries": "0"}
    properties = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in settings.items())
    (folder / "core-site.xml").write_text(f'<?xml version="1.0"?><configuration>{properties}</configuration>\n')
    return folder
