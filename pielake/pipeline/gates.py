"""Data-quality gates: the Great Expectations suites of `expectations/`, run on a stage's staged output.

Write, audit, publish: a stage writes to `_staging/`, its gate validates that DataFrame (and only reads), and only
a run whose gates all passed is published. A failed gate raises `GateError`; the published tables stay as they
were. Each gate is a Checkpoint of the lake's GX project (`pielake.pipeline.gx_project`): its result is kept there
and shown in the project's Data Docs, under the run id.

A gate asks GX for the verdict alone first (`BOOLEAN_ONLY`: no example values collected, so less than half the
Spark jobs), which is all a passing gate needs; only a gate that fails is validated again in `SUMMARY` detail,
under the same run identifier, so its result (and Data Docs page) is replaced by one that names the unexpected
counts and values.

The suites are JSON files a user can read and extend, in GX's own form: `expectations/<gate>.json` is every
query's, `expectations/<gate>/<stream or query>.json` one stream's or query's own (`suite_files`). Query values
(the symbols, the constraint ids) are GX suite parameters (`{"$PARAMETER": "symbols"}`), given at each run. Column
names are not parameters in GX (an expectation is built with its column), so the columns a query names are written
into the query's suite: `"$each_key"` makes one expectation per key column, `"$natural_key"`, `"$time"`,
`"$each_column"` and its `"$type"` name the stream's or table's columns. Properties that relate several columns or
rows (an interval is ordered, the named relation holds on the endpoints, a match fits its window) are computed
here as boolean check columns (`__name`) from the same semantics code the kernels and the reference use, and the
suites expect them to be true.
"""

from __future__ import annotations

import difflib
import importlib
import json
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import types as T

from pielake import vocabulary as V
from pielake.engine.settings import docs_runs, driver_gate_rows
from pielake.errors import PielakeError
from pielake.exitcodes import EXIT_FINDINGS
from pielake.pipeline import gx_project
from pielake.pipeline.job import QueryJob
from pielake.pipeline.scope import derived_tables
from pielake.semantics.relations import RELATIONS
from pielake.spark.pairs import by_constraint
from pielake.spark.query import case_on
from pielake.streams import TIMESTAMP_UNIT, StreamSchema, named_file

EXPECTATIONS_DIR = Path(__file__).resolve().parents[2] / "expectations"
NAMED_COLUMNS = ("column", "column_A", "column_B")  # GX's arguments that name one column of an expectation


class SuiteError(PielakeError):
    """A suite of `expectations/` that GX cannot run as written: refused where it is read, before it checks
    anything, naming its file and the expectation."""


class GateError(PielakeError):
    """A stage's output broke its suite; nothing of the run was published."""

    exit_code = EXIT_FINDINGS

    def __init__(self, result: GateResult):
        super().__init__(result.text())
        self.result = result


@dataclass(frozen=True)
class GateResult:
    gate: str
    success: bool
    evaluated: int
    failed: tuple[str, ...]
    report: Path  # the result's page in the lake's Data Docs
    own_files: tuple[str, ...] = ()  # the suite files of this stream or query alone (`suite_files`)

    def text(self) -> str:
        own = f" (with {', '.join(self.own_files)})" if self.own_files else ""
        if self.success:
            return f"gate {self.gate}: {self.evaluated} expectations passed{own}"
        failed = "; ".join(self.failed)
        return f"gate {self.gate}: {self.evaluated} expectations FAILED{own}: {failed} (report: {self.report})"


def load_suite(gate: str, fill: dict[str, Any], scope: str, columns: Collection[str]) -> dict[str, Any]:
    """The suite of `gate` for `scope` (`suite_files`) with the query's columns written in (`expectations`), the
    values of its GX suite parameters (`parameters`) taken from `fill`, and the files it was read from (`files`);
    a SuiteError where GX could not run it as written, or where it reads a column the gate's frame, of `columns`,
    does not have (`_reads_present`).

    A kwarg `"$each_x"` repeats the expectation for every item of `fill["each_x"]`; any other `"$y"` is
    `fill["y"]`, or, where that is a dict, its entry for the current item (a column's type, say).
    """
    files = suite_files(gate, scope)
    expanded, parameters = [], {}
    for path in files:
        for number, item in enumerate(_suite_file(path), start=1):
            where = f"{_shown(path)}, expectation {number} ({item['type']})"
            kwargs = item["kwargs"]
            given = {v["$PARAMETER"] for v in kwargs.values() if isinstance(v, dict) and "$PARAMETER" in v}
            named = given | {v[1:] for v in kwargs.values() if isinstance(v, str) and v.startswith("$")}
            if unknown := sorted(map(str, named - set(fill))):
                raise SuiteError(f"{where}: the {gate} gate fills in no {', '.join(unknown)}; it fills in "
                                 f"{', '.join(fill)} (as \"$name\", or {{\"$PARAMETER\": \"name\"}})")
            parameters.update({name: fill[name] for name in given})
            for filled in _filled(kwargs, fill):
                expectation = _one_column_unique(item["type"], filled)
                expanded.append(_buildable(where, _reads_present(where, gate, columns, expectation)))
    return {"expectations": expanded, "parameters": parameters, "files": [_shown(path) for path in files]}


def suite_files(gate: str, scope: str) -> list[Path]:
    """The files of the `gate` suite of `scope`: `expectations/<gate>.json`, which every query's gate runs, then
    `expectations/<gate>/<scope>.json` (its name in any case) if there is one, which only `scope`'s does. The
    events gate's scope is a stream, as `schemas/<stream>.yaml` names it, so that an expectation on one stream's
    column checks that stream alone; the other gates' scope is a query, as its file names it, since they check
    its tables."""
    own = named_file(EXPECTATIONS_DIR / gate, scope, ".json")
    return [EXPECTATIONS_DIR / f"{gate}.json", *([own] if own else [])]


def _filled(kwargs: dict[str, Any], fill: dict[str, Any]) -> list[dict[str, Any]]:
    """An expectation's `kwargs` with its placeholders filled in: one for each item of its `"$each_x"`, if any."""
    each = next((k for k, v in kwargs.items() if isinstance(v, str) and v.startswith("$each_")), None)
    expanded = []
    for current in fill[kwargs[each][1:]] if each else [None]:
        filled = {}
        for name, value in kwargs.items():
            if name == each:
                filled[name] = current
            elif isinstance(value, str) and value.startswith("$"):
                found = fill[value[1:]]
                filled[name] = found[current] if isinstance(found, dict) else found
            else:
                filled[name] = value
        expanded.append(filled)
    return expanded


def _suite_file(path: Path) -> list[dict[str, Any]]:
    """The expectations of the suite file `path`, each `{"type": …, "kwargs": {…}}`, or a SuiteError saying
    where the file is not that."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SuiteError(f"{_shown(path)} is not JSON: {error.msg}. Line {error.lineno}, Col {error.colno}.") from None
    expectations = spec.get("expectations") if isinstance(spec, dict) else None
    if not isinstance(expectations, list):
        raise SuiteError(f"{_shown(path)} holds no list \"expectations\": a suite is GX's JSON, "
                         '{"name": …, "expectations": [{"type": "expect_…", "kwargs": {…}}, …]}')
    for number, item in enumerate(expectations, start=1):
        if not (isinstance(item, dict) and isinstance(item.get("type"), str) and isinstance(item.get("kwargs"), dict)):
            raise SuiteError(f"{_shown(path)}, expectation {number}: write it as "
                             '{"type": "expect_…", "kwargs": {…}}, as GX does')
    return expectations


def _buildable(where: str, expectation: dict[str, Any]) -> dict[str, Any]:
    """`expectation`, if GX builds it: else a SuiteError at `where` with GX's reason."""
    try:
        gx_project.expectation(expectation["type"], expectation["kwargs"])
    except ValueError as error:
        raise SuiteError(f"{where}: {error}") from None
    return expectation


def _reads_present(where: str, gate: str, columns: Collection[str], expectation: dict[str, Any]) -> dict[str, Any]:
    """`expectation`, if each column it reads is one of `columns`: else a SuiteError at `where` naming the column
    and the nearest there. GX would report such a column as the expectation failing on the data, which is the
    suite's mistake, not the data's. An expectation of the table's shape (`expect_table_…`) names columns as what
    it expects the table to have, which is its check, not a mistake."""
    if expectation["type"].startswith("expect_table_"):
        return expectation
    missing = next((c for c in _named_columns(expectation["kwargs"]) if c not in columns), None)
    if missing is None:
        return expectation
    near = [c for c in columns if c.lower() == missing.lower()] or difflib.get_close_matches(missing, [*columns], 1)
    hint = f"; did you mean '{near[0]}'" if near else ""
    raise SuiteError(f"{where}: the {gate} gate's rows have no column '{missing}'{hint} (they have "
                     f"{', '.join(columns)})")


def _shown(path: Path) -> str:
    """A suite's file as its author knows it: `expectations/<gate>.json`."""
    return str(path.relative_to(EXPECTATIONS_DIR.parent))


def _one_column_unique(kind: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """GX checks a compound key of two columns or more; a key of one column (the event time of a stream without
    PARTITION BY) is checked by that column's own uniqueness."""
    columns = kwargs.get("column_list")
    if kind == "expect_compound_columns_to_be_unique" and len(columns) == 1:
        return {"type": "expect_column_values_to_be_unique", "kwargs": {"column": columns[0]}}
    return {"type": kind, "kwargs": kwargs}


VERDICT = "BOOLEAN_ONLY"
DETAIL = "SUMMARY"


def import_gx_meanwhile() -> None:
    """Start importing Great Expectations in a background thread, for a process that will run a gate.

    Importing GX takes seconds (it loads pandas, scipy, SQLAlchemy, Altair and pyspark.ml), about as long as the
    Spark JVM takes to start, and the two can overlap: the JVM is another process, and this thread waits on it
    for little else than a socket. The gate's own import (`gx_project.project`) then finds GX loaded, or waits on
    Python's import lock until it is.
    """
    threading.Thread(target=importlib.import_module, args=("great_expectations",), name="import-gx",
                     daemon=True).start()


Frame = tuple[DataFrame, dict[str, Any]]  # what a suite checks, and the values its placeholders take


def run_gate(job: QueryJob, gate: str, checked: Callable[..., Frame], *, last: bool = True,
             per_stream: bool = False) -> GateResult:
    """Validate what `checked` gives of a stage's staged output with the gate's suite (`suite_files`), as the
    checkpoint `<query>.<gate>` of the lake's GX project; raise GateError if it fails. A gate only reads the
    lake. The run's last gate (`last`), or the one that stops it, updates the Data Docs with all of the run's
    results. A gate `per_stream` checks a stream's output, with that stream's suite; of a query over several
    streams it validates each stream's output (`checked(job, stream)`) as a checkpoint of its own,
    `<query>.<gate>.<stream>`, and passes if all of them pass."""
    several = per_stream and len(job.streams) > 1
    parts = [(f".{s.name.lower()}", s) for s in job.streams] if several else [("", job.stream if per_stream else None)]

    def validated(context: Any, suffix: str, stream: StreamSchema | None) -> tuple[dict[str, Any], Any, list[str]]:
        frame, fill = checked(job, stream) if several else checked(job)
        suite = load_suite(gate, fill, job.plan.name if stream is None else stream.name, frame.columns)
        return _validate(context, job, f"{job.plan.name}.{gate}{suffix}", suite, frame)

    with gx_project.project(job.lake.root) as context:
        outcomes = [validated(context, suffix, stream) for suffix, stream in parts]
        failing = [o for o in outcomes if not o[0]["success"]]
        if last or failing:
            gx_project.update_docs(context, job.run_id)
    results = [r for outcome, _, _ in outcomes for r in outcome["results"]]
    key = (failing or outcomes)[0][1]
    own = tuple(dict.fromkeys(f for _, _, files in outcomes for f in files[1:]))
    outcome = GateResult(gate, not failing, len(results), tuple(_describe(r) for r in results if not r["success"]),
                         gx_project.result_page(job.lake.root, key), own)
    if not outcome.success:
        raise GateError(outcome)
    return outcome


def _validate(context: Any, job: QueryJob, name: str, suite: dict[str, Any],
              frame: DataFrame) -> tuple[dict[str, Any], Any, list[str]]:
    """One checkpoint's result (as GX's JSON), its key and its suite's files: the verdict alone first, the detail
    if it fails."""
    frame = frame.cache()
    try:
        data, engine = batch_data(frame, suite["expectations"])
        run = gx_project.run_identifier(job.run_id)

        def validate(result_format: str) -> tuple[Any, dict[str, Any]]:
            checkpoint = gx_project.checkpoint(context, name, suite["expectations"], result_format, engine=engine)
            outcome = checkpoint.run(batch_parameters={"dataframe": data},
                                     expectation_parameters=suite["parameters"], run_id=run)
            [(key, result)] = outcome.run_results.items()
            return key, result.to_json_dict()

        gx_project.keep_newest(context, job.lake.root, name, docs_runs() - 1)
        key, result = validate(VERDICT)
        if not result["success"]:
            key, result = validate(DETAIL)
        return result, key, suite["files"]
    finally:
        frame.unpersist()


# Column types whose values and nulls pandas holds as Spark does. A floating column is not one: its NaN is a
# value to Spark and a null to pandas. A time is collected as microseconds since the epoch (`unix_micros`): pandas
# holds nanoseconds, which end in 2262, and the suites only compare times for equality and nullness.
DRIVER_TYPES = (T.StringType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType,
                T.TimestampType)
SPARK_TYPE_CHECK = "expect_column_values_to_be_of_type"  # names Spark's types: only Spark's engine reads them


def batch_data(frame: DataFrame, expectations: list[dict[str, Any]]) -> tuple[Any, str]:
    """What GX validates, and with which of its engines (`gx_project.ENGINES`).

    The columns the suite reads, collected to the driver and checked by pandas, when they are at most
    `driver_gate_rows()` rows of `DRIVER_TYPES` and no expectation checks Spark's types: a micro-batch's staged
    output is a few thousand rows, which GX's Spark engine would check in about three Spark jobs an expectation.
    Otherwise the frame itself, checked by Spark. The frame is cached (`run_gate`), so an output over the limit
    pays only the collect of `limit + 1` rows thrown away: counting every frame first instead costs each
    micro-batch more than that (docs/performance.md). Both engines give a suite the same verdict on the same rows
    (`tests/integration/test_gates_and_backfill.py`).
    """
    limit = driver_gate_rows()
    types = {f.name: f.dataType for f in frame.schema.fields}
    columns = _checked_columns(expectations)
    if limit <= 0 or any(e["type"] == SPARK_TYPE_CHECK for e in expectations) or not all(
            isinstance(types[c], DRIVER_TYPES) for c in columns):
        return frame, "spark"
    rows = frame.select(*(_collected(frame[c], types[c]).alias(c) for c in columns)).limit(limit + 1).toPandas()
    return (rows, "pandas") if len(rows) <= limit else (frame, "spark")


def _checked_columns(expectations: list[dict[str, Any]]) -> list[str]:
    """Every column an expectation names, once, in the suite's order."""
    return list(dict.fromkeys(c for e in expectations for c in _named_columns(e["kwargs"])))


def _named_columns(kwargs: dict[str, Any]) -> list[str]:
    """The columns an expectation's `kwargs` name, in order (`NAMED_COLUMNS`, then `column_list`); a value of
    another type is not a column, and GX refuses it as it builds the expectation (`_buildable`)."""
    listed = kwargs.get("column_list")
    return [kwargs[arg] for arg in NAMED_COLUMNS if isinstance(kwargs.get(arg), str)] + (
        [c for c in listed if isinstance(c, str)] if isinstance(listed, list) else [])


def _collected(column: Column, kind: T.DataType) -> Column:
    return F.unix_micros(column) if isinstance(kind, T.TimestampType) else column


def build_docs(job: QueryJob) -> None:
    """Update the lake's Data Docs with every result of the run (what the last gate does when `last`)."""
    with gx_project.project(job.lake.root) as context:
        gx_project.update_docs(context, job.run_id)


def _describe(result: dict[str, Any]) -> str:
    """A failed expectation in a line: its type and column, how many rows broke it, or what it raised (a column
    the checked output does not have)."""
    config = result["expectation_config"]
    target = config["kwargs"].get("column") or config["kwargs"].get("column_list")
    unexpected = result.get("result", {}).get("unexpected_count")
    raised = _raised(result.get("exception_info") or {})
    return f"{config['type']}({target})" + (f": {unexpected} rows" if unexpected else "") + \
        (f" ({'; '.join(raised)})" if raised else "")


def _raised(info: dict[str, Any]) -> list[str]:
    """The messages of what an expectation raised: GX keeps one `exception_info`, or one per metric it computed."""
    infos = [info] if "exception_message" in info else [i for i in info.values() if isinstance(i, dict)]
    return sorted({i["exception_message"] for i in infos if i.get("exception_message")})


def _derived_fill(job: QueryJob, kind: str) -> dict[str, Any]:
    """The placeholders of a derived table's suite: its keys, natural key, the query's symbols and constraints."""
    q = job.query
    return {"each_key": list(q.keys), "natural_key": list(derived_tables(q)[kind].natural_key),
            "symbols": [s.name for s in job.plan.symbols], "constraints": [c.id for c in job.plan.constraints]}


def events_frame(job: QueryJob, stream: StreamSchema | None = None) -> Frame:
    """The staged events of the stream (of a query over one, its stream), and the stream's keys, time, columns and
    types. A matches stream's horizon marks are the run's own rows, not input (`pielake.pipeline.upstream`): the
    suite checks the rest."""
    stream = job.stream if stream is None else stream
    staged = job.staging.read(job.staged_events(stream)).filter(job.declared_query(stream).is_row())
    declared = job.lake.spark.createDataFrame([], stream.ddl).schema
    types = {f.name: type(f.dataType).__name__ for f in declared.fields}
    if stream.time_unit == TIMESTAMP_UNIT:
        types.update(dict.fromkeys(stream.time_columns, "TimestampType"))
    fill = {"each_key": list(stream.keys), "time": stream.time_column,
            "natural_key": list(stream.natural_key), "each_column": list(stream.column_names),
            "type": types, "each_end": [] if stream.end_column is None else [stream.end_column]}
    return staged, fill


def situations_frame(job: QueryJob) -> Frame:
    """The staged situations, with `__ordered`, `__apart` and `__fits` (`expectations/situations.json`)."""
    q, staged = job.query, job.staged(V.SITUATIONS)
    following = F.lead(V.TS).over(Window.partitionBy(*q.keys, V.SYMBOL).orderBy(V.TS))
    fits = q.row_takes_part(F.lit(True))  # a symbol the query does not define has nothing to fit
    checked = staged.select(
        *staged.columns,
        (F.col(V.TE).isNull() | (F.col(V.TS) < F.col(V.TE))).alias("__ordered"),
        F.coalesce(following.isNull() | (F.col(V.TE) < following), F.lit(False)).alias("__apart"),
        (~F.col(V.TAKES_PART) | fits).alias("__fits"))
    return checked, _derived_fill(job, V.SITUATIONS)


def pairs_frame(job: QueryJob) -> Frame:
    """The staged pairs, with `__allowed`, `__holds`, `__a_exists` and `__b_exists` (`expectations/pairs.json`)."""
    q, staged, constraints = job.query, job.staged(V.PAIRS), job.plan.constraints
    a = SimpleNamespace(ts=F.col("a_ts"), te=F.col("a_te"))
    b = SimpleNamespace(ts=F.col("b_ts"), te=F.col("b_te"))
    # followed-by: its endpoint part; the gap is the automaton's
    holds = case_on(V.RELATION, ((name, relation.condition(a, b)) for name, relation in RELATIONS.items()),
                    F.lit(False))
    open_or_undecided = F.col(V.RELATION).isNull() | F.col("a_te").isNull() | F.col("b_te").isNull()
    allowed = by_constraint(constraints, lambda c: F.col(V.RELATION).isin(*sorted(c.relations)), F.lit(None))
    checked = staged.select(
        *staged.columns,
        F.coalesce(F.col(V.RELATION).isNull() | allowed, F.lit(False)).alias("__allowed"),
        (open_or_undecided | F.coalesce(holds, F.lit(False))).alias("__holds"),
        by_constraint(constraints, lambda c: F.lit(c.left), F.lit(None)).alias("__left"),
        by_constraint(constraints, lambda c: F.lit(c.right), F.lit(None)).alias("__right"))
    situations = job.staged(V.SITUATIONS).select(*q.keys, V.SYMBOL, V.TS, F.lit(True).alias("__there"))
    for side in ("a", "b"):
        named = situations.select(*q.keys, F.col(V.SYMBOL).alias(f"__{side}_sym"), F.col(V.TS).alias(f"{side}_ts"),
                                  F.col("__there").alias(f"__{side}_exists"))
        checked = (checked.withColumn(f"__{side}_sym", F.col("__left" if side == "a" else "__right"))
                   .join(named, [*q.keys, f"__{side}_sym", f"{side}_ts"], "left")
                   .withColumn(f"__{side}_exists", F.coalesce(F.col(f"__{side}_exists"), F.lit(False))))
    return checked, _derived_fill(job, V.PAIRS)


def matches_frame(job: QueryJob) -> Frame:
    """The staged matches, with `__window` and `__constraints` (`expectations/matches.json`)."""
    q, staged = job.query, job.staged(V.MATCHES)

    def interval(symbol: str) -> SimpleNamespace:
        return SimpleNamespace(ts=q.kernel_time(F.col(V.symbol_ts(symbol))),
                               te=q.kernel_time(F.col(V.symbol_te(symbol))))

    spans = [interval(s.name) for s in job.plan.symbols]
    first, last = F.least(*(s.ts for s in spans)), F.greatest(*(s.te for s in spans))  # a plan has >= 2 symbols
    every = reduce(lambda x, y: x & y, (
        reduce(lambda x, y: x | y, (RELATIONS[r].condition(interval(c.left), interval(c.right))
                                    for r in sorted(c.relations)))
        for c in job.plan.constraints))
    complete = F.col(V.STATUS) == V.COMPLETE
    checked = staged.select(*staged.columns,
                            F.coalesce(~complete | q.within_window(last, first), F.lit(False)).alias("__window"),
                            F.coalesce(~complete | every, F.lit(False)).alias("__constraints"))
    return checked, _derived_fill(job, V.MATCHES)
