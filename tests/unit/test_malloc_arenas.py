"""The engine's Python shares two of glibc's malloc arenas among all its threads (`_cap_malloc_arenas` in
`pielake/engine/server.py`), unless `MALLOC_ARENA_MAX` says otherwise: counted by glibc's own `malloc_info`, in a
process whose eight threads each hold memory at once."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

from tests.helpers import process_env

THREADS = """
import ctypes, ctypes.util, sys, tempfile, threading
from pielake.engine.server import _cap_malloc_arenas
if sys.argv[1] == "engine":
    _cap_malloc_arenas()
together, held = threading.Barrier(8), []
def allocate():
    held.append([bytes(8192) for _ in range(200)])  # past Python's small-object allocator: malloc's
    together.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile("r") as report:
    stream = ctypes.c_void_p(libc.fopen(report.name.encode(), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(report.read().count("<heap nr="))
"""


def arenas(how: str, **env: str) -> int:
    """The malloc arenas of a process whose eight threads allocate at once, started as `how` says, with `env`
    and no other `MALLOC_ARENA_MAX`."""
    inherited = {k: v for k, v in process_env().items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run([sys.executable, "-c", THREADS, how], env={**inherited, **env}, capture_output=True,
                          text=True, check=True, timeout=120)
    return int(done.stdout.strip())


@pytest.mark.skipif(not hasattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_info"),
                    reason="not glibc: no malloc arenas to count")
def test_the_engine_s_threads_share_two_malloc_arenas_unless_malloc_arena_max_says_otherwise() -> None:
    assert arenas("engine") == 2
    assert arenas("plain") > 2  # glibc's default: an arena a thread, up to eight a core
    assert arenas("engine", MALLOC_ARENA_MAX="3") == 3
