"""The benchmark's memory peak counts each process of the run once, and not a JVM's fork that is about to exec."""

from __future__ import annotations

import time

from pielake.bench.shapes import MemoryPeak, resident_sums

GB = 2**30


def test_a_jvm_started_by_the_jvm_shares_its_pages_and_is_not_counted() -> None:
    tree = [(10, 1, False, GB // 10),  # pielake bench
            (11, 10, True, 3 * GB),  # the Spark JVM
            (12, 11, True, 3 * GB),  # the JVM forked to run chmod, not yet exec'd
            (13, 11, False, GB // 10),  # Python worker daemon
            (14, 13, False, GB // 2)]  # a kernel worker
    assert resident_sums(tree) == (3 * GB, 3 * GB + GB // 10 + GB // 10 + GB // 2)


def test_two_jvms_side_by_side_both_count() -> None:
    tree = [(10, 1, False, 100), (11, 10, True, 1000), (12, 10, True, 2000)]
    assert resident_sums(tree) == (3000, 3100)


def test_the_peak_watches_this_process_while_the_block_runs() -> None:
    with MemoryPeak(every=0.01).watching() as peak:
        held = b"x" * (64 * 2**20)  # written, so resident
        time.sleep(0.2)  # a few samples while it is held
    assert peak.total >= len(held) and peak.jvm <= peak.total  # a test run's Spark JVM may be in the tree
