"""The statement `pielake sql` is given, as it reads it before Spark does: one statement that reads (`READING`,
and no write after WITH's named queries or within a FROM: `_writes`), and the time `--as-of` names.

Nothing here imports Spark: a `pielake sql` that sends its statement to an engine checks it first, in a process
that has no Spark, and the engine checks it again as it would in a process of its own.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import UTC, datetime

from pielake.errors import PielakeError

# The statements that read, by their first word; a query may also start with FROM (`FROM t SELECT a`), but so
# does Hive's multi-insert (`FROM t INSERT INTO u SELECT a`), so a FROM is looked into (`_writes`).
READING = ("SELECT", "WITH", "FROM", "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN")
START_READING = "start with SELECT, WITH, SHOW, DESCRIBE or EXPLAIN"  # what a refusal asks for: the usual ones
# The words that start a statement that writes where a query could stand: after WITH's queries, and within FROM.
WRITING = ("INSERT", "DELETE", "UPDATE", "MERGE")


class SqlError(PielakeError):
    """A statement `pielake sql` will not run, or one Spark rejected."""


@dataclass(frozen=True)
class Token:
    """A word, a quoted literal or name, or a character of punctuation, where it stands in the statement, and how
    many parentheses enclose it."""

    text: str
    start: int
    depth: int

    @property
    def word(self) -> str:
        """The token as a keyword is compared: upper case; a quoted literal or name is none."""
        return self.text.upper() if self.text[:1].isalnum() or self.text[:1] == "_" else ""


def check_read_only(statement: str) -> str:
    """The statement without the comments before it and the `;` after it, if it is one statement that reads;
    else a SqlError. A `;` or a comment inside a quoted literal or name is part of it. A statement is read as
    Spark's lexer reads it (`lexed`), so that what is checked is what Spark runs."""
    tokens = lexed(statement)
    while tokens and tokens[-1].text == ";":
        tokens.pop()
    if any(t.text == ";" for t in tokens):
        raise SqlError("one statement at a time: remove the ';' inside the query")
    if not tokens:
        raise SqlError(f"pielake sql only reads, and was given no statement: {START_READING}")
    query = tokens[next((i for i, t in enumerate(tokens) if t.text != "("), 0):]  # `(SELECT ...) UNION (...)`
    if query[0].word not in READING:
        raise SqlError(_not_reading(statement, query[0]))
    writing = _writes(query)
    if writing is not None:
        line, column = place(statement, writing.start)
        raise SqlError(f"pielake sql only reads: this statement writes, with {writing.text} at line {line}, column "
                       f"{column}; ask for the rows with a SELECT, and write tables with Spark's own tools")
    return statement[tokens[0].start:tokens[-1].start + len(tokens[-1].text)]


def _not_reading(statement: str, first: Token) -> str:
    """Why a statement whose first word reads nothing is refused: the word and where it stands, and the reading
    word it misspells, if it is one (`SELEC`)."""
    line, column = place(statement, first.start)
    close = difflib.get_close_matches(first.word, READING, n=1, cutoff=0.75)
    meant = f"; did you mean {close[0]}?" if close else ""
    return (f"pielake sql only reads, and this statement starts with {first.text} at line {line}, column {column}: "
            f"{START_READING}{meant}")


def _writes(tokens: list[Token]) -> Token | None:
    """The word that makes a statement of reading words write (`WITH q AS (...) INSERT INTO t ...`, `FROM t
    INSERT INTO u ...`), if any: the first word of the statement after WITH's named queries, or an INSERT after a
    FROM, outside parentheses. Any other statement that starts with a reading word reads."""
    at = 0
    if tokens[0].word == "WITH":
        at = 2 if len(tokens) > 1 and tokens[1].word == "RECURSIVE" else 1
        while at < len(tokens):  # each `name [(columns)] [AS] (query)`, separated by commas
            at += 1
            while at < len(tokens) and (tokens[at].text == "(" or tokens[at].word == "AS"):
                at = _after_group(tokens, at) if tokens[at].text == "(" else at + 1
            if at >= len(tokens) or tokens[at].text != ",":
                break
            at += 1
    main = tokens[at:]
    if main and main[0].word in WRITING:
        return main[0]
    if main and main[0].word == "FROM":
        return next((t for t in main if t.depth == main[0].depth and t.word == "INSERT"), None)
    return None


def _after_group(tokens: list[Token], at: int) -> int:
    """The index after the parenthesised group that opens at `at`."""
    depth = tokens[at].depth
    at += 1
    while at < len(tokens) and not (tokens[at].text == ")" and tokens[at].depth == depth):
        at += 1
    return at + 1


def lexed(statement: str) -> list[Token]:
    """The statement's tokens as Spark's lexer reads them: comments left out (`--` to the line's end, and `/* */`,
    which nest), literals in quotes ('text' and "text", with backslash escapes unless raw, r'text') and names in
    backquotes (a doubled backquote inside) each one token. An unclosed comment or quote runs to the end."""
    tokens, depth, i = [], 0, 0
    while i < len(statement):
        char, pair = statement[i], statement[i:i + 2]
        if char.isspace():
            i += 1
        elif pair == "--":
            end = statement.find("\n", i)
            i = len(statement) if end < 0 else end + 1
        elif pair == "/*":
            i = _comment_end(statement, i)
        elif char in "'\"`":
            raw = char != "`" and bool(tokens) and tokens[-1].text in ("r", "R") and tokens[-1].start + 1 == i
            end = _quote_end(statement, i, escapes=char != "`" and not raw)
            if raw:
                tokens.pop()
            tokens.append(Token(statement[i - raw:end], i - raw, depth))
            i = end
        elif char.isalnum() or char == "_":
            end = i
            while end < len(statement) and (statement[end].isalnum() or statement[end] == "_"):
                end += 1
            tokens.append(Token(statement[i:end], i, depth))
            i = end
        else:
            depth -= char == ")"
            tokens.append(Token(char, i, depth))
            depth += char == "("
            i += 1
    return tokens


def _comment_end(statement: str, i: int) -> int:
    """The index after the bracketed comment that opens at `i`; one opened inside it closes first."""
    depth = 0
    while i < len(statement):
        pair = statement[i:i + 2]
        if pair in ("/*", "*/"):
            depth += 1 if pair == "/*" else -1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return i


def _quote_end(statement: str, i: int, *, escapes: bool) -> int:
    """The index after the quoted literal or name that opens at `i` (a doubled quote closes it and opens another,
    which Spark reads as one)."""
    quote, i = statement[i], i + 1
    while i < len(statement):
        if escapes and statement[i] == "\\":
            i += 2
        elif statement[i] == quote:
            return i + 1
        else:
            i += 1
    return i


def place(statement: str, offset: int) -> tuple[int, int]:
    """The line and column (from 1) of an offset into the statement."""
    before = statement[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def as_of_time(text: str) -> datetime:
    """`--as-of`'s time: ISO-8601, UTC unless it says its zone; else a SqlError saying how to write it."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SqlError(f"--as-of '{text}' is not a time: write it in ISO-8601 (2026-11-30T12:00:00Z, or "
                       "2026-11-30 12:00, which is UTC), as DESCRIBE HISTORY <table> shows its versions' "
                       "times") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
