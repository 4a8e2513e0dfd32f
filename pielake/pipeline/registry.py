"""The stages of a run, each declared once: its name, the function that runs it, what it reads and stages, the
gate that checks its output, and whether it runs once per constraint.

Everything that knows a run's steps derives them from here: the runner's loop (`pielake.pipeline.runner`), the
spark-submit entry point (`jobs/step.py`), Airflow's task graph (`pielake.orchestration.airflow`) and `pielake
explain`. A new stage is one declaration in `STAGES` and its function.

The registry names its functions by import path and imports them only when a step runs: Airflow parses DAG files
often, and building a DAG must not import Spark.

A run's steps, in order (`Registry.steps`):

    ingest -> check_events -> situations -> check_situations -> pairs_c1 ... pairs_cN -> check_pairs
           -> matches -> check_matches -> publish

A stage that runs per constraint is one step per constraint where an orchestrator can run them side by side
(`pairs_c1`, `pairs_c2`, ...), and one step for all of them in one process (`pairs`: one Spark plan, one write).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pielake import vocabulary as V
from pielake.errors import PielakeError
from pielake.query.analyzer import QueryPlan

CHECK = "check_"  # a gate's step is its suite's name after this


def _resolve(path: str) -> Callable[..., Any]:
    """`package.module:function` -> the function."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Gate:
    """A data-quality gate: the suite `expectations/<suite>.json`, run on what `frame` (an import path) gives of
    its stage's staged output (`pielake.pipeline.gates`)."""

    suite: str
    frame: str
    per_stream: bool = False  # over several streams, each stream's output is checked (`run_gate`)

    def frame_function(self) -> Callable[..., Any]:
        return _resolve(self.frame)


@dataclass(frozen=True)
class Stage:
    """One stage of a run. `run` is the import path of its function, `(StepContext) -> StageResult`; `reads` and
    `stages` name the tables it reads and the staged tables it writes (`<kind>` for `<kind>_<query>`), `writes`
    and `publishes` the lake's tables it changes (`audited_before` says what they imply); `per_constraint`: one
    step per constraint of the query."""

    name: str
    run: str
    reads: tuple[str, ...]
    stages: tuple[str, ...]
    gate: Gate | None = None
    per_constraint: bool = False
    doc: str = ""
    publishes: tuple[str, ...] = ()  # the tables users read that it changes (Airflow: the task's Assets)
    writes: tuple[str, ...] = ()  # the lake's tables it changes outside staging before publish

    def function(self) -> Callable[..., Any]:
        return _resolve(self.run)


@dataclass(frozen=True)
class Step:
    """One step of a run: a stage, or its gate (`check`); `constraints`, those a per-constraint stage's step
    runs for."""

    name: str
    stage: Stage
    check: bool = False
    constraints: tuple[str, ...] = ()


@dataclass(frozen=True)
class Registry:
    """The stages of a run, in order."""

    stages: tuple[Stage, ...]

    def layers(self, plan: QueryPlan, *, parallel: bool = True) -> list[list[Step]]:
        """The steps in order, those that may run side by side (a per-constraint stage's, with `parallel`) in
        one layer."""
        out: list[list[Step]] = []
        for stage in self.stages:
            ids = tuple(c.id for c in plan.constraints)
            if stage.per_constraint and parallel:
                out.append([Step(f"{stage.name}_{c}", stage, constraints=(c,)) for c in ids])
            else:
                out.append([Step(stage.name, stage, constraints=ids if stage.per_constraint else ())])
            if stage.gate is not None:
                out.append([Step(CHECK + stage.gate.suite, stage, check=True)])
        return out

    def steps(self, plan: QueryPlan, *, parallel: bool = True) -> list[Step]:
        return [step for layer in self.layers(plan, parallel=parallel) for step in layer]

    def step(self, plan: QueryPlan, name: str) -> Step:
        """The step called `name`, in either form of a per-constraint stage (`pairs_c1` or `pairs`)."""
        for step in [*self.steps(plan), *self.steps(plan, parallel=False)]:
            if step.name == name:
                return step
        names = ", ".join(s.name for s in self.steps(plan))
        raise PielakeError(f"no step '{name}' in a run of {plan.name}; the steps are {names}")

    def before(self, plan: QueryPlan, name: str) -> list[Step]:
        """The steps an orchestrator runs before the step called `name` starts: those of every layer before its
        own, not the steps beside it (`pairs_c2` comes after `check_situations`, not after `pairs_c1`)."""
        return [step for layer in self.layers(plan)[:self._layer(plan, name)] for step in layer]

    def after(self, plan: QueryPlan, name: str, other: str) -> bool:
        """Whether the step called `name` comes after the step called `other`: in a later layer, or beside it (a
        per-constraint stage's other steps). False if `other` is no step of the run."""
        if other not in {s.name for s in [*self.steps(plan), *self.steps(plan, parallel=False)]}:
            return False
        mine, theirs = self._layer(plan, name), self._layer(plan, other)
        return mine > theirs or (mine == theirs and name != other)

    def _layer(self, plan: QueryPlan, name: str) -> int:
        """The index in `layers` of the step called `name`, in either form of a per-constraint stage."""
        target = self.step(plan, name)
        return next(i for i, layer in enumerate(self.layers(plan))
                    if any(step.stage == target.stage and step.check == target.check for step in layer))

    def last(self, plan: QueryPlan) -> Step:
        """The step that ends a run: after it the run is published."""
        return self.steps(plan)[-1]

    @staticmethod
    def audited_before(step: Step) -> bool:
        """Whether every gate before `step` must have passed when it starts: it changes tables outside staging.
        Any other step only stages, so it may run while the gates before it still check (a run in one process
        does so); a failed gate then stops the run at the next step that would change the lake."""
        return bool(step.stage.publishes or step.stage.writes)

    def before_admission(self) -> set[str]:
        """The steps a run may end at having admitted none of its events: those of the stages before the one that
        writes them to their stream's table, and their gates."""
        names: set[str] = set()
        for stage in self.stages:
            if V.EVENTS in stage.writes:
                return names
            names |= {stage.name, *([CHECK + stage.gate.suite] if stage.gate else [])}
        return names

    def last_check(self, plan: QueryPlan) -> Step | None:
        """The run's last gate, after which no gate can stop it."""
        return next((step for step in reversed(self.steps(plan)) if step.check), None)


STAGES = Registry((
    Stage("ingest", "pielake.pipeline.ingest:ingest", reads=("the events file", V.QUARANTINE), stages=(V.EVENTS,),
          writes=(V.QUARANTINE,), gate=Gate("events", "pielake.pipeline.gates:events_frame", per_stream=True),
          doc="Reads the events file into staging; bad rows go to the quarantine with their reason."),
    Stage("situations", "pielake.pipeline.stages:derive_situations", reads=(V.EVENTS, V.PROGRESS),
          stages=(V.SCOPE, V.SEGMENTS, V.SITUATIONS), writes=(V.EVENTS,),
          gate=Gate("situations", "pielake.pipeline.gates:situations_frame"),
          doc="Appends the audited events, fixes the run's scope and derives every symbol's situations."),
    Stage("pairs", "pielake.pipeline.stages:detect_constraints", reads=(V.SEGMENTS, V.SITUATIONS, V.SCOPE),
          stages=(V.PAIRS,), gate=Gate("pairs", "pielake.pipeline.gates:pairs_frame"), per_constraint=True,
          doc="Detects a constraint's PiePairs: its automata over the minterm runs, or a range join."),
    Stage("matches", "pielake.pipeline.stages:join_matches", reads=(V.PAIRS, V.SITUATIONS, V.SCOPE),
          stages=(V.MATCHES,), gate=Gate("matches", "pielake.pipeline.gates:matches_frame"),
          doc="Joins the PiePairs into matches, with detection time, status and RETURN columns."),
    Stage("publish", "pielake.pipeline.stages:publish", reads=(V.SITUATIONS, V.PAIRS, V.MATCHES, V.SCOPE),
          stages=(), publishes=(V.SITUATIONS, V.PAIRS, V.MATCHES),
          doc="Merges the staged rows and the progress into the query's results table, in one commit."),
))
