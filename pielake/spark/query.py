"""A checked query bound to a stream: everything the Spark kernels need, computed once.

`SparkQuery.prepare` turns the events table into the kernel input (keys, event time as BIGINT, one boolean column
per symbol, the attributes RETURN aggregates read); an interval stream's rows become their instants first
(`pielake.spark.intervals`). `situations` turns stitched runs into the situations table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from functools import cached_property, reduce
from pathlib import Path

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame
from pyspark.sql.types import TimestampNTZType

from pielake import vocabulary as V
from pielake.errors import CompileError, PielakeError
from pielake.query import ast
from pielake.query.analyzer import AGGREGATES, PairConstraint, QueryPlan, walk
from pielake.query.evaluate import BIGINT_RANGE
from pielake.query.time_fields import EPOCH
from pielake.spark import columns as C
from pielake.spark import intervals
from pielake.spark.arrow_predicates import ArrowDeclinedError, ArrowInput
from pielake.spark.compile import predicate
from pielake.spark.patterns import read_runs
from pielake.spark.runs import EncodedRuns, EventFiles, Partial, Reading, RunSpec, encode_runs
from pielake.spark.sums import EXACT_DOUBLE_SUM, EXACT_SUM, rounded
from pielake.streams import NARROW_INTEGER_TYPES, TIMESTAMP_UNIT, WHOLE_NUMBER, StreamSchema, declared_schema

_FLOATING = ("DOUBLE", "FLOAT", "REAL", "DECIMAL")
MICROSECOND = timedelta(microseconds=1)


def iso_micros(text: str) -> int:
    """An ISO-8601 time as microseconds since 1970, a time without a zone in UTC (docs/semantics.md §1), as a
    TIMESTAMP stream's kernel time is; ValueError for text that is no such time."""
    moment = datetime.fromisoformat(text)
    return ((moment if moment.tzinfo else moment.replace(tzinfo=UTC)) - EPOCH) // MICROSECOND


def kernel_floor(stored: object, stream: StreamSchema) -> int | None:
    """A time of `stream` as Delta's file statistics write it (a number; a TIMESTAMP as ISO-8601 text with its
    offset) in kernel time, rounded down: a lower bound of stored times stays one of kernel times, which cast a
    number's fraction away (`SparkQuery.kernel_time`). None for a value not written so."""
    if stream.time_unit == TIMESTAMP_UNIT:
        try:
            return iso_micros(stored) if isinstance(stored, str) else None
        except ValueError:
            return None
    number = isinstance(stored, int | float) and not isinstance(stored, bool)
    return math.floor(stored) if number and math.isfinite(stored) else None


def typed_time(option: str, text: str, stream: StreamSchema) -> int:
    """A time a user gave an option (`--from`) as kernel time, written as the stream's own times are: a whole
    number of its unit, or an ISO-8601 time for a TIMESTAMP stream. Anything else is refused saying what to give,
    and the Unix time an ISO-8601 time would be for a stream of numbers. Every command that takes a time reads it
    here, so one text means one time wherever it is given."""
    given = text.strip()
    try:
        if stream.time_unit == TIMESTAMP_UNIT:
            return iso_micros(given)
        if WHOLE_NUMBER.fullmatch(given) and int(given) in BIGINT_RANGE:
            return int(given)
    except ValueError:
        pass
    kind = "an ISO-8601 time (2026-03-02T06:00:00Z)" if stream.time_unit == TIMESTAMP_UNIT else \
        f"a whole number of its unit ({stream.time_unit})"
    raise PielakeError(f"{option} '{text}' is not a time of stream {stream.name}: give {kind}"
                       f"{_as_unix_time(given, stream)}")


def typed_range(since: str | None, until: str | None, stream: StreamSchema) -> tuple[int | None, int | None]:
    """A user's `--from` and `--to` as kernel times (`typed_time`; None where not given), refused if the range ends
    before it starts: it would hold nothing, which reads as if there were nothing there."""
    low, high = (None if text is None else typed_time(option, text, stream)
                 for option, text in (("--from", since), ("--to", until)))
    if low is not None and high is not None and low > high:
        raise PielakeError(f"--from {since} is after --to {until}")
    return low, high


def check_range_early(since: str | None, until: str | None, plan: QueryPlan, lake_root: Path) -> None:
    """Refuse a range that is no range of the query's times (`typed_range`) before Spark starts, where their type
    is known from a schema (the lake's, or schemas/); a stream typed from its first file is checked once typed."""
    known = declared_schema(plan.sources[0].stream, lake_root)  # the streams' times are of one type
    if known is not None:
        typed_range(since, until, known)


def _as_unix_time(text: str, stream: StreamSchema) -> str:
    """For an ISO-8601 time given for a stream of numeric times: the number it is if they count from 1970 (Unix
    time), as most do; they may count from elsewhere, so the number is offered, not taken. Empty otherwise."""
    try:
        micros = iso_micros(text)
    except ValueError:
        return ""
    if stream.time_unit == TIMESTAMP_UNIT:
        return ""
    count = Fraction(micros, 10**6) / stream.unit_seconds
    shown = f"{count.numerator}" if count.denominator == 1 else f"about {math.floor(count)}"
    return f"; if its times count from 1970 (Unix time), {text} is {shown}"


def time_literal(kernel: int, stream: StreamSchema) -> Column:
    """Kernel time as a literal of the stream's own time type. A filter of a stored time column against it is one
    Delta can prune files with (their min/max statistics are in that type); against a converted column it could
    not."""
    if stream.time_unit != TIMESTAMP_UNIT:
        return F.lit(kernel)
    return F.lit(EPOCH + kernel * MICROSECOND)


def utc_clock(time: Column) -> Column:
    """A TIMESTAMP as UTC's wall clock (a TIMESTAMP_NTZ, cast in the session's zone, which is UTC): what a time is
    handed to Python as. PySpark hands a TIMESTAMP over as the wall clock of the zone its own process runs in,
    naming none: one event would read 00:00 in London and 19:00 the day before in New York, and two instants of
    the hour a clock repeats would read alike."""
    return time.cast(TimestampNTZType())


@dataclass(frozen=True)
class Aggregate:
    """One `func(S.attr)` of RETURN: `attr` is the column it reads, `column` names it in the situations table (after
    the attribute as the query names it)."""

    func: str
    symbol: str
    attr: str
    named: str
    stream: str = ""  # over several streams, the stream's label, where another stream's symbol reads `named` too

    @property
    def column(self) -> str:
        return "_".join(part.lower() for part in (self.func, self.stream, self.named) if part)

    def reads(self, func: str, symbol: str, attr: str) -> bool:
        """Whether this is RETURN's `func(symbol.attr)`."""
        return (self.func, self.symbol, self.named.lower()) == (func, symbol, attr.lower())

    @property
    def partial_functions(self) -> tuple[str, ...]:
        return ("sum", "count") if self.func == "avg" else (self.func,)


def computable(column: Column, kind: str) -> Column:
    """A value of Spark type `kind` as the reference computes with it: a narrower integer as a BIGINT, so that
    `+ - *` over it compute in 64 bits and are not NULL past 32; a DECIMAL as a DOUBLE, as the reference reads one
    (docs/semantics.md §1), where Spark would compute in decimals of its own precision and scale."""
    if kind in NARROW_INTEGER_TYPES:
        return column.cast("bigint")
    return column.cast("double") if kind.upper().startswith("DECIMAL") else column


def scaled_at_most(diff: Column, seconds: Fraction, unit: Fraction) -> Column:
    """`diff` whole time units last at most `seconds`: at most the whole units `seconds` holds. Exact (no float
    rounding at the edge), and no product of `diff` that could overflow 64 bits."""
    return diff <= F.lit(math.floor(seconds / unit)).cast("bigint")


def scaled_at_least(diff: Column, seconds: Fraction, unit: Fraction) -> Column:
    """`diff` whole time units last at least `seconds`: at least the whole units `seconds` reaches into."""
    return diff >= F.lit(math.ceil(seconds / unit)).cast("bigint")


def case_on(column: str, cases: Iterable[tuple[object, Column]], otherwise: Column) -> Column:
    """A column whose value depends on the row's `column`: the value paired with it in `cases`, `otherwise` for a
    value not among them. One expression serves rows of every kind (constraint, stream), so that one plan
    computes them all."""
    return reduce(lambda out, case: F.when(F.col(column) == case[0], case[1]).otherwise(out), cases, otherwise)


class SparkQuery:
    """A `QueryPlan` bound to a stream schema and to the columns of its events DataFrame."""

    def __init__(self, plan: QueryPlan, stream: StreamSchema, column_types: dict[str, str], prefix: str = ""):
        """`prefix`: the events frame holds the stream's columns under `prefix` + their names, its keys as they
        are (one stream's part of a `pielake.spark.timeline.Timeline`, whose frame holds several streams' rows)."""
        self.plan = plan
        self.stream = stream
        keys = {k.lower() for k in plan.keys}
        self.types = {k.lower(): v.upper() for k, v in column_types.items()}
        self.names = {k.lower(): k if k.lower() in keys else prefix + k for k in column_types}
        self.stored_keys = tuple(self.names[k.lower()] for k in plan.keys)
        # A query without PARTITION BY reads its stream as one global key (docs/semantics.md §1): inside a run
        # that key is a constant column, so every kernel, join and window works per key as for any stream.
        self.keys = self.stored_keys or (C.GLOBAL_KEY,)
        self.key_types = tuple(self.types[k.lower()] for k in self.stored_keys) or ("INT",)
        self.unit = stream.unit_seconds
        self.symbol_index = {s.name: i for i, s in enumerate(plan.symbols)}

    # ------------------------------------------------------------ the key

    def keyed(self, rows: DataFrame) -> DataFrame:
        """Rows read from the lake (events, published tables) with the run's key columns: the global key of a
        query without PARTITION BY added, which the lake's tables do not store."""
        if self.stored_keys or C.GLOBAL_KEY in rows.columns:
            return rows
        return rows.withColumn(C.GLOBAL_KEY, F.lit(0))

    def events_of(self, frames: Sequence[DataFrame]) -> DataFrame:
        """The events frame the kernels read, from the events of each stream of FROM as the lake stores them: of
        one stream, its events with the run's key columns (`keyed`)."""
        [events] = frames
        return self.keyed(events)

    def unkeyed(self, rows: DataFrame) -> DataFrame:
        """Rows about to be published, as the lake stores them: without the global key."""
        return rows if self.stored_keys else rows.drop(C.GLOBAL_KEY)

    def stored(self, columns: tuple[str, ...]) -> tuple[str, ...]:
        """Column names as the lake stores them: without the global key."""
        return tuple(c for c in columns if c != C.GLOBAL_KEY)

    # ------------------------------------------------------------ inputs

    @cached_property
    def aggregates(self) -> tuple[Aggregate, ...]:
        found: dict[tuple[str, str, str], Aggregate] = {}
        for out in self.plan.returns:
            for node in walk(out.expr):
                if isinstance(node, ast.Call) and node.name in AGGREGATES:
                    arg = node.args[0]
                    assert isinstance(arg, ast.Column) and arg.qualifier is not None
                    symbol = next(s.name for s in self.plan.symbols if s.name.lower() == arg.qualifier.lower())
                    found[(node.name, symbol, arg.name.lower())] = Aggregate(
                        node.name, symbol, self.names[arg.name.lower()], arg.name)
        return tuple(found.values())

    def attribute_type(self, symbol: str, attr: str) -> str:
        """The Spark SQL type of attribute `attr` (as the query names it) of the stream symbol `symbol` reads."""
        return self.types[attr.lower()]

    def partial_type(self, func: str, attr: str) -> str:
        kind = self.types[attr.lower()]
        if func == "count":
            return "BIGINT"
        if func == "sum":
            return EXACT_DOUBLE_SUM if kind.startswith(_FLOATING) else EXACT_SUM
        return kind

    @property
    def intervals(self) -> bool:
        """The stream's rows are intervals (docs/semantics.md §1)."""
        return self.stream.end_column is not None

    @property
    def readable_in_place(self) -> bool:
        """The runs kernel may read the events where they lie: they are its input as they are (a point stream's
        events), not instants a shuffle by key computes from them (an interval stream's rows)."""
        return not self.intervals

    def partials_of(self, symbol: int) -> tuple[Partial, ...]:
        """The partial aggregates RETURN needs of symbol number `symbol`'s situations."""
        found = {Partial(symbol, f, a.attr, self.partial_type(f, a.named))
                 for a in self.aggregates if self.symbol_index[a.symbol] == symbol for f in a.partial_functions}
        return tuple(sorted(found, key=lambda p: p.name))

    @property
    def partials_in_kernel(self) -> bool:
        """The runs kernel computes the partials over each run's events: a point stream's, whose runs are its
        events. An interval stream's come from its rows instead (`with_row_partials`)."""
        return not self.intervals

    def with_row_partials(self, situations: DataFrame, events: DataFrame) -> DataFrame:
        """`situations` with the partials RETURN needs, computed from the rows that make each one
        (`intervals.with_partials`), where the kernel did not compute them."""
        return intervals.with_partials(situations, events, self)

    @cached_property
    def spec(self) -> RunSpec:
        """What the runs kernel encodes: the partials too, where it computes them (`partials_in_kernel`)."""
        partials = () if not self.partials_in_kernel else \
            tuple(sorted((p for i in range(len(self.plan.symbols)) for p in self.partials_of(i)), key=lambda p: p.name))
        pairs = tuple((self.symbol_index[c.left], self.symbol_index[c.right]) for c in self.plan.constraints)
        return RunSpec(self.keys, self.key_types, len(self.plan.symbols), pairs,
                       tuple(read_runs(c) for c in self.plan.constraints), partials)

    def column(self, ref: ast.Column) -> Column:
        """A predicate's column, as the reference computes with it (`computable`)."""
        return computable(F.col(self.names[ref.name.lower()]), self.types[ref.name.lower()])

    def stored_time(self) -> Column:
        """The events' time column as stored, in the stream's own type."""
        return F.col(self.names[self.stream.time_column.lower()])

    def event_time(self) -> Column:
        return self.kernel_time(self.stored_time())

    def stored_reach(self) -> Column:
        """How far in time an event tells, as stored: a point event's time, an interval row's end (of a matches
        stream's horizon mark, which has no end, its start: `pielake.pipeline.upstream`). The end column itself
        where there are no marks, so that Delta skips files by it."""
        if not self.intervals:
            return self.stored_time()
        end = F.col(self.names[self.stream.end_column.lower()])
        return F.coalesce(end, self.stored_time()) if self.stream.of_matches else end

    def is_row(self) -> Column:
        """An interval stream's row holds somewhere; a matches stream's horizon mark (no end) holds at no time
        and only tells how far the key's time is known."""
        if not self.stream.of_matches:
            return F.lit(True)
        return F.col(self.names[self.stream.end_column.lower()]).isNotNull()

    @property
    def order_columns(self) -> tuple[str, ...]:
        """What orders rows sharing a start and an end, after them (a matches stream's symbol starts)."""
        return tuple(self.names[c.lower()] for c in self.stream.order_columns)

    def may_reach(self, floor: int) -> Column:
        """An event that may reach kernel time `floor` (`reaching`), said against the stored columns, so that Delta
        skips the files of events that cannot."""
        return self.stored_reach() >= time_literal(floor, self.stream)

    def reaching(self, events: DataFrame, cut: Column) -> DataFrame:
        """The events a key recomputed from `cut` reads: those reaching it, of an interval stream clipped to start
        there. Every instant at or after the cut is then as in the whole history (the rows covering it all reach
        it), the cut itself is one (a row ending there still marks it), and there is none before it, which the
        rows alone would get wrong. No situation anchored after the cut has a clipped row (its rows start after
        the cut)."""
        reaching = events.filter(self.reach_time() >= cut)
        if not self.intervals:
            return reaching
        start = self.names[self.stream.time_column.lower()]
        return reaching.withColumn(start, F.when(self.event_time() < cut, self.time_out(cut))
                                   .otherwise(F.col(start)))

    def reach_time(self) -> Column:
        return self.kernel_time(self.stored_reach())

    def kernel_time(self, column: Column) -> Column:
        """A time in the stream's own type as kernel time (BIGINT); `time_out` is its inverse."""
        return F.unix_micros(column) if self.stream.time_unit == TIMESTAMP_UNIT else column.cast("bigint")

    @cached_property
    def window_ceiling(self) -> int:
        """The window in whole kernel time units, rounded up: no two starts further apart share a match."""
        return -(-self.window_units.numerator // self.window_units.denominator)

    def time_out(self, column: Column) -> Column:
        """Kernel time (BIGINT) back to the stream's own time type for the result tables."""
        return F.timestamp_micros(column) if self.stream.time_unit == TIMESTAMP_UNIT else column

    @cached_property
    def flag_bits(self) -> tuple[tuple[str, tuple[tuple[int, ast.Expr], ...]], ...]:
        """Per flags word (`C.flags_word`), the bit and predicate of each of its symbols: the one layout both
        `prepare` and the Arrow backend (`arrow_input`) pack the predicates in."""
        words: dict[str, list[tuple[int, ast.Expr]]] = {}
        for i, s in enumerate(self.plan.symbols):
            words.setdefault(C.flags_word(i), []).append((i % C.FLAGS_PER_WORD, s.predicate))
        return tuple((word, tuple(bits)) for word, bits in words.items())

    def _sources(self) -> list[str]:
        """The columns RETURN's aggregates read, besides the keys (selected already)."""
        return sorted({a.attr for a in self.aggregates} - set(self.keys))

    @cached_property
    def arrow_input(self) -> ArrowInput | None:
        """`prepare` for the runs kernel's tasks that read events files themselves, or None where a predicate
        or a column type is one `pielake.spark.arrow_predicates` declines (the events are then read by Spark), and for
        an interval stream, whose kernel input is its instants."""
        if self.intervals:
            return None
        read = sorted({node.name.lower() for s in self.plan.symbols for node in walk(s.predicate)
                       if isinstance(node, ast.Column)})
        reading = ArrowInput(self.keys, self.names[self.stream.time_column.lower()], C.T,
                             self.flag_bits, tuple(self._sources()),
                             tuple((name, self.names[name]) for name in read),
                             tuple((self.names[name], kind) for name, kind in self.types.items()))
        try:
            reading.check()
        except ArrowDeclinedError:
            return None
        return reading

    def words(self, truth: Callable[[int], Column]) -> list[Column]:
        """The flags words (`flag_bits`' layout) of `truth`, a boolean Column per symbol number (NULL: false)."""
        words: dict[str, list[Column]] = {}
        for i in range(len(self.plan.symbols)):
            flag = F.when(truth(i), F.lit(1 << (i % C.FLAGS_PER_WORD))).otherwise(0)
            words.setdefault(C.flags_word(i), []).append(flag)
        return [reduce(Column.bitwiseOR, flags[1:], flags[0].cast("bigint")).alias(name)
                for name, flags in words.items()]

    def prepare(self, events: DataFrame) -> DataFrame:
        """Kernel input: keys, `__t`, the symbols' predicates as bits of BIGINT words (NULL counts as false) and
        aggregate inputs. Packed, n predicates cost one column instead of n in the shuffle and in the Arrow
        hand-over to the kernel, which is where the time of the runs stage goes. An interval stream's input is its
        rows' instants."""
        if self.intervals:
            return intervals.instants(events, self)
        words = self.words(lambda i: predicate(self.plan.symbols[i].predicate, self.column))
        return events.select(*self.keys, self.event_time().alias(C.T), *words, *self._sources())

    @cached_property
    def window_units(self) -> Fraction:
        return self.plan.window_seconds / self.unit

    def within_window(self, later: Column, earlier: Column) -> Column:
        return scaled_at_most(later - earlier, self.plan.window_seconds, self.unit)

    # ------------------------------------------------------------ what a run knows

    @property
    def stream_count(self) -> int:
        """How many streams the query reads (over several, it is a `pielake.spark.timeline.Timeline`)."""
        return 1

    @property
    def stream_times(self) -> tuple[str, ...]:
        """The columns of a key's time in each of its streams that `latest_times` gives beside `C.LAST_TIME`: none
        over one stream, whose time is `C.LAST_TIME` itself."""
        return () if self.stream_count == 1 else tuple(C.last_time(i) for i in range(self.stream_count))

    @property
    def time_columns(self) -> tuple[str, ...]:
        """Every column of a key's times that `latest_times` gives and the progress keeps: each stream's, then
        the latest of them."""
        return (*self.stream_times, C.LAST_TIME)

    def last_time_of(self, symbol: str) -> str:
        """The column of a key's latest time in the symbol's stream, as far as the run knows it (`latest_times`):
        how long an open situation of the symbol is known to last."""
        return C.LAST_TIME

    def latest_times(self, events: DataFrame, key_bounds: DataFrame | None = None) -> DataFrame:
        """Each key's latest event time (`C.LAST_TIME`), one row per key; read from the runs kernel's `key_bounds`
        (the end of each stretch of a key's time it read) where given, not from a scan of the events."""
        times = events.select(*self.keys, self.event_time().alias(C.T)) if key_bounds is None else \
            key_bounds.select(*self.keys, F.col(C.END).alias(C.T))
        return times.groupBy(*self.keys).agg(F.max(C.T).alias(C.LAST_TIME))

    def latest_time(self) -> Column:
        """Of a key's latest times (`latest_times`' columns), the latest of them: how far its timeline reaches."""
        return F.col(C.LAST_TIME)

    def own_last_time(self) -> Column:
        """Of an event joined with its key's latest times (`latest_times`' columns), the key's time in the event's
        own stream: how far that stream was processed."""
        return F.col(C.LAST_TIME)

    def settled_time(self) -> Column:
        """Of a key's latest times (`latest_times`' columns), the time up to which every stream of the key has
        told its events, and so up to which every pair is decided."""
        return F.col(C.LAST_TIME)

    def known_by(self, constraint: PairConstraint) -> Column | None:
        """The latest time at which a pair of the constraint may be decided, from the run's latest times, where it
        is earlier than the time of the stream the runs are read from: never, over one stream."""
        return None

    # ------------------------------------------------------------ runs and situations

    def runs(self, events: DataFrame, partitions: int, *, reading: Reading = Reading.RANGES,
             files: tuple[str, ...] = ()) -> EncodedRuns:
        """The stitched runs of `events` (`encode_runs`); `files`, the local Parquet files `events` reads, if the
        kernel's tasks may read them themselves (as plain Parquet: `Lake.plain_files`)."""
        arrow = self.arrow_input if files else None
        return encode_runs(self.prepare(events), self.spec, partitions, reading=reading,
                           files=None if arrow is None else EventFiles(files, arrow))

    def pair_series(self, constraint: PairConstraint) -> int:
        return self.spec.series_of_pair(self.plan.constraints.index(constraint))

    def takes_part(self, symbol: str, *, ts: Column | None = None, te: Column | None = None) -> Column:
        """A situation (`ts`, `te`: the situations table's columns unless given) takes part in matches: always,
        or, with a duration constraint, once closed and fitting."""
        sym = self.plan.symbol(symbol)
        if not sym.has_duration:
            return F.lit(True)
        ts = F.col(V.TS) if ts is None else ts
        te = F.col(V.TE) if te is None else te
        fits = te.isNotNull()
        diff = te - ts
        if sym.min_seconds is not None:
            fits = fits & scaled_at_least(diff, sym.min_seconds, self.unit)
        if sym.max_seconds is not None:
            fits = fits & scaled_at_most(diff, sym.max_seconds, self.unit)
        return fits

    def row_takes_part(self, otherwise: Column) -> Column:
        """Whether a situations row takes part in matches (`takes_part` of the row's own symbol); `otherwise` for
        a row of a symbol the query does not define."""
        return case_on(V.SYMBOL, ((s.name, self.takes_part(s.name)) for s in self.plan.symbols), otherwise)

    def situations(self, runs: DataFrame, events: DataFrame) -> DataFrame:
        """One row per situation per key (kernel time): keys, symbol, ts, te, status, takes_part, aggregates.
        `events` are what the runs were encoded from: an interval stream's aggregates read its rows."""
        names = F.array(*(F.lit(s.name) for s in self.plan.symbols))
        rows = (runs.filter((F.col(C.SERIES) < len(self.plan.symbols)) & (F.col(C.VALUE) == 1))
                .withColumn(V.SYMBOL, F.element_at(names, F.col(C.SERIES) + 1))
                .withColumn(V.TS, F.col(C.START)).withColumn(V.TE, F.col(C.END)))
        if not self.partials_in_kernel:
            rows = self.with_row_partials(rows, events)
        aggregates = [self.aggregate_column(name) for name in dict.fromkeys(a.column for a in self.aggregates)]
        return rows.select(*self.keys, V.SYMBOL, V.TS, V.TE,
                           F.when(F.col(V.TE).isNull(), V.OPEN).otherwise(V.CLOSED).alias(V.STATUS),
                           self.row_takes_part(F.lit(False)).alias(V.TAKES_PART), *aggregates)

    def aggregate_column(self, name: str) -> Column:
        """`func_attr` over whichever symbols RETURN reads it from; each row holds its own symbol's value."""
        values = []
        for a in (a for a in self.aggregates if a.column == name):
            index = self.symbol_index[a.symbol]
            partial = {p.func: p for p in self.partials_of(index) if p.source == a.attr}
            read = partial["sum" if a.func == "avg" else a.func]
            value = rounded(F.col(read.name)) if read.spark_type == EXACT_DOUBLE_SUM else F.col(read.name)
            if a.func == "avg":
                value = F.try_divide(value.cast("double"), F.col(partial["count"].name))
            elif a.func == "sum" and read.spark_type == EXACT_SUM:  # a BIGINT, NULL beyond 64 bits
                value = value.try_cast("bigint")
            values.append(value)
        if not values:
            raise CompileError(f"no aggregate named {name}")
        return F.coalesce(*values).alias(name)
