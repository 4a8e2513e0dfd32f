"""Tokenizer for the TPStream query language.

Why hand-written: the language has two lexical quirks a generated lexer handles badly. Literals may carry a
unit glued to the number (`8m/s2`, `5s`), and comments (`--`, `/* */`) may stand anywhere and must vanish
without a trace. Identifiers are ASCII only, so a look-alike such as a full-width F in FROM is an error,
never a silently different keyword. Quotes and backticks around identifiers are refused for the same reason.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from enum import Enum

from pielake.errors import ErrorDetail, QuerySyntaxError, source_excerpt

MAX_QUERY_BYTES = 1_000_000


class Kind(Enum):
    IDENT = "identifier"
    NUMBER = "number"
    STRING = "string"
    OP = "operator"
    EOF = "end of query"


@dataclass(frozen=True)
class Span:
    """Position of a token or node in the source: 1-based line and column, 0-based offsets."""

    line: int
    col: int
    start: int
    end: int


def detail_at(source: str, span: Span, message: str, suggestion: str | None = None) -> ErrorDetail:
    """An error of `source` at `span`: its line and column, the text it covers and a caret under it."""
    width = max(1, span.end - span.start)
    return ErrorDetail(message, span.line, span.col, source[span.start:span.end],
                       source_excerpt(source, span.line, span.col, width), suggestion)


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    span: Span
    unit: str | None = None  # a unit glued to a NUMBER, as in `8m/s2`

    def upper(self) -> str:
        return self.text.upper()


# Longest first, so `<=` wins over `<`.
OPERATORS = ("<>", "<=", ">=", "!=", "==", "&&", "||", ",", ";", "(", ")", ".", "+", "-", "*", "/", "%",
             "=", "<", ">", "&", "|", "!")
_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENT_PART = _IDENT_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_UNIT_PART = _IDENT_PART | frozenset("/^")
# Latin letters that Unicode does not decompose into an ASCII letter and a mark, spelled as their languages spell
# them in ASCII.
_LATIN_SPELLINGS = str.maketrans({"ß": "ss", "ẞ": "SS", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o",
                                  "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th",
                                  "Þ": "TH", "\u0131": "i"})  # U+0131, dotless i


# The signs papers write comparisons and logic in (ISEQ's `A.ts ≤ B.ts ∧ …`), as a query writes them: less or
# equal, greater or equal, not equal, and, or, not, minus, times and division.
_MATH_SIGNS = {"\u2264": "<=", "\u2265": ">=", "\u2260": "!=", "\u2227": "AND", "\u2228": "OR", "\u00ac": "NOT",
               "\u2212": "-", "\u00d7": "*", "\u00f7": "/"}
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# SQL's null-safe equality (`<=>`, IS NOT DISTINCT FROM) counts NULL as a value, where a predicate's NULL is false.
NULL_SAFE_HINT = "write x = 'v', or x IS NULL where the value is NULL."
# A query reads each column in the type its stream gives it, and numbers of every type compare with each other, so
# it has no cast: what SQL casts for is declared once, in the stream's schema.
CAST_HINT = ("Compare the column as it is (numbers of every type compare with each other: x > 3); a column read in "
             "another type is declared so in its stream's schema (schemas/<stream>.yaml).")
# Other languages' operators, which no token here is: each is refused as what it is there, with what to write.
_FOREIGN_OPERATORS = {
    "<=>": ("'<=>' is Spark's equality that counts NULL as a value", f"A predicate's NULL is false: {NULL_SAFE_HINT}"),
    "::": ("'::' casts in PostgreSQL; a query has no cast", CAST_HINT)}


def ascii_spelling(text: str) -> str:
    """`text` with its accented Latin letters spelled in ASCII (`température` -> `temperature`, `Straße` ->
    `Strasse`): the name an identifier of the language, which is ASCII only, gives a column a file names so.
    Other characters are left as they are."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_LATIN_SPELLINGS))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def plain_name(text: str) -> str:
    """`text` as a plain identifier: accented letters spelled in ASCII (`ascii_spelling`), every run of other
    characters than ASCII letters and digits one `_`, none at either end, and `_` before a name that would not
    start with a letter (`speed km/h` -> `speed_km_h`, `# Timestamp` -> `Timestamp`, `température` ->
    `temperature`, `1st` -> `_1st`)."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", ascii_spelling(text)).strip("_")
    return name if name[:1].isalpha() else f"_{name}"


def column_name(name: str) -> str:
    """The name a query calls a file's column by: a plain name as it is, another as `plain_name` spells it."""
    return name if PLAIN_NAME.fullmatch(name) else plain_name(name)


class _Scanner:
    def __init__(self, source: str):
        self.src = source
        self.pos = 0
        self.tokens: list[Token] = []
        # Where each line ends, found once: a token's line is then a binary search, not a count of the line
        # breaks before it, which made a query of a megabyte take minutes to read.
        self.line_ends = [i for i, ch in enumerate(source) if ch == "\n"]

    def place(self, start: int) -> tuple[int, int]:
        """The line and the column (both from 1) of the character at `start`."""
        line = bisect.bisect_left(self.line_ends, start)
        return line + 1, start - (self.line_ends[line - 1] + 1 if line else 0) + 1

    def error(self, message: str, start: int, width: int = 1, suggestion: str | None = None) -> QuerySyntaxError:
        line, col = self.place(start)
        detail = ErrorDetail(message, line, col, self.src[start:start + width],
                             source_excerpt(self.src, line, col, width), suggestion)
        return QuerySyntaxError([detail])

    def span(self, start: int) -> Span:
        return Span(*self.place(start), start, self.pos)

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.src[i] if i < len(self.src) else ""

    def run(self) -> list[Token]:
        while self.pos < len(self.src):
            ch = self.peek()
            if ch in " \t\r\n\f":
                self.pos += 1
            elif ch == "-" and self.peek(1) == "-":
                self.skip_line_comment()
            elif ch == "/" and self.peek(1) == "*":
                self.skip_block_comment()
            elif ch in _IDENT_START:
                self.identifier()
            elif ch in _DIGITS or (ch == "." and self.peek(1) in _DIGITS):
                self.number()
            elif ch == "'":
                self.string()
            elif ch in "\"`":
                raise self.quoted(ch)
            else:
                self.operator()
        end = len(self.src.rstrip())  # point at the end of the text, not at trailing blank lines
        self.pos = end
        self.tokens.append(Token(Kind.EOF, "", self.span(end)))
        return self.tokens

    def quoted(self, quote: str) -> QuerySyntaxError:
        """A quoted identifier is refused: a file's column is named as ingest reads it (`column_name`), so the
        error names that name for what is quoted, and single quotes for a text value."""
        line_end = self.src.find("\n", self.pos)
        end = self.src.find(quote, self.pos + 1, len(self.src) if line_end < 0 else line_end)
        inside = self.src[self.pos + 1:end] if end > 0 else ""
        if not inside.strip():
            return self.error(f"quoted identifier {quote}...{quote} is not allowed", self.pos,
                              suggestion="Use a plain name of letters, digits and '_'; string literals take single "
                                         "quotes.")
        if self.names_a_returned_column():
            suggestion = f"Name the column without quotes: AS {column_name(inside)}."
        else:
            text = inside.replace("'", "''")
            suggestion = (f"A file's column {quote}{inside}{quote} is read as {column_name(inside)}: write that "
                          f"name; a text value takes single quotes ('{text}').")
        return self.error(f"quoted identifier {quote}{inside}{quote} is not allowed", self.pos, end - self.pos + 1,
                          suggestion=suggestion)

    def names_a_returned_column(self) -> bool:
        """The text at hand follows `AS` in RETURN, the last clause: it names an output column, as SQL's
        `AS "Avg Speed"` does, not a file's column."""
        def word(token: Token, text: str) -> bool:
            return token.kind is Kind.IDENT and token.upper() == text

        return bool(self.tokens) and word(self.tokens[-1], "AS") and any(word(t, "RETURN") for t in self.tokens)

    def skip_line_comment(self) -> None:
        end = self.src.find("\n", self.pos)
        self.pos = len(self.src) if end < 0 else end

    def skip_block_comment(self) -> None:
        end = self.src.find("*/", self.pos + 2)
        if end < 0:
            raise self.error("unterminated block comment", self.pos, 2, "Close it with '*/'.")
        self.pos = end + 2

    def identifier(self) -> None:
        start = self.pos
        while self.peek() in _IDENT_PART:
            self.pos += 1
        self.tokens.append(Token(Kind.IDENT, self.src[start:self.pos], self.span(start)))

    def number(self) -> None:
        start = self.pos
        self._digits()
        if self.peek() == "." and self.peek(1) in _DIGITS:
            self.pos += 1
            self._digits()
        if self.peek() in "eE" and self.peek() and (
                self.peek(1) in _DIGITS or (self.peek(1) in "+-" and self.peek(2) in _DIGITS)):
            self.pos += 2
            self._digits()
        text = self.src[start:self.pos]
        unit = self._unit()
        self.tokens.append(Token(Kind.NUMBER, text, self.span(start), unit))

    def _unit(self) -> str | None:
        """The unit after a number: glued to it (`8m/s2`, `70mph`), or after spaces when it is a ratio or a power
        (`70 km/h`, `9.8 m/s^2`). A number is never followed by a name otherwise, so a ratio there is a unit,
        never a division by a column; a single spaced word (`70 mph`) is the parser's to tell (`SPACED_UNITS`)."""
        number_end = self.pos
        while self.peek() in (" ", "\t"):
            self.pos += 1
        word_start = self.pos
        if self.peek() in _IDENT_START:
            while self.peek() in _UNIT_PART:
                self.pos += 1
        word = self.src[word_start:self.pos]
        glued = word_start == number_end
        ratio = any(c in word for c in "/^") and word[-1] not in "/^"
        if word and (glued or ratio):
            return word
        self.pos = number_end
        return None

    def _digits(self) -> None:
        while self.peek() in _DIGITS:
            self.pos += 1

    def string(self) -> None:
        start = self.pos
        self.pos += 1
        chars: list[str] = []
        while True:
            ch = self.peek()
            if not ch:
                raise self.error("unterminated string literal", start, 1, "Close it with a single quote.")
            if ch == "'":
                if self.peek(1) == "'":
                    chars.append("'")
                    self.pos += 2
                    continue
                self.pos += 1
                break
            chars.append(ch)
            self.pos += 1
        self.tokens.append(Token(Kind.STRING, "".join(chars), self.span(start)))

    def operator(self) -> None:
        for foreign, (message, hint) in _FOREIGN_OPERATORS.items():
            if self.src.startswith(foreign, self.pos):
                raise self.error(message, self.pos, len(foreign), hint)
        for op in OPERATORS:
            if self.src.startswith(op, self.pos):
                start = self.pos
                self.pos += len(op)
                self.tokens.append(Token(Kind.OP, op, self.span(start)))
                return
        ch = self.peek()
        name = unicodedata.name(ch, "unnamed character")
        raise self.error(f"unexpected character {ch!r} (U+{ord(ch):04X} {name})", self.pos,
                         suggestion=self.ascii_hint(ch))

    def ascii_hint(self, ch: str) -> str:
        """The fix for a character no token starts with. A letter inside a word is most often an accented column
        name, which a file's header gives and the lake spells in ASCII, so the hint spells that word."""
        plain = "Queries use ASCII letters, digits and operators outside string literals."
        if ch in _MATH_SIGNS:
            return f"{plain} Write {_MATH_SIGNS[ch]} for {ch}."
        if not ch.isalpha():
            return plain
        start, end = self.pos, self.pos
        while start > 0 and (self.src[start - 1].isalnum() or self.src[start - 1] == "_"):
            start -= 1
        while end < len(self.src) and (self.src[end].isalnum() or self.src[end] == "_"):
            end += 1
        word = self.src[start:end]
        spelled = ascii_spelling(word)
        if not all(c in _IDENT_PART for c in spelled):
            return plain
        return f"{plain} Did you mean '{spelled}'? A file's column '{word}' is read under that name."


def tokenize(source: str) -> list[Token]:
    """Split query text into tokens; comments and white space are dropped here and never reach the AST.

    Raises:
        QuerySyntaxError: on an unexpected character, an unterminated string or comment, or an oversized query.
    """
    size = len(source.encode("utf-8", errors="replace"))
    if size > MAX_QUERY_BYTES:
        detail = ErrorDetail(f"query is {size} bytes, more than the limit of {MAX_QUERY_BYTES}", 1, 1, "",
                             source_excerpt(source[:200], 1, 1, 1), "Split the query or shorten it.")
        raise QuerySyntaxError([detail])
    return _Scanner(source).run()
