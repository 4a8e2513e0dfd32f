"""What memory this process may use, read as Linux states it: `/proc/self/cgroup` names the process's control
groups, `/sys/fs/cgroup` holds their limits (v2 `memory.max`, v1 `memory/…/memory.limit_in_bytes`), and
`/proc/meminfo` the machine's memory. Each case writes those files as a system of its kind does. Which heap
Java takes from the environment's Java options, over the one its command line gives, is asked of Java itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pielake.engine.memory import MB, allowed_mb, heap_of_environment

GIB = 2**30
MACHINE = "MemTotal:       24684084 kB\nMemFree:        22000000 kB\n"  # 24,105 MB
V1_UNLIMITED = "9223372036854771712"


def system(tmp_path: Path, own: str, limits: dict[str, str], meminfo: str | None = MACHINE) -> int | None:
    """`allowed_mb` on a system whose process lists `own` as its groups, with `limits` ({file under the cgroup
    mount: its text}) and the machine's `meminfo` (None: no such file)."""
    cgroups, proc = tmp_path / "sys/fs/cgroup", tmp_path / "proc"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(own)
    if meminfo is not None:
        (proc / "meminfo").write_text(meminfo)
    for name, text in limits.items():
        (cgroups / name).parent.mkdir(parents=True, exist_ok=True)
        (cgroups / name).write_text(text + "\n")
    return allowed_mb(cgroups, proc / "cgroup", proc / "meminfo")


@pytest.mark.parametrize(("own", "limits", "allowed"), [
    # cgroup v2, a container's group limited, the host's root without a file of its own
    ("0::/kubepods/pod1/box\n", {"kubepods/pod1/box/memory.max": str(2 * GIB)}, 2048),
    # v2: the group unlimited, the one above it limited
    ("0::/kubepods/pod1/box\n", {"kubepods/pod1/box/memory.max": "max", "kubepods/pod1/memory.max": str(GIB)},
     1024),
    # v2 with a cgroup namespace: the process sees its group as the root
    ("0::/\n", {"memory.max": str(3 * GIB)}, 3072),
    # v1, as on a host of Docker before cgroup namespaces: a path the container's mount does not hold, whose
    # root is the container's group
    ("4:memory:/docker/abc\n3:cpu:/docker/abc\n", {"memory/memory.limit_in_bytes": str(GIB + GIB // 4)}, 1280),
    # v1, nested groups, each limit counting
    ("12:pids:/\n4:memory:/jobs/run\n0::/\n", {"memory/jobs/run/memory.limit_in_bytes": V1_UNLIMITED,
                                               "memory/jobs/memory.limit_in_bytes": str(1536 * 2**20),
                                               "memory/memory.limit_in_bytes": V1_UNLIMITED}, 1536),
    # v1 in a combined hierarchy (`memory,cpu`)
    ("4:cpu,memory:/box\n", {"memory/box/memory.limit_in_bytes": str(GIB)}, 1024),
    # no limit anywhere: the machine's memory
    ("4:memory:/process_api/ee13\n0::/\n", {"memory/process_api/ee13/memory.limit_in_bytes": V1_UNLIMITED}, 24_105),
    # a limit above the machine's memory
    ("0::/\n", {"memory.max": str(64 * GIB)}, 24_105),
])
def test_the_memory_a_process_may_use_is_the_least_of_its_groups_limits_and_the_machine_s(
        tmp_path: Path, own: str, limits: dict[str, str], allowed: int) -> None:
    assert system(tmp_path, own, limits) == allowed


def test_a_system_that_states_no_memory_gives_none(tmp_path: Path) -> None:
    assert system(tmp_path, "", {}, meminfo=None) is None


def test_a_limit_alone_is_read_without_the_machine_s_memory(tmp_path: Path) -> None:
    assert system(tmp_path, "0::/\n", {"memory.max": str(GIB)}, meminfo=None) == 1024


def test_this_machine_states_its_memory() -> None:
    """Linux always has /proc/meminfo; the suite runs on Linux."""
    assert (allowed_mb() or 0) > 0


def java_heap(environ: dict[str, str]) -> int:
    """The heap, in bytes, that a JVM given `-Xmx200m` on its command line takes in `environ`, as Java says."""
    said = subprocess.run(["java", "-Xmx200m", "-XX:+PrintFlagsFinal", "-version"], env={**os.environ, **environ},
                          capture_output=True, text=True, timeout=60, check=True).stdout
    return int(next(line.split()[3] for line in said.splitlines() if line.split()[1:2] == ["MaxHeapSize"]))


@pytest.mark.parametrize(("environ", "heap"), [
    ({"_JAVA_OPTIONS": "-Xmx100m -Duser.language=en -Xmx120m"}, "-Xmx120m"),
    ({"JAVA_TOOL_OPTIONS": "-Xmx100m", "_JAVA_OPTIONS": ""}, None),
], ids=["_JAVA_OPTIONS, read after the command line", "JAVA_TOOL_OPTIONS, read before it"])
def test_the_heap_of_the_environment_s_java_options_is_the_one_java_takes_over_its_command_line(
        environ: dict[str, str], heap: str | None) -> None:
    assert heap_of_environment(environ) == heap
    assert java_heap(environ) == (120 if heap else 200) * MB
