"""What a JVM pielake starts needs to name files as Python does (options that name a file written as Spark's
launcher reads an option string, and a locale whose charset is UTF-8), and to be the Spark pielake runs on.

Spark's launcher splits the driver's option strings (`spark.driver.extraJavaOptions`, `…defaultJavaOptions`) into
the JVM's arguments as bash splits words: at whitespace outside quotes. A path written into one bare would become
two arguments wherever a folder's name holds a space (a lake in `My Lakes/`, a checkout in `Data Projects/`), and
the JVM would take the second for its main class and stop. So each such option is one quoted word.

Python names files in UTF-8 under any locale (under C or POSIX its UTF-8 mode), but Java 17 names them in the
charset of the locale it starts in (`sun.jnu.encoding`, which no option sets): under `LC_ALL=C`, as cron jobs,
scripts and slim containers often run, that is ASCII, and a lake in `/data/München` failed its first write
("Malformed input or input contains unmappable characters"). So a JVM started where the locale is not UTF-8 gets
`LC_ALL=C.UTF-8`, and one where it is keeps the user's.

PySpark starts the Spark that `SPARK_HOME` names, where it is set, rather than its own: machines where Spark was
installed by hand, or another project's, often set it. Spark of another version fails in ways that do not name it
(a launcher that is not there, classes that differ), and Delta's jars fit one Spark, so such a SPARK_HOME is
refused, naming the version it holds and how to go on.

Whoever watches a run's JVM (its memory, its class archive, a kill) finds it among the run's descendants, where
Spark's Python workers start and end all the time: so it is looked for among the processes that are still there.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import psutil

from pielake.errors import PielakeError

UTF8_LOCALE = "C.UTF-8"


def file_option(option: str, path: Path) -> str:
    """`option` and `path` (`-XX:SharedArchiveFile=` and the archive) as one argument, whatever the path holds."""
    return shlex.quote(f"{option}{path}")


def utf8_locale(environ: Mapping[str, str]) -> dict[str, str]:
    """The locale a JVM started with `environ` is to be given: none where the locale it names (`LC_ALL`, else
    `LC_CTYPE`, else `LANG`) is UTF-8 already, else `LC_ALL=C.UTF-8`."""
    named = next((environ[v] for v in ("LC_ALL", "LC_CTYPE", "LANG") if environ.get(v)), "")
    return {} if re.search(r"utf-?8", named, re.IGNORECASE) else {"LC_ALL": UTF8_LOCALE}


def check_spark_home(environ: Mapping[str, str]) -> None:
    """Refuse a `SPARK_HOME` in `environ` that holds another Spark than pyspark's own, by its feature release
    (4.0 takes 4.0.0 and 4.0.2, whose jars Delta's fit alike: a cluster's Spark may be another patch than
    pyspark's): its version is in the name of its `jars/spark-core_<scala>-<version>.jar`."""
    home = environ.get("SPARK_HOME")
    own = find_spec("pyspark")
    if not home or own is None or own.origin is None or Path(home).resolve() == Path(own.origin).parent.resolve():
        return
    wanted = version("pyspark")
    cores = sorted(Path(home, "jars").glob("spark-core_*.jar"))
    held = cores[0].stem.rsplit("-", 1)[-1] if cores else None
    if held is not None and held.split(".")[:2] == wanted.split(".")[:2]:
        return
    what = f"Spark {held}" if held else "no Spark (it has no jars/spark-core_*.jar)"
    raise PielakeError(f"SPARK_HOME={home} is {what}, and pielake runs on Spark {wanted}, whose PySpark starts the "
                       "Spark SPARK_HOME names: unset it for pielake (`env -u SPARK_HOME pielake …`), or point it "
                       f"at a Spark {wanted}")


def spark_jvm(process: psutil.Process) -> psutil.Process | None:
    """The JVM of Spark under `process`, or none while it is not up: not the short-lived JVM of Spark's launcher,
    which only writes the other's command line, and none of the processes that end while they are looked at."""
    for child in process.children(recursive=True):
        try:
            if child.name() == "java" and "org.apache.spark.launcher.Main" not in child.cmdline():
                return child
        except psutil.Error:  # it ended, or is a zombie, since it was listed
            continue
    return None
