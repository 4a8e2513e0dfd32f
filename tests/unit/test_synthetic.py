"""TPStream's synthetic law as `pielake generate` writes it, and the benchmark's query shapes."""

from __future__ import annotations

import csv
import os
from dataclasses import replace
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

from pielake.bench.queries import TPSTREAM_QUERIES, shape_query
from pielake.cli import main
from pielake.errors import PielakeError
from pielake.pipeline import synthetic
from pielake.pipeline.synthetic import GAP, RUN, column_types, keys_table, query_events
from pielake.query.analyzer import load_query
from pielake.streams import TIMESTAMP_UNIT, UNIX_TIME, StreamSchema


def runs(flags: np.ndarray) -> list[tuple[bool, int]]:
    edges = np.flatnonzero(np.diff(flags.astype(np.int8))) + 1
    bounds = [0, *edges, len(flags)]
    return [(bool(flags[a]), b - a) for a, b in pairwise(bounds)]


def test_generate_writes_the_law_for_every_key_and_column(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["generate", str(tmp_path / "p"), "--events", "20003", "--columns", "3",
                                       "--keys", "3", "--seed", "7"])
    assert result.exit_code == 0, result.output
    table = ds.dataset(tmp_path / "p").to_table().to_pandas()
    assert len(table) == 20003 and sorted(table["id"].unique()) == [0, 1, 2]
    for _, events in table.groupby("id"):
        assert list(events["ts"]) == list(range(len(events)))  # one event per time unit
        for column in ("a_1", "a_2", "a_3"):
            found = runs(events[column].to_numpy())
            assert found[0][0] is False  # every column starts with a gap
            inner = found[:-1]  # the last run is cut by the end of the stream
            assert all(RUN[0] <= n <= RUN[1] for value, n in inner if value)
            assert all(GAP[0] <= n <= GAP[1] for value, n in inner if not value)
            lengths = {n for _, n in inner}
            assert min(lengths) < 20 and max(lengths) > 60  # the whole range is drawn, not one length


def test_every_key_said_to_be_written_has_events_and_a_seed_is_what_numpy_takes(tmp_path: Path) -> None:
    """Dealt over more keys than there are events, some keys would have none, yet be counted as written."""
    said = CliRunner().invoke(main, ["generate", str(tmp_path), "--events", "10", "--keys", "100"]).output
    assert "100 keys cannot share 10 events: every key has at least one; give --keys 10 or fewer" in said
    assert "-1 is not in the range x>=0" in CliRunner().invoke(
        main, ["generate", str(tmp_path), "--events", "10", "--seed", "-1"]).output
    assert not list(tmp_path.iterdir())
    said = CliRunner().invoke(main, ["generate", str(tmp_path), "--events", "1"]).output
    assert said == f"wrote 1 event (1 key, a_1..a_4) to 1 parquet file in {tmp_path}\n"


def test_the_same_seed_gives_the_same_events_and_another_seed_others(tmp_path: Path) -> None:
    def events(name: str, seed: int) -> list[dict]:
        CliRunner().invoke(main, ["generate", str(tmp_path / name), "--events", "3000", "--keys", "2",
                                  "--seed", str(seed)])
        return ds.dataset(tmp_path / name).to_table().sort_by([("id", "ascending"), ("ts", "ascending")]).to_pylist()

    assert events("a", 1) == events("b", 1) != events("c", 2)


def test_many_short_keys_are_a_few_files_each_key_whole_in_one(tmp_path: Path) -> None:
    """A run opens the files it is given one by one: 2,000 keys of 5 events are at most a file a core, not 2,000
    files, and no key is split between two of them."""
    result = CliRunner().invoke(main, ["generate", str(tmp_path), "--events", "10000", "--keys", "2000",
                                       "--layout", "csv"])
    assert result.exit_code == 0, result.output
    files = sorted(tmp_path.glob("*.csv"))
    assert 1 <= len(files) <= (os.cpu_count() or 1)
    keys = [[int(row["id"]) for row in csv.DictReader(path.open())] for path in files]
    assert [k for ids in keys for k in ids] == sorted(k for k in range(2000) for _ in range(5))
    assert all(a[-1] < b[0] for a, b in pairwise(keys))


def test_a_key_longer_than_a_file_is_split_over_files_in_time_order(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthetic, "ROWS_PER_FILE", 1000)
    CliRunner().invoke(main, ["generate", str(tmp_path), "--events", "2500"])
    files = sorted(tmp_path.glob("*.parquet"))
    assert [f.name for f in files] == [f"keys00000-00000-part000{p}.parquet" for p in range(3)]
    assert [ds.dataset(f).to_table()["ts"].to_pylist() for f in files] == [
        list(range(0, 1000)), list(range(1000, 2000)), list(range(2000, 2500))]


def test_a_key_s_events_are_the_same_whichever_keys_are_drawn_with_it() -> None:
    """Each key is seeded by itself, so how keys are grouped into files changes no event."""
    apart = pa.concat_tables([keys_table([(3, 400)], 3, 11), keys_table([(4, 250)], 3, 11)]).combine_chunks()
    assert keys_table([(3, 400), (4, 250)], 3, 11).equals(apart)
    assert not keys_table([(3, 400), (4, 250)], 3, 12).equals(apart)


def test_the_tpstream_layout_is_headerless_id_flags_t1_t2(tmp_path: Path) -> None:
    CliRunner().invoke(main, ["generate", str(tmp_path), "--events", "100", "--columns", "2", "--layout",
                              "tpstream-csv"])
    [path] = tmp_path.glob("*.csv")
    rows = list(csv.reader(path.open()))
    assert len(rows) == 100 and rows[0][0] == "0" and rows[5][3:] == ["5", "6"]
    assert {r[1] for r in rows} <= {"0", "1"} and rows[0][1:3] == ["0", "0"]


@pytest.mark.parametrize("shape", ["chain", "star", *TPSTREAM_QUERIES])
def test_every_bench_shape_is_a_valid_query_with_its_symbol_count(shape: str) -> None:
    text, symbols = shape_query(shape, 6)
    plan = load_query(text)
    assert len(plan.symbols) == symbols == (6 if shape in ("chain", "star") else 3)
    assert len(plan.constraints) == (5 if shape in ("chain", "star") else 3)


def test_a_sample_writes_its_times_as_its_stream_s_schema_reads_them() -> None:
    """A sample file of a stream whose schema says how its files write times (`time.format`, `time.from`) writes
    them so: a pattern's fields (an optional section in full, a quoted letter as text) in the wall clock of the
    stream's zone, Unix time as seconds, a time made from a date and a time of day cut at the space between them.
    A field a sample does not write is named."""
    at = [datetime(2026, 3, 5, 7, 4, 9, 250_000, tzinfo=UTC)]
    timed = StreamSchema("S", (), "ts", TIMESTAMP_UNIT, (("ts", "TIMESTAMP"),), time_format="dd/MM/yy'T'H:mm[:ss][.SS]")
    assert synthetic.written_times(timed, at)["ts"].to_pylist() == ["05/03/26T7:04:09.25"]
    unix = replace(timed, time_format=UNIX_TIME)
    assert synthetic.written_times(unix, at)["ts"].to_pylist() == [at[0].timestamp()]
    parts = replace(timed, time_format="d.M.yyyy HH:mm:ss", time_from=("Datum", "Uhrzeit"),
                    columns=(("Datum", "STRING"), ("Uhrzeit", "STRING"), ("ts", "TIMESTAMP")))
    written = synthetic.written_times(parts, at)
    assert (written["Datum"].to_pylist(), written["Uhrzeit"].to_pylist()) == (["5.3.2026"], ["07:04:09"])
    assert synthetic.written_times(replace(parts, time_format=None), at)["Datum"].to_pylist() == ["2026-03-05"]
    assert synthetic.written_times(replace(timed, time_format=None), at) == {}
    berlin = synthetic.written_times(replace(parts, time_zone="Europe/Berlin"), at)
    assert (berlin["Datum"].to_pylist(), berlin["Uhrzeit"].to_pylist()) == (["5.3.2026"], ["08:04:09"])
    assert synthetic.written_times(replace(parts, time_zone="-0530"), at)["Uhrzeit"].to_pylist() == ["01:34:09"]
    with pytest.raises(PielakeError, match=r"time\.format 'h:mm a', whose field 'h' it does not write"):
        synthetic.written_times(replace(timed, time_format="h:mm a"), at)


def test_a_column_whose_hour_a_query_reads_is_sampled_as_times_of_every_hour() -> None:
    """`hour(S.at, 'Europe/Berlin')` reads a time: the zone's name beside it is no value of the column, which is
    sampled as a TIMESTAMP, its hours all over the day, so that a predicate on the hour turns true and false."""
    plan = load_query("FROM S PARTITION BY k DEFINE A AS hour(S.at, 'Europe/Berlin') IN (1, 3), B AS S.kind = 'x' "
                      "PATTERN A meets B WITHIN 1 h", "q")
    assert column_types(plan) == {"at": "TIMESTAMP", "kind": "STRING"}
    rows = query_events(plan, 500, keys=2)
    assert len({r["at"].hour for r in rows if r["at"] is not None}) > 12
