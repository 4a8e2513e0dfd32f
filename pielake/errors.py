"""One tree of errors, so the CLI can catch every user mistake at one boundary.

`PielakeError` is the root. Query errors carry a list of `ErrorDetail` dicts (line, col, the offending text,
a caret excerpt and a suggestion) so tests assert on positions rather than on message wording, and several
semantic errors are reported together, ending with "... and N more".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pielake.exitcodes import EXIT_USAGE

MAX_LISTED_ERRORS = 5


class PielakeError(Exception):
    """Root of every error pielake raises on purpose; `exit_code` is what the command exits with."""

    exit_code = EXIT_USAGE


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
