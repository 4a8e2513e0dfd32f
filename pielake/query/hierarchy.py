"""Queries over other queries' matches form a hierarchy (docs/semantics.md §1): the query a `FROM matches_<query>`
names must be known where the query is, and following the matches read must never lead back to the query, or
each level would wait for the other to publish first.

Where queries are known is the caller's: Airflow's registry folder, or the folder of a file `pielake check` reads
(the upstream is the `<query>.tpq` beside it). Both ask `check_upstreams`, so both refuse the same queries, each
error naming the query's `FROM` with its line and column.
"""

from __future__ import annotations

from collections.abc import Callable

from pielake.query.analyzer import QueryPlan


def check_upstreams(plan: QueryPlan, find: Callable[[str], QueryPlan | None], where: str) -> None:
    """Raise a QuerySemanticError naming `plan`'s FROM if a query whose matches it reads, directly or through
    others, is not found (`find`, by name, case-insensitive) `where`, or if they lead back to `plan`."""
    reader, chain = plan, [plan.name]
    while (source := reader.upstream_source) is not None:
        upstream = find(source.upstream)
        if upstream is None:
            plan.refuse(plan.sources[0], f"no query {source.upstream} ({source.upstream}.tpq) is in {where}, "
                        f"whose matches query {reader.name} reads", f"Put {source.upstream}.tpq beside it, or "
                        "correct the name after `matches_`.")
        if upstream.name.lower() == plan.name.lower():
            plan.refuse(plan.sources[0], f"queries read each other's matches in a cycle: "
                        f"{' -> '.join([*chain, upstream.name])}", "Each would wait for the other to publish: let "
                        "one of them read a stream of events instead.")
        if upstream.name.lower() in {name.lower() for name in chain}:
            return  # a cycle further up, reported on the queries in it
        chain.append(upstream.name)
        reader = upstream
