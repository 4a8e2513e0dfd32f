"""What a JVM pielake starts needs to name files as Python does: options that name a file written as Spark's
launcher reads an option string, and a locale whose charset is UTF-8.

Spark's launcher splits the driver's option strings (`spark.driver.extraJavaOptions`, `…defaultJavaOptions`) into
the JVM's arguments as bash splits words: at whitespace outside quotes. A path written into one bare would become
two arguments wherever a folder's name holds a space (a lake in `My Lakes/`, a checkout in `Data Projects/`), and
the JVM would take the second for its main class and stop. So each such option is one quoted word.

Python names files in UTF-8 under any locale (under C or POSIX its UTF-8 mode), but Java 17 names them in the
charset of the locale it starts in (`sun.jnu.encoding`, which no option sets): under `LC_ALL=C`, as cron jobs,
scripts and slim containers often run, that is ASCII, and a lake in `/data/München` failed its first write
("Malformed input or input contains unmappable characters"). So a JVM started where the locale is not UTF-8 gets
`LC_ALL=C.UTF-8`, and one where it is keeps the user's.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path

UTF8_LOCALE = "C.UTF-8"


def file_option(option: str, path: Path) -> str:
    """`option` and `path` (`-XX:SharedArchiveFile=` and the archive) as one argument, whatever the path holds."""
    return shlex.quote(f"{option}{path}")


def utf8_locale(environ: Mapping[str, str]) -> dict[str, str]:
    """The locale a JVM started with `environ` is to be given: none where the locale it names (`LC_ALL`, else
    `LC_CTYPE`, else `LANG`) is UTF-8 already, else `LC_ALL=C.UTF-8`."""
    named = next((environ[v] for v in ("LC_ALL", "LC_CTYPE", "LANG") if environ.get(v)), "")
    return {} if re.search(r"utf-?8", named, re.IGNORECASE) else {"LC_ALL": UTF8_LOCALE}
