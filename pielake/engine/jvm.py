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
refused, naming the version it holds and how to go on. So is a pyspark that Python finds before pielake's own
(Hadoop distributions often put their Spark's `python/` on `PYTHONPATH`), whose Spark would start in its place;
and `PYSPARK_SUBMIT_ARGS`, a notebook's way of giving spark-submit's arguments to the JVM PySpark starts, which
Spark's launcher reads after pielake's settings, so its `--master` or `--driver-memory` wins over the run's own
(`--master local[2]` would quietly run on YARN), or, without the word `pyspark-shell` last, the JVM does not start;
and, for a session on this machine, a `PYSPARK_PYTHON` that cannot import pielake, which its Python workers run.

Whoever watches a run's JVM (its memory, its class archive, a kill) finds it among the run's descendants, where
Spark's Python workers start and end all the time: so it is looked for among the processes that are still there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, distribution, version
from importlib.util import find_spec
from pathlib import Path

import psutil

from pielake.errors import PielakeError

UTF8_LOCALE = "C.UTF-8"
SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
OWN_SUBMIT_ARGS = "pyspark-shell"  # PySpark's own default: no argument besides those pielake gives
WORKERS_IMPORTS = "import importlib.util as u, sys; sys.exit(not (u.find_spec('pielake') and u.find_spec('pyspark')))"
WORKERS_PYTHON_FIX = (f": unset it for pielake (`env -u PYSPARK_PYTHON pielake …`), or name the Python of pielake's "
                      f"environment ({sys.executable})")
GATEWAY_PORT = "PYSPARK_GATEWAY_PORT"  # set for a Python process whose JVM runs already (spark-submit's driver)


def file_option(option: str, path: Path) -> str:
    """`option` and `path` (`-XX:SharedArchiveFile=` and the archive) as one argument, whatever the path holds."""
    return shlex.quote(f"{option}{path}")


def utf8_locale(environ: Mapping[str, str]) -> dict[str, str]:
    """The locale a JVM started with `environ` is to be given: none where the locale it names (`LC_ALL`, else
    `LC_CTYPE`, else `LANG`) is UTF-8 already, else `LC_ALL=C.UTF-8`."""
    named = next((environ[v] for v in ("LC_ALL", "LC_CTYPE", "LANG") if environ.get(v)), "")
    return {} if re.search(r"utf-?8", named, re.IGNORECASE) else {"LC_ALL": UTF8_LOCALE}


def same_release(held: str | None, wanted: str) -> bool:
    """Whether the version `held` (None: none known) is of the feature release of `wanted`: 4.0.2 of 4.0.1."""
    return held is not None and held.split(".")[:2] == wanted.split(".")[:2]


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
    if same_release(held, wanted):
        return
    what = f"Spark {held}" if held else "no Spark (it has no jars/spark-core_*.jar)"
    raise PielakeError(f"SPARK_HOME={home} is {what}, and pielake runs on Spark {wanted}, whose PySpark starts the "
                       "Spark SPARK_HOME names: unset it for pielake (`env -u SPARK_HOME pielake …`), or point it "
                       f"at a Spark {wanted}")


def check_own_pyspark(environ: Mapping[str, str]) -> None:
    """Refuse a pyspark of another release that Python imports in place of the one installed with pielake: one of
    another folder first on Python's path (`PYTHONPATH` in `environ`, as a rule), checked before anything imports
    it; one of the same feature release (`same_release`) is taken, as `check_spark_home` takes its Spark. The
    archive of the same pyspark within its own folder (`python/lib/pyspark.zip`), which spark-submit puts on its
    driver's path, is pielake's own."""
    found = find_spec("pyspark")
    try:
        own = Path(str(distribution("pyspark").locate_file("pyspark"))).resolve()
    except PackageNotFoundError:  # pyspark not installed as a package: nothing to tell it apart from
        return
    if found is None or found.origin is None or Path(found.origin).resolve().is_relative_to(own):
        return
    package = Path(found.origin).parent
    held, wanted = declared_version(package), version("pyspark")
    if same_release(held, wanted):  # a cluster's own Spark of pielake's release, say: its Spark is one Delta fits
        return
    folder = package.parent
    named = any(entry and Path(entry).resolve() == folder for entry in environ.get("PYTHONPATH", "").split(":"))
    how = ("PYTHONPATH names that folder: unset it for pielake (`env -u PYTHONPATH pielake …`), or leave the folder "
           "out of it") if named else "that folder is on Python's path (sys.path) before pielake's environment"
    raise PielakeError(f"Python imports pyspark {held or '(of no version it declares)'} from {folder}, not "
                       f"pielake's own pyspark {wanted} ({own.parent}), and would start that pyspark's Spark: {how}")


def declared_version(package: Path) -> str | None:
    """The version a pyspark folder declares in its `version.py`, read as text: importing it is what is checked."""
    try:
        text = (package / "version.py").read_text(encoding="utf-8")
    except OSError:  # not there, or inside an archive
        return None
    found = re.search(r"""__version__[^=]*=\s*['"]([^'"]+)['"]""", text)
    return found.group(1) if found else None


def check_submit_args(environ: Mapping[str, str]) -> None:
    """Refuse `PYSPARK_SUBMIT_ARGS` in `environ` other than PySpark's own default where pielake starts a JVM: Spark
    would start with those arguments besides, and in place of, the run's own (module docstring)."""
    given = environ.get(SUBMIT_ARGS, OWN_SUBMIT_ARGS).strip()
    if given in ("", OWN_SUBMIT_ARGS) or GATEWAY_PORT in environ:  # spark-submit started this process's JVM
        return
    raise PielakeError(f"{SUBMIT_ARGS}='{given}' would give the Spark pielake starts other arguments than its own "
                       "(its --master and driver heap win over the run's): unset it for pielake (`env -u "
                       f"{SUBMIT_ARGS} pielake …`); settings every session is to have go in spark-defaults.conf "
                       "(in SPARK_CONF_DIR), which Spark reads beneath pielake's own settings")


def check_workers_python(python: str) -> None:
    """Refuse `python` (`PYSPARK_PYTHON`, as a rule `python3` of a shell's profile) as the interpreter of a local
    session's Python workers where it cannot import pielake and pyspark: every worker starts with pielake's worker
    daemon, and the run would stop at its first Python stage, in Spark's traceback. It is asked once, in a process
    of its own (tens of milliseconds); this process's own interpreter is not asked. Paths are compared as named,
    not resolved: a virtual environment's `python` links to the system's, which has neither."""
    named = shutil.which(python)
    if named is not None and os.path.abspath(named) == os.path.abspath(sys.executable):
        return
    said = f"PYSPARK_PYTHON={python}, which Spark's Python workers run,"
    try:
        found = subprocess.run([python, "-c", WORKERS_IMPORTS], capture_output=True, timeout=60, check=False)
    except OSError as failed:
        raise PielakeError(f"{said} does not run ({failed.strerror}){WORKERS_PYTHON_FIX}") from None
    if found.returncode != 0:
        raise PielakeError(f"{said} does not import pielake and pyspark{WORKERS_PYTHON_FIX}")


def check_spark_environment(environ: Mapping[str, str]) -> None:
    """Refuse an environment (`environ`) in which the Spark pielake starts would not be its own, or not on its own
    arguments (module docstring): checked before the Spark is imported where it can be, so that the refusal is one
    line and not the traceback of another pyspark's import."""
    check_own_pyspark(environ)
    check_spark_home(environ)
    check_submit_args(environ)


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
