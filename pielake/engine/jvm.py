"""JVM options that name a file, written as Spark's launcher reads an option string.

Spark's launcher splits the driver's option strings (`spark.driver.extraJavaOptions`, `…defaultJavaOptions`) into
the JVM's arguments as bash splits words: at whitespace outside quotes. A path written into one bare would become
two arguments wherever a folder's name holds a space (a lake in `My Lakes/`, a checkout in `Data Projects/`), and
the JVM would take the second for its main class and stop. So each such option is one quoted word.
"""

from __future__ import annotations

import shlex
from pathlib import Path


def file_option(option: str, path: Path) -> str:
    """`option` and `path` (`-XX:SharedArchiveFile=` and the archive) as one argument, whatever the path holds."""
    return shlex.quote(f"{option}{path}")
