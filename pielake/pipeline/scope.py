"""What a run recomputes, so that batch, micro-batch and backfill give the same tables (docs/semantics.md §7).

Every derived row has an *anchor*: the earliest start among its situations (a situation's `ts`, a pair's
`least(a_ts, b_ts)`, a match's least `S_ts`). Recomputing a key from one of its events, its *cut*, yields every row
anchored strictly after the cut exactly as a run over the whole history would: a situation that starts after the
cut has all its events in the slice and the event before it too, and every pair automaton reads only runs that
start at or after the earliest start of its pair.

So a run owns, per key in its scope, the rows anchored after the key's cut:

- a **batch** run: every key, no cut (the whole table is replaced);
- a **micro-batch**: the keys with events after their processed time, from the cut the previous run left in
  `progress_<query>`;
- a **backfill** from T1: the keys with events at or after T1, from a cut before T1's unsettled state.

Which cut is safe: a row that a later run may still change is either unsettled (an open situation, a pair with an
open side, a provisional match) or contains a situation that ends after the key's processed time P; in a match,
or a pair, all starts then lie within the window W of that end, so its anchor is > P - W. A cut before every
unsettled anchor and before P - W therefore leaves every row that can change inside the next run's scope.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, reduce

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

from pielake import vocabulary as V
from pielake.spark import columns as C
from pielake.spark.columns import LAST_TIME
from pielake.spark.query import SparkQuery, time_literal

CUT = "__cut"
EVENTS_VERSION = "__events_version"  # the events table version a run read: the next one starts after it
SCOPE_CUT = "__scope_cut"  # the cut joined onto rows that may carry a `__cut` of their own (progress)
UNPROCESSED = "__unprocessed"  # `mark_unprocessed`'s mark of an event a micro-batch has still to process
FULL = "full"  # the scope commit's user metadata when the run is a batch, which replaces whole tables
BOUND = "__bound"
NO_CUT = -(2**63)  # a cut before every event: the key is recomputed from its first event
MODES = ("batch", "incremental", "backfill")


def events_versions(streams: int) -> tuple[str, ...]:
    """The columns of the events table versions a run read: `EVENTS_VERSION` of its one stream, or one per stream
    of a query over several, in FROM's order."""
    return (EVENTS_VERSION,) if streams == 1 else tuple(f"{EVENTS_VERSION}{i}" for i in range(streams))


@dataclass(frozen=True)
class Derived:
    """A derived table's natural key (docs/semantics.md §6) and its start columns: a row's anchor is their least.
    `times`: all its time columns (starts, ends, decision times).

    A published table keeps every time in the stream's own type, so SQL reads timestamps of a TIMESTAMP stream.
    The stages compute in kernel time and stage situations and pairs so (the kernels read them), matches already
    in the stream's type; `in_stream_time` says which form this description's rows are in, `to_stored` and
    `to_staged` convert between the two.
    """

    q: SparkQuery
    natural_key: tuple[str, ...]
    starts: tuple[str, ...]
    times: tuple[str, ...]
    in_stream_time: bool = False

    def stored(self) -> Derived:
        """This table as published: its times in the stream's own type."""
        return replace(self, in_stream_time=True)

    def to_stored(self, rows: DataFrame) -> DataFrame:
        """Rows of this form as published."""
        return rows if self.in_stream_time else rows.withColumns({t: self.q.time_out(F.col(t)) for t in self.times})

    def to_staged(self, rows: DataFrame) -> DataFrame:
        """Published rows in this form."""
        return rows if self.in_stream_time else rows.withColumns({t: self.q.kernel_time(F.col(t)) for t in self.times})

    @property
    def anchor(self) -> Column:
        times = [self.q.kernel_time(F.col(s)) if self.in_stream_time else F.col(s) for s in self.starts]
        return times[0] if len(times) == 1 else F.least(*times)

    def after(self, bound: int) -> Column:
        """Anchored after kernel time `bound`, said as every stored start column > a literal of its own type:
        the form Delta prunes files by (with their min/max statistics)."""
        at = time_literal(bound, self.q.stream) if self.in_stream_time else F.lit(bound)
        return reduce(Column.__and__, (F.col(s) > at for s in self.starts))


def derived_tables(q: SparkQuery) -> dict[str, Derived]:
    """The tables a run publishes, by kind, with their natural keys and start columns."""
    starts = tuple(V.symbol_ts(s.name) for s in q.plan.symbols)
    ends = tuple(V.symbol_te(s.name) for s in q.plan.symbols)
    return {
        V.SITUATIONS: Derived(q, (*q.keys, V.SYMBOL, V.TS), (V.TS,), (V.TS, V.TE)),
        V.PAIRS: Derived(q, (*q.keys, V.CONSTRAINT_ID, "a_ts", "b_ts"), ("a_ts", "b_ts"),
                         ("a_ts", "a_te", "b_ts", "b_te", V.DECIDED_AT)),
        V.MATCHES: Derived(q, (*q.keys, *starts), starts, (*starts, *ends, V.DETECTED_AT, V.COMPLETED_AT),
                           in_stream_time=True),
    }


@dataclass(frozen=True)
class Scope:
    """The keys a run recomputes: per key its cut (NULL: from the first event) and its latest event time.

    `full` marks a batch run, which replaces whole tables instead of merging.
    """

    frame: DataFrame  # keys, __cut, __last_t, __events_version
    keys: tuple[str, ...]
    full: bool

    def _cuts(self) -> DataFrame:
        cut = F.coalesce(F.col(CUT), F.lit(NO_CUT)).alias(SCOPE_CUT)
        return F.broadcast(self.frame.select(*self.keys, cut))

    @cached_property
    def floor(self) -> int | None:
        """The least cut over the scope's keys, or None (a batch run, or a key recomputed from its first event).

        Every event a run reads is at or after it and every row it owns is anchored after it: the one literal
        bound that lets Delta skip the history's files, which the per-key cut (a join) cannot.
        """
        if self.full:
            return None
        least, uncut = self.frame.agg(F.min(CUT), F.count(F.when(F.col(CUT).isNull(), 1))).first()
        return None if uncut or least is None else int(least)

    def slice(self, events: DataFrame, q: SparkQuery) -> DataFrame:
        """The events a run reads: its keys' events that reach their cut (`SparkQuery.reaching`)."""
        if self.full:
            return events
        if self.floor is not None:
            events = events.filter(q.may_reach(self.floor))
        sliced = events.join(self._cuts(), list(self.keys))
        return q.reaching(sliced, F.col(SCOPE_CUT)).drop(SCOPE_CUT)

    def owned(self, rows: DataFrame, derived: Derived | None) -> DataFrame:
        """The rows this run owns: its keys' rows anchored after their cut (all its keys' rows: no anchor)."""
        if self.full:
            return rows
        if derived is None:
            return rows.join(self._cuts(), list(self.keys)).drop(SCOPE_CUT)
        return self._after_cut(rows, derived.anchor, None if self.floor is None else derived.after(self.floor))

    def owned_results(self, results: DataFrame) -> DataFrame:
        """The rows this run owns of a results table's anchored kinds (situations, pairs, matches), as stored
        (`pielake.lake.results`): the same rule as `owned`, on the anchor every stored row carries."""
        anchor = F.col(V.ANCHOR)
        return self._after_cut(results.filter(anchor.isNotNull()), anchor,
                               None if self.floor is None else anchor > self.floor)

    def _after_cut(self, rows: DataFrame, anchor: Column, after_floor: Column | None) -> DataFrame:
        """Its keys' rows anchored after their cut; `after_floor`, the same said against the floor, first, for
        Delta to skip files by."""
        if after_floor is not None:
            rows = rows.filter(after_floor)
        return rows.join(self._cuts(), list(self.keys)).filter(anchor > F.col(SCOPE_CUT)).drop(SCOPE_CUT)

    def last_times(self, q: SparkQuery) -> DataFrame:
        """Per key, its latest time, and over several streams its time in each (`SparkQuery.time_columns`)."""
        return self.frame.select(*self.keys, *q.time_columns)


def mark_unprocessed(rows: DataFrame, progress: DataFrame, q: SparkQuery, *, time: Column, mark: str) -> DataFrame:
    """`rows` with a boolean column `mark`: the row lies after its key's processed time in its stream, as
    `progress` holds it (a key that has none is new). The one rule behind both "which keys has a micro-batch to
    process" and "which events are late"."""
    done = rows.join(F.broadcast(progress.select(*q.keys, *q.time_columns)), list(q.keys), "left")
    return done.withColumn(mark, q.own_last_time().isNull() | (time > q.own_last_time())).drop(*q.time_columns)


def plan_scope(events: DataFrame, q: SparkQuery, *, mode: str, progress: DataFrame | None,
               backfill_cuts: DataFrame | None = None, new_events: DataFrame | None = None,
               key_bounds: DataFrame | None = None) -> DataFrame:
    """The scope frame (keys, __cut, __last_t) of a run in `mode`.

    `progress` is the published state (keys, __last_t, __cut) or None on a lake the query has not run on;
    a backfill passes its cuts (keys, __cut) from `backfill_cut`; a micro-batch may pass `new_events`, the events
    appended since the previous run (else every event is compared with its key's processed time). A batch run
    whose runs kernel read every event in place may pass the kernel's `key_bounds` (keys and the `END` of each
    stretch of time it read): each key's latest time is then read from those few rows, not from a scan of the
    events.
    """
    latest = q.latest_times(events, key_bounds if mode == "batch" else None)
    if mode == "batch" or (mode == "incremental" and progress is None):
        return latest.withColumn(CUT, F.lit(None).cast("bigint"))
    if mode == "backfill":
        assert backfill_cuts is not None
        return latest.join(backfill_cuts, list(q.keys)).select(*q.keys, CUT, *q.time_columns)
    assert progress is not None
    candidates = events if new_events is None else new_events
    pending = mark_unprocessed(candidates, progress, q, time=q.event_time(), mark=UNPROCESSED)
    latest = _carried_times(q.latest_times(pending.filter(F.col(UNPROCESSED))), progress, q)
    return latest.join(F.broadcast(progress.select(*q.keys, CUT)), list(q.keys), "left") \
        .select(*q.keys, CUT, *(c for c in latest.columns if c not in q.keys))


def _carried_times(latest: DataFrame, progress: DataFrame, q: SparkQuery) -> DataFrame:
    """The scope's keys' latest times over several streams: a stream with no new events of the key keeps the time
    `progress` holds for it (`latest` has NULL there), and the key's latest time is the latest of them."""
    if not q.stream_times:
        return latest
    prior = progress.select(*q.keys, *(F.col(c).alias(f"__prior{c}") for c in q.stream_times))
    carried = [F.coalesce(F.col(c), F.col(f"__prior{c}")).alias(c) for c in q.stream_times]
    return (latest.join(F.broadcast(prior), list(q.keys), "left").select(*q.keys, *carried)
            .withColumn(LAST_TIME, q.latest_time()))


def unsettled(q: SparkQuery, *, situations: DataFrame, pairs: DataFrame, matches: DataFrame | None) -> DataFrame:
    """Per key, the anchors of rows a later run may still change: open situations and pairs, provisional matches
    (`matches` None: a caller whose bound already lies before every provisional match, `next_progress`)."""
    anchors = derived_tables(q)
    parts = [
        situations.filter(F.col(V.TE).isNull()).select(*q.keys, anchors[V.SITUATIONS].anchor.alias(BOUND)),
        pairs.filter(F.col("a_te").isNull() | F.col("b_te").isNull())
        .select(*q.keys, anchors[V.PAIRS].anchor.alias(BOUND)),
    ]
    if matches is not None:
        parts.append(matches.filter(F.col(V.STATUS) == V.PROVISIONAL)
                     .select(*q.keys, anchors[V.MATCHES].anchor.alias(BOUND)))
    return reduce(DataFrame.unionByName, parts)


def cut_before(bounds: DataFrame, times: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Per key in `bounds` (keys, __bound; several rows per key allowed), the latest time in `times` (keys, __t)
    strictly before the key's least bound: the next cut.

    A key with no such time has no row (its cut is NULL: from the first event); the callers join the result to
    their keys. Joining it back to the bounds' keys here would compute the bounds twice (once for the broadcast,
    once for that join): for the progress rows, a second pass over every staged situation, pair and match.
    """
    least = bounds.groupBy(*keys).agg(F.min(BOUND).alias(BOUND))
    return (times.join(F.broadcast(least), list(keys)).filter(F.col(C.T) < F.col(BOUND))
            .groupBy(*keys).agg(F.max(C.T).alias(CUT)))


def next_progress(scope: Scope, q: SparkQuery, *, situations: DataFrame, pairs: DataFrame,
                  run_starts: DataFrame) -> DataFrame:
    """The state a run leaves for the next micro-batch: per key its latest event time and its next cut.

    `run_starts` (keys, __t) are event times of the run's slice (the starts of its runs); the cut is the latest
    of them before both the unsettled rows and the window's reach back from the latest event. Over several streams
    the reach is from the time every stream has told (`SparkQuery.settled_time`): a pair across two streams not
    decided yet (the slower one has not reached its decision) starts within the window of that decision.

    The reach is one time unit longer than a new match needs (its situations end after the latest event, so it
    starts after `latest - window`): a provisional match starts at `latest - window` or later
    (docs/semantics.md §5, `t - min(ts) <= d`), so the reach covers every one of them, and the matches, the widest
    staged table, are not read for them.
    """
    reach = scope.frame.select(*q.keys, (q.settled_time() - q.window_ceiling).alias(BOUND))
    open_rows = unsettled(q, situations=situations, pairs=pairs, matches=None)
    cuts = cut_before(reach.unionByName(open_rows), run_starts, q.keys)
    state = (*q.time_columns, *events_versions(q.stream_count))
    return scope.frame.select(*q.keys, *state).join(cuts, list(q.keys), "left")


def backfill_cut(q: SparkQuery, since: int, *, events: DataFrame, situations: DataFrame,
                 unsettled_rows: DataFrame, progress: DataFrame) -> DataFrame:
    """Cuts for a backfill from kernel time `since`, for the keys with events at or after `since`: before `since`
    minus the window, before every situation still alive then, before every unsettled row, and at or before the
    cut the next micro-batch would take (`progress`). Over several streams that last one reaches back from the
    time every stream has told (`next_progress`), which may lie well before `since` when one stream lags: the
    backfill's events may be what the slower stream had not told, and its recomputed slice then holds the event
    times the run's own progress cuts at."""
    reach = since - q.window_ceiling + 1
    timed = events.select(*q.keys, q.event_time().alias(C.T))
    touched = timed.filter(F.col(C.T) >= since).select(*q.keys).distinct()
    alive = situations.filter(F.col(V.TE).isNull() | (F.col(V.TE) >= reach)).select(*q.keys, F.col(V.TS).alias(BOUND))
    planned = progress.select(*q.keys, F.coalesce(F.col(CUT) + 1, F.lit(NO_CUT)).alias(BOUND))
    bounds = reduce(DataFrame.unionByName, [touched.withColumn(BOUND, F.lit(reach).cast("bigint")), alive,
                                            unsettled_rows, planned])
    return touched.join(cut_before(bounds.join(touched, list(q.keys)), timed, q.keys), list(q.keys), "left")
