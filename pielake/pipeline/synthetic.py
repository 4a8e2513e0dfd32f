"""TPStream's synthetic law (seeds/002 §6, PieStream Figure 4): boolean columns with random true runs.

Per key, events arrive one per time unit (ts = 0, 1, 2, ...). Each column a_i starts with a gap, then alternates
true runs of U[10, 100] events and gaps of U[10, 50] events (bounds inclusive). Everything is vectorised with
numpy and seeded per key and column, so the same arguments always give the same files, whatever the chunking;
keys are written in parallel, one process per core.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

RUN = (10, 100)
GAP = (10, 50)
ROWS_PER_FILE = 2_000_000


def column(length: int, rng: np.random.Generator) -> np.ndarray:
    """One boolean column of `length` events: gap, run, gap, run, ..."""
    pairs = length // (RUN[0] + GAP[0]) + 2
    gaps = rng.integers(GAP[0], GAP[1] + 1, size=pairs)
    runs = rng.integers(RUN[0], RUN[1] + 1, size=pairs)
    lengths = np.column_stack([gaps, runs]).ravel()
    values = np.tile([False, True], pairs)
    return np.repeat(values, lengths)[:length]


def key_table(key: int, events: int, columns: int, seed: int) -> pa.Table:
    data: dict[str, pa.Array] = {"id": pa.array(np.full(events, key, dtype=np.int64)),
                                 "ts": pa.array(np.arange(events, dtype=np.int64))}
    for c in range(1, columns + 1):
        data[f"a_{c}"] = pa.array(column(events, np.random.default_rng([seed, key, c])))
    return pa.table(data)


def generate(out: Path, events: int, *, columns: int = 4, keys: int = 1, seed: int = 42,
             layout: str = "parquet") -> list[Path]:
    """Write `events` events over `keys` keys into `out`; returns the files written.

    layout: "parquet" (id, ts, a_1..a_n) or "csv" (header), or "tpstream-csv": the headerless `id,a_1..a_n,t1,t2`
    layout of the PieStream/TPStream engines, where [t1, t2) = [ts, ts + 1).
    """
    out.mkdir(parents=True, exist_ok=True)
    per_key = [events // keys + (1 if k < events % keys else 0) for k in range(keys)]
    tasks = [(out, key, count, columns, seed, layout) for key, count in enumerate(per_key)]
    if keys == 1:
        return _write_key(tasks[0])
    with ProcessPoolExecutor(max_workers=min(keys, os.cpu_count() or 1)) as pool:
        return [path for paths in pool.map(_write_key, tasks) for path in paths]


def _write_key(task: tuple[Path, int, int, int, int, str]) -> list[Path]:
    out, key, count, columns, seed, layout = task
    table = key_table(key, count, columns, seed)
    return [_write(table.slice(start, ROWS_PER_FILE), out / f"key{key:05d}-part{part:04d}", layout, columns)
            for part, start in enumerate(range(0, count, ROWS_PER_FILE))]


def _write(table: pa.Table, stem: Path, layout: str, columns: int) -> Path:
    if layout == "parquet":
        path = stem.with_suffix(".parquet")
        pq.write_table(table, path)
    elif layout == "csv":
        path = stem.with_suffix(".csv")
        pacsv.write_csv(table, path)
    elif layout == "tpstream-csv":
        path = stem.with_suffix(".csv")
        ts = table.column("ts")
        flags = [table.column(f"a_{c}").cast(pa.int8()) for c in range(1, columns + 1)]
        plain = pa.table({"id": table.column("id"), **{f"a_{c}": f for c, f in enumerate(flags, 1)},
                          "t1": ts, "t2": pa.compute.add(ts, 1)})
        pacsv.write_csv(plain, path, pacsv.WriteOptions(include_header=False))
    else:
        raise ValueError(f"unknown layout {layout}")
    return path
