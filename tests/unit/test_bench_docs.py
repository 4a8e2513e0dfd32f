"""`pielake bench --docs` writes its figures into a page between the page's markers, and leaves the rest; the
freshness bench lands slices that follow the history, the scheduler bench each under its minute's name."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest

from pielake.bench import engine, freshness, scheduler, soak
from pielake.bench.freshness import ROUTES, Timing
from pielake.bench.pages import markers
from pielake.bench.scheduler import ScheduledRun
from pielake.bench.shapes import Measurement, write_docs
from pielake.errors import PielakeError

BENCH_START, BENCH_END = markers("bench")


def measured(repeat: int, seconds: float) -> Measurement:
    return Measurement("chain", 4, 1000, repeat, 1.0, 0.4, 0.1, 0.1, 0.2, seconds, 0.1, 0.2, 1000 / seconds,
                       round(seconds / 0.1, 2), 1.5, 2.0, 7)


def test_the_figures_replace_the_old_ones_between_the_markers(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(f"# Performance\n\nwhat they mean\n\n{BENCH_START}\nold figures\n{BENCH_END}\n\nthe rest\n")
    write_docs([measured(1, 3.0), measured(2, 1.0), measured(3, 2.0)], page, "pielake bench --events 1000")
    text = page.read_text()
    assert text.startswith("# Performance\n\nwhat they mean\n\n") and text.endswith(f"{BENCH_END}\n\nthe rest\n")
    assert "old figures" not in text and "`pielake bench --events 1000`" in text
    assert "| chain | 4 | 1,000 | 2.00 |" in text  # the median repeat
    assert "![end to end against events and symbols, and where the time goes](bench.png)" in text
    assert (tmp_path / "bench.png").stat().st_size > 0


def test_a_page_without_markers_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# no markers\n")
    with pytest.raises(PielakeError, match="no <!-- bench:start -->"):
        write_docs([measured(1, 1.0)], page, "pielake bench")
    assert page.read_text() == "# no markers\n"


def test_the_freshness_figures_name_each_route_its_median_and_whether_it_meets_its_target(tmp_path: Path) -> None:
    start, end = markers("freshness")
    page = tmp_path / "performance.md"
    page.write_text(f"# Performance\n\n{start}\nold\n{end}\n")
    timings = [Timing(route.name, route.kind, r, seconds, 0.5, seconds + 0.5, 18)
               for r, seconds in enumerate((4.0, 60.0, 5.0), 1) for route in ROUTES]
    freshness.write_docs(timings, 1_000_000, page, "pielake bench --freshness")
    text = page.read_text()
    assert "| CLI, engine | 1,000 events landed → matches readable in SQL | 5.5 | 4.5, 60.5 | ≤ 10 ✓ |" in text
    assert "| whole run, in process | `pielake run` of 1,000,000 events, start to exit | 5.5 |" in text
    assert "(median of 3 rounds" in text and (tmp_path / "freshness.png").stat().st_size > 0


def test_the_freshness_figures_say_how_many_times_faster_each_route_ran_on_the_engine_round_by_round() -> None:
    """Each round's ratio is of that round's two routes; a round that lacks one of them gives none."""
    seconds = {"CLI, in process": (30.0, 45.0), "CLI, engine": (10.0, 9.0), "whole run, in process": (40.0, 50.0),
               "whole run, engine": (10.0, 20.0), "Airflow, engine": (20.0,)}
    timings = [Timing(route, "", r, total, 0.0, total, 18) for route, rounds in seconds.items()
               for r, total in enumerate(rounds, 1)]
    assert freshness.speedups(timings) == [("CLI", [3.0, 5.0]), ("whole run", [4.0, 2.5])]
    assert "round by round: CLI 3.0x, 5.0x; whole run 4.0x, 2.5x." in freshness.summary(timings, 1_000_000)
    assert "times faster" not in freshness.summary(timings[4:6], 1_000_000)  # one side alone


def test_the_landed_slices_follow_the_history_without_a_gap_or_an_overlap(tmp_path: Path) -> None:
    history, slices = freshness.split(tmp_path, 10_000, 2)
    read = [pacsv.read_csv(path) for path in (history, *slices)]
    assert [t.num_rows for t in read] == [10_000, 1_000, 1_000]
    for earlier, later in itertools.pairwise(read):
        for key in range(freshness.KEYS):
            times = [t.filter(pc.equal(t["id"], key))["ts"] for t in (earlier, later)]
            assert pc.max(times[0]).as_py() + 1 == pc.min(times[1]).as_py()


def test_the_scheduler_figures_say_how_many_runs_were_on_time_and_whether_the_schedule_kept_up() -> None:
    due = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    runs = [ScheduledRun(f"scheduled__{due + timedelta(minutes=i)}", due + timedelta(minutes=i),
                         due + timedelta(minutes=i, seconds=start), due + timedelta(minutes=i, seconds=lag),
                         "published") for i, (start, lag) in enumerate(((2, 20), (3, 30), (4, 70)))]
    text = scheduler.summary(runs, 3)
    assert "| 3 of 3 | 30.0 | 70.0 | 2 of 3 ✗ | ✓ |" in text and "publish: 20, 30, 70)" in text  # late, not behind
    assert "| 2 of 3 | 25.0 | 30.0 | 2 of 3 ✗ | ✗ |" in scheduler.summary(runs[:2], 3)
    assert "| 2 of 2 | 25.0 | 30.0 | 2 of 2 ✓ | ✓ |" in scheduler.summary(runs[:2], 2)
    behind = ScheduledRun("scheduled__late", due + timedelta(minutes=3), due + timedelta(minutes=4, seconds=10),
                          due + timedelta(minutes=4, seconds=40), "published")  # it waited for the run before it
    assert "| 4 of 4 | 50.0 | 100.0 | 2 of 4 ✗ | ✗ |" in scheduler.summary([*runs, behind], 4)


def test_the_landing_figures_give_each_file_s_wait_from_landing_to_publish() -> None:
    landed = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    runs = [ScheduledRun(f"asset_triggered__{i}", landed + timedelta(minutes=i),
                         landed + timedelta(minutes=i, seconds=3), landed + timedelta(minutes=i, seconds=lag),
                         "published") for i, lag in enumerate((21, 19, 30))]
    text = scheduler.landing_summary(runs, 4)
    assert "| 3 of 4 | 21.0 | 19.0, 30.0 |" in text and "publish: 21, 19, 30)" in text


def test_the_soak_figures_give_a_row_a_reading_and_how_fast_heap_and_python_grew_over_the_runs() -> None:
    readings = [soak.Reading(0, 400.0, 2000.0, 690.0, 725, 33_485, 0.0),
                soak.Reading(15, 425.0, 2200.0, 722.5, 986, 34_571, 6.5),
                soak.Reading(150, 466.0, 2393.0, 752.0, 954, 34_578, 8.2)]
    text = soak.summary(readings)
    assert "| 0 | 400 | 2000 | 690 | 725 | 33,485 | 0.0 |" in text
    assert "| 150 | 466 | 2393 | 752 | 954 | 34,578 | 8.2 |" in text
    # over the readings after the first: the first runs' compiled code and caches are not growth
    assert ("From 15 to 150 runs (least squares): heap after a full GC +304 MB a thousand runs (readings 425-466 MB), "
            "Python +219 MB a thousand runs, classes +7.") in text
    assert "From" not in soak.summary(readings[:2])  # one reading among the runs: no slope


def test_each_minute_s_slice_lands_under_the_name_airflow_renders_for_that_minute(tmp_path: Path) -> None:
    slices = [tmp_path / f"s{i}.csv" for i in range(2)]
    for i, path in enumerate(slices):
        path.write_text(f"id,ts\n0,{i}\n")
    scheduler.land(slices, datetime(2026, 1, 1, 12, 59, tzinfo=UTC), tmp_path)
    landed = tmp_path / "landing-scheduled"
    # `{{ data_interval_end | ts_nodash }}` of a run due at 13:00 UTC renders as 20260101T130000
    assert (landed / "20260101T130000.csv").read_text() == "id,ts\n0,1\n"
    assert sorted(p.name for p in landed.iterdir()) == ["20260101T125900.csv", "20260101T130000.csv"]


def test_the_engine_figures_give_each_case_both_medians_and_whether_the_engine_is_within_ten_percent(
        tmp_path: Path) -> None:
    start, end = markers("engine")
    page = tmp_path / "performance.md"
    page.write_text(f"# Performance\n\n{start}\nold\n{end}\n")
    fast, slow = engine.Case("chain", 4, 10_000_000), engine.Case("chain", 18, 10_000_000)
    pairs = [engine.Pair(fast, 1, 9.0, 9.9, 181276), engine.Pair(fast, 2, 10.0, 9.0, 181276),
             engine.Pair(fast, 3, 8.0, 8.8, 181276), engine.Pair(slow, 1, 30.0, 34.0, 7)]
    engine.write_docs(pairs, page, "pielake bench --engine")
    text = page.read_text()
    assert "| chain | 4 | 10,000,000 | 9.00 | 9.00 | 1.00 | ✓ | 1.10, 0.90, 1.10 | 181276 |" in text
    assert "| chain | 18 | 10,000,000 | 30.00 | 34.00 | 1.13 | ✗ | 1.13 | 7 |" in text
    assert "`pielake bench --engine`" in text and "old" not in text


# `jcmd <pid> GC.heap_info` of Java 17, as each collector prints it
PARALLEL_HEAP = """ PSYoungGen      total 707072K, used 1254K [0x00000007cbf00000, 0x00000007ffc80000)
  eden space 570368K, 0% used [0x00000007cbf00000,0x00000007cbf00000,0x00000007eec00000)
  from space 136704K, 0% used [0x00000007eec00000,0x00000007eed39800,0x00000007f7180000)
 ParOldGen       total 1335808K, used 317904K [0x0000000763c00000, 0x00000007b5480000, 0x00000007cbf00000)
  object space 1335808K, 23% used [0x0000000763c00000,0x00000007772741b0,0x00000007b5480000)
 Metaspace       used 130278K, committed 138752K, reserved 1179648K
  class space    used 14527K, committed 17536K, reserved 1048576K
"""
G1_HEAP = """ garbage-first heap   total 1048576K, used 402113K [0x0000000763c00000, 0x0000000800000000)
  region size 1024K, 2 young (2048K), 0 survivors (0K)
 Metaspace       used 130278K, committed 138752K, reserved 1179648K
"""


def test_the_soak_reads_the_heap_in_use_over_every_part_of_the_heap_whichever_the_collector() -> None:
    """The throughput collector's young generation, printed first, is nearly empty after a full collection: the
    heap in use is its generations' sum, never Metaspace."""
    assert soak._heap_used_kb(PARALLEL_HEAP) == 1254 + 317904
    assert soak._heap_used_kb(G1_HEAP) == 402113
    assert soak._heap_used_kb("12929:\n") is None
