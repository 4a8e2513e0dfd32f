"""One tree of errors, so the CLI can catch every user mistake at one boundary.

`PielakeError` is the root. Query errors carry a list of `ErrorDetail` dicts (line, col, the offending text,
a caret excerpt and a suggestion) so tests assert on positions rather than on message wording, and several
semantic errors are reported together, ending with "... and N more".
"""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from pielake.engine.memory import LEAST_MB, allowed_mb, heap_of_environment
from pielake.exitcodes import EXIT_JVM_LOST, EXIT_NO_SPACE, EXIT_UNAVAILABLE, EXIT_USAGE

MAX_LISTED_ERRORS = 5


class PielakeError(Exception):
    """Root of every error pielake raises on purpose; `exit_code` is what the command exits with."""

    exit_code = EXIT_USAGE


class NoSpaceError(PielakeError):
    """A disk a command writes to is full: the machine's to mend, not the query's or pielake's."""

    exit_code = EXIT_NO_SPACE


NO_SPACE = "No space left on device"  # ENOSPC as the C library words it, and so the JVM's IOException
# How long a JVM whose socket py4j found closed may take to end: the kernel closes a killed process's files before
# it marks the process ended, so Python can meet the closed socket before the JVM can be waited for
JVM_END_GRACE_S = 2.0


@dataclass(frozen=True)
class Then:
    """What a command was doing when the machine failed it, as the error names it (`doing`: `run`), and what its
    user does once the machine is mended (`again`)."""

    doing: str
    again: str


# What a run that the machine stopped leaves: Delta commits are whole, and a run redoes what the last one left undone
A_RUN = Then("run", "then run the query again: each table keeps its last whole commit, and the next run redoes what "
                    "this one left undone")


def a_read(doing: str, verb: str) -> Then:
    """A command that only reads (a statement, a plot): there is nothing of it to redo but all of it."""
    return Then(doing, f"then {verb} the {doing} again: it only reads, so nothing of it is left to redo")


def no_space(error: BaseException, then: Then = A_RUN) -> NoSpaceError | None:
    """What to tell the user where `error`, or an error it came from, is a disk being full, else None: Python's
    OSError (a lock, a log), or a JVM's IOException inside whatever Spark or Delta raised with it, whose text
    holds the JVM's trace. Nothing of a run is lost to it: Delta keeps whole commits only, and the query's next run
    redoes what this one left undone; a read (a statement's spill, a plot's) is read again."""
    for raised in _chain(error):
        if (isinstance(raised, OSError) and raised.errno == errno.ENOSPC) or NO_SPACE in str(raised):
            return NoSpaceError(f"a disk this {then.doing} writes to is full: free space there, {then.again}")
    return None


class JvmLostError(PielakeError):
    """Spark's JVM of this process ended while the command used it: the machine's doing, not the query's.
    `ended` is its exit status (`Popen.returncode`), for whoever tells it in words of its own (the engine)."""

    exit_code = EXIT_JVM_LOST

    def __init__(self, message: str, ended: int | None = None):
        super().__init__(message)
        self.ended = ended


def jvm_lost(error: BaseException, then: Then = A_RUN) -> JvmLostError | None:
    """What to tell the user where `error` is py4j losing this process's Spark JVM, which has ended, else None.

    A JVM that ends in the middle of a run was, as a rule, killed by the system for want of memory (Linux's
    out-of-memory killer, a container's limit), with SIGKILL, which it cannot answer: py4j then raises only that
    the JVM's side is gone, in whichever form the call it was making meets it (an empty answer, a reset or a
    refused connection, a call that "failed" with no error from Java), and the code that was cleaning up after
    it may raise another. A run's commits are whole, so running it again with more memory redoes what it left.
    """
    if "pyspark" not in sys.modules or not any(lost_by_py4j(raised) for raised in _chain(error)):
        return None  # no JVM of this process's own: a client of an engine imports no Spark
    from pyspark import SparkContext  # noqa: PLC0415 (loaded already)

    process = getattr(SparkContext._gateway, "proc", None)
    if process is None:
        return None
    try:
        ended = process.wait(timeout=JVM_END_GRACE_S)
    except subprocess.TimeoutExpired:
        return None  # the JVM runs on: the error is one py4j meets with Java alive
    allowed = allowed_mb()
    fix = (f"Give the {then.doing} at least {LEAST_MB:,} MB" if allowed is not None and allowed < LEAST_MB else
           f"Give the {then.doing} more memory, or Spark a smaller heap ({_heap_setting()}) where the input is small")
    return JvmLostError(f"Spark's JVM ended in the middle of the {then.doing}: it "
                        f"{how_it_ended(ended, '<lake>/_logs/')}. {fix}, {then.again}", ended)


def how_it_ended(ended: int, log: str) -> str:
    """How a JVM that ended with `ended` (`Popen.returncode`) ended, as a sentence's predicate: killed for memory
    as a rule where it was SIGKILL, else its exit code and the `log` that says why."""
    if ended != -signal.SIGKILL:
        return f"exited with code {ended}; its log ({log}) says why"
    allowed = allowed_mb()
    here = "" if allowed is None else f" (this process may use {allowed:,} MB)"
    return (f"was killed (SIGKILL), as the system kills the largest process where the machine or its container "
            f"runs short of memory{here}")


def _heap_setting() -> str:
    """Where the heap of a run's JVM is set: `PIELAKE_DRIVER_MEMORY`, unless `_JAVA_OPTIONS` sets it over that."""
    heap = heap_of_environment()
    return ("PIELAKE_DRIVER_MEMORY" if heap is None else
            f"the {heap} of _JAVA_OPTIONS, which wins over PIELAKE_DRIVER_MEMORY")


def lost_by_py4j(error: BaseException) -> bool:
    """`error` is py4j's with no answer from Java (`Py4JError` and its kinds, but for `Py4JJavaError`, which Java
    sent), a connection's that py4j's socket met (a new connection to a JVM that is gone is refused, and py4j
    raises that refusal as it is), or the early end of the socket PySpark reads a result's rows from as the JVM
    serves them (`toLocalIterator`, `collect`), which PySpark raises as Python's `EOFError`."""
    from_py4j = type(error).__module__.startswith("py4j") and getattr(error, "java_exception", None) is None
    return from_py4j or isinstance(error, ConnectionError | EOFError)


class EngineLostError(PielakeError):
    """The engine this process's Spark Connect session used stopped answering in the middle of a command."""

    exit_code = EXIT_UNAVAILABLE


def engine_lost(error: BaseException) -> EngineLostError | None:
    """What to tell the user where `error` is a Spark Connect call whose engine went away: gRPC's UNAVAILABLE (no
    server: killed, or gone from the network) or CANCELLED (the server reset the call's stream, as an engine that
    stops does), which PySpark passes on as the text of a `SparkConnectGrpcException` or as `RetriesExceeded`, the
    gRPC error behind either; else None. Nothing the command did is lost: `pielake sql` and `plot` only read, and
    a maintenance step's commits are whole."""
    if "grpc" not in sys.modules:
        return None  # no Spark Connect client in this process
    import grpc  # noqa: PLC0415 (loaded already)

    gone = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    for raised in _chain(error, replaced=True):
        if isinstance(raised, grpc.RpcError) and raised.code() in gone:
            return EngineLostError(stopped_answering(raised.details()))
    return None


def stopped_answering(details: str) -> str:
    """What a command whose engine stopped answering in the middle of it tells its user, `details` being what
    the connection said."""
    return (f"the engine stopped answering in the middle of the command ({details}): `pielake engine status --lake "
            "LAKE` says whether it runs, and its log (LAKE/_engine/engine.log) why it stopped; start it again "
            "(`pielake engine start --lake LAKE`) and run the command again")


def for_the_user(error: BaseException, then: Then = A_RUN) -> PielakeError | None:
    """`error` as a command tells it its user in one line, or None where it is a bug to report with its trace: a
    PielakeError, a full disk (`no_space`), a lost JVM (`jvm_lost`) or engine (`engine_lost`), whatever raised
    it; `then` words what the command was doing and what follows."""
    if isinstance(error, PielakeError):
        return error
    return no_space(error, then) or jvm_lost(error, then) or engine_lost(error)


def _chain(error: BaseException, *, replaced: bool = False) -> Iterator[BaseException]:
    """`error` and the errors it was raised from or while handling, each once, as Python shows them: not the one
    a `raise … from None` replaced, unless `replaced` (PySpark's Spark Connect client replaces gRPC's error
    with one of its own that keeps its text only)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or (None if error.__suppress_context__ and not replaced else error.__context__)


def spark_said(error: Exception) -> str:
    """The first line of what Spark says of an error, for a message of pielake's own: its text, or, of a JVM error
    PySpark passes on as it came (rows streamed to a classic session: `toLocalIterator`), its root cause's, as
    py4j's names only the call that failed."""
    cause = getattr(error, "java_exception", None)
    while cause is not None and cause.getCause() is not None:
        cause = cause.getCause()
    said = str(error if cause is None else cause.toString()).strip()
    return said.splitlines()[0] if said else type(error).__name__


@dataclass(frozen=True)
class ErrorDetail:
    """Where and what one query error is; `col` and `line` are 1-based."""

    description: str
    line: int
    col: int
    highlight: str
    context: str
    suggestion: str | None = None

    def render(self) -> str:
        hint = f" {self.suggestion}" if self.suggestion else ""
        return f"{self.description}. Line {self.line}, Col {self.col}.{hint}\n{self.context}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def source_excerpt(source: str, line: int, col: int, width: int) -> str:
    """The source line with a caret run under the offending text, as sqlglot and lark print it."""
    lines = source.splitlines() or [""]
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    caret = " " * (col - 1) + "^" * max(1, min(width, len(text) - col + 1 if text else 1))
    return f"  {text}\n  {caret}"


class QueryError(PielakeError):
    """A query that cannot be accepted; `errors` lists every problem found."""

    def __init__(self, errors: list[ErrorDetail], note: str | None = None):
        self.errors = errors
        shown = [e.render() for e in errors[:MAX_LISTED_ERRORS]]
        more = len(errors) - MAX_LISTED_ERRORS
        if more > 0:
            shown.append(f"... and {more} more")
        super().__init__("\n".join(shown + ([note] if note else [])))

    def noted(self, note: str) -> QueryError:
        """The same errors with `note` after them: what the query was checked against, where the query alone
        does not show it (a stream's types inferred from its file)."""
        return type(self)(self.errors, note)

    @property
    def first(self) -> ErrorDetail:
        return self.errors[0]


class QuerySyntaxError(QueryError):
    """The text does not follow the grammar (pielake/query/grammar.ebnf)."""


class QuerySemanticError(QueryError):
    """The text parses but means nothing valid: unknown symbol, unused symbol, bad duration, ..."""


class CompileError(PielakeError):
    """A checked query that cannot be turned into Spark Columns (a bug or an unsupported type)."""
