"""The words pielake's tables and lake are made of, declared once: status words, table kinds, the public column
names of the result tables (docs/semantics.md §6) and the lake's own folders; and how it counts things in what it
says. The reference, the kernels and the pipeline all read them from here.

Kernel-internal column names (double underscores, never published but in `progress_<query>`) live with the
kernels, in `pielake.spark.columns`.
"""

from __future__ import annotations

import re

from pielake.errors import PielakeError

# ------------------------------------------------------------------ status words

PROVISIONAL, COMPLETE, RETRACTED = "provisional", "complete", "retracted"  # a match (§5)
OPEN, CLOSED = "open", "closed"  # a situation (§2)
PUBLISHED, STOPPED, FAILED = "published", "stopped", "failed"  # a run: published, stopped by a gate, wrong input

# ------------------------------------------------------------------ table kinds: `<kind>_<query or stream>`

EVENTS, QUARANTINE = "events", "quarantine"  # per stream
SITUATIONS, PAIRS, MATCHES, PROGRESS = "situations", "pairs", "matches", "progress"  # per query, published
RESULTS = "results"  # per query: the one table that holds the four published kinds (`pielake.lake.results`)
SCOPE, SEGMENTS = "scope", "segments"  # per query, staged only: a run's keys and cuts, its minterm runs
RUNS = "runs"  # one table for every query's runs

LONGEST_TABLE_NAME = 128
TABLE_NAME = re.compile(rf"[a-z_][a-z0-9_]{{0,{LONGEST_TABLE_NAME - 1}}}")  # a folder name that is a SQL identifier too
# A stream's name is part of its tables' names, the longest `quarantine_<stream>`.
LONGEST_STREAM_NAME = LONGEST_TABLE_NAME - len(f"{QUARANTINE}_")


def table_name(*parts: str) -> str:
    """`events`, `CarSensors` -> `events_carsensors`, refusing anything that is not a plain identifier: table
    names become folder names and SQL identifiers."""
    name = "_".join(p.lower() for p in parts)
    if not TABLE_NAME.fullmatch(name):
        raise PielakeError(f"'{name}' is not a valid table name (lower-case letters, digits and '_', at most "
                           f"{LONGEST_TABLE_NAME} characters)")
    return name


RUN_ID_FORM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.~:+-]{0,249}")


def check_run_id(run_id: str) -> str:
    """Run ids name rows in Delta conditions and files of the lake (a run's log, its records), so they are plain
    tokens: the characters Airflow's default `allowed_run_id_pattern` takes, as many as its run ids hold (250, and
    a run's log `<run_id>.log` stays within a file name's 255 bytes), first a letter or a digit (not `.` or `..`,
    which name folders, nor `-`, which reads as an option)."""
    if not RUN_ID_FORM.fullmatch(run_id):
        raise PielakeError(f"run id '{run_id}' must be letters, digits and _ . ~ : + -, first a letter or a digit "
                           "(at most 250 characters)")
    return run_id


# ------------------------------------------------------------------ public columns of the result tables

SYMBOL = "symbol"
TS = "ts"
TE = "te"
STATUS = "status"
TAKES_PART = "takes_part"
CONSTRAINT_ID = "constraint_id"
RELATION = "relation"
DECIDED_AT = "decided_at"
DETECTED_AT = "detected_at"
COMPLETED_AT = "completed_at"
STARTED_AT = "started_at"  # a match's earliest situation start: where it begins as a row of a matches stream
RUN_ID = "run_id"
REASON = "reason"
RAW = "raw"
KIND, ANCHOR = "kind", "anchor"  # a results table's own columns beside its kinds' structs (`pielake.lake.results`)
TAKEN_BY_RESULTS = frozenset({KIND, ANCHOR, RUN_ID, SITUATIONS, PAIRS, MATCHES, PROGRESS, SYMBOL, TS, TE, STATUS,
                              TAKES_PART, CONSTRAINT_ID, "a_ts", "a_te", "b_ts", "b_te", RELATION, DECIDED_AT,
                              DETECTED_AT, COMPLETED_AT})  # names a key column cannot have: the tables have them


def symbol_ts(symbol: str) -> str:
    """A match's column of `symbol`'s start: `B` -> `b_ts`."""
    return f"{symbol.lower()}_ts"


def symbol_te(symbol: str) -> str:
    return f"{symbol.lower()}_te"


# ------------------------------------------------------------------ the lake's own folders (never tables)

STAGING_DIR = "_staging"  # stage outputs waiting for their gates, between Airflow's tasks
CHECKS_DIR = "_checks"  # the gates' validation results
RUNS_DIR = "_runs"  # each step's record until its run's `runs` row is written, and how the run ended
STREAMS_DIR = "_streams"  # the stream schemas a lake was ingested with
CATALOG_DIR = "_catalog"  # the engine's metastore (the lake's tables for SQL clients)
ENGINE_DIR = "_engine"  # the running engine's address, lock, log and pid
LOCKS_DIR = "_locks"  # one run of a query at a time
LOGS_DIR = "_logs"  # the console of each in-process Spark JVM: launcher, Ivy, log4j
PLOTS_DIR = "_plots"  # the demo's timeline
LANDED_DIR = "_landed"  # the files each run of a query registered with a landing folder took from it
INCOMING_DIR = "_incoming"  # the demo's generated events


# ------------------------------------------------------------------ counts in what pielake says


def counted(count: int, noun: str) -> str:
    """`1 match`, `2 matches`: a count with its noun (`-es` after a hissing end, else `-s`)."""
    plural = f"{noun}es" if noun.endswith(("s", "sh", "ch", "x")) else f"{noun}s"
    return f"{count:,} {noun if count == 1 else plural}"
