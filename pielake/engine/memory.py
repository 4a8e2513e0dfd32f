"""How much memory this process may use: the machine's, or less where a container (its control group) limits it.

pielake gives Spark's JVM its heap whole (`-Xmx`), so the JVM's own sizing to its container never applies: a heap
larger than the container allows grows until the kernel kills the JVM in the middle of a run. Where a deployment
does not set the heap, `pielake.engine.settings.driver_heap` sizes it from what this module reads, and a run killed
for memory names the limit it met (`pielake.errors.jvm_lost`). Nothing here imports Spark.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")
OWN_CGROUPS = Path("/proc/self/cgroup")
MEMINFO = Path("/proc/meminfo")
MB = 2**20
# Where no limit is set, cgroup v2 writes `max` and v1 the largest page-aligned 64-bit number: both mean none.
NO_LIMIT = 2**62
# Memory a run's processes use beside Spark's heap: the JVM's own (classes, compiled code, threads, buffers) and
# Python's (the command, Spark's Python workers): in a container of 1,536 MB a run of 10^6 events was killed with a
# heap of 2500m and finished with 900m, and in one of 1,280 MB with 512m (docs/performance.md).
BESIDE_HEAP_MB = 768
# Spark refuses a driver whose JVM holds less than 450 MB (one and a half times the 300 MB it reserves for itself),
# and a JVM given `-Xmx` holds a little less than that: 512m is the smallest round heap it starts with.
SMALLEST_HEAP_MB = 512
LEAST_MB = SMALLEST_HEAP_MB + BESIDE_HEAP_MB  # the least a run fits in


def allowed_mb(cgroups: Path = CGROUPS, own: Path = OWN_CGROUPS, meminfo: Path = MEMINFO) -> int | None:
    """MB this process may use: the smallest of the machine's memory and every memory limit of the control groups
    it runs in (its own and those above it, cgroup v1 or v2); None where the system says neither (not Linux)."""
    limits = [*_cgroup_limits(cgroups, own), _machine_bytes(meminfo)]
    known = [limit for limit in limits if limit is not None]
    return min(known) // MB if known else None


def heap_of_environment(environ: Mapping[str, str] = os.environ) -> str | None:
    """The heap (`-Xmx…`) that `_JAVA_OPTIONS` gives every JVM started here, or None. Java reads that variable
    after its command line, so its last `-Xmx` wins over the heap pielake gives Spark's driver; `JAVA_TOOL_OPTIONS`
    is read before the command line, and its `-Xmx` gives way."""
    heaps = [option for option in environ.get("_JAVA_OPTIONS", "").split() if option.startswith("-Xmx")]
    return heaps[-1] if heaps else None


def _cgroup_limits(cgroups: Path, own: Path) -> Iterator[int | None]:
    """The memory limit of each control group from this process's own up to its hierarchy's root. A container
    whose cgroup namespace is not its own lists a path that its mount does not hold: then the mount's root is the
    container's group, and its limit is read there."""
    try:
        lines = own.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            yield from _limits_up(cgroups, path, "memory.max")
        elif "memory" in controllers.split(","):
            yield from _limits_up(cgroups / "memory", path, "memory.limit_in_bytes")


def _limits_up(root: Path, path: str, name: str) -> Iterator[int | None]:
    group = root / path.lstrip("/")
    while True:
        yield _limit(group / name)
        if group == root or root not in group.parents:
            return
        group = group.parent


def _limit(file: Path) -> int | None:
    try:
        text = file.read_text(encoding="ascii").strip()
    except OSError:  # no such group here, or no memory controller in it
        return None
    return int(text) if text.isdigit() and int(text) < NO_LIMIT else None


def _machine_bytes(meminfo: Path) -> int | None:
    try:
        lines = meminfo.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    total = next((line.split()[1:3] for line in lines if line.startswith("MemTotal:")), None)
    return int(total[0]) * 1024 if total is not None and total[1] == "kB" else None
