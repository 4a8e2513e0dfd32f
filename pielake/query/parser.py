"""Recursive-descent parser: tokens -> `pielake.query.ast.Query`, one method per rule of grammar.ebnf.

The parser checks form only. Meaning (do the symbols exist, is the relation name real, is the function
allowed) is the analyzer's job, so that all semantic errors of a query can be reported together.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import partial

from pielake.errors import ErrorDetail, QuerySyntaxError, source_excerpt
from pielake.query import ast
from pielake.query.evaluate import COMPARE
from pielake.query.like import pattern_fault, with_backslash
from pielake.query.tokens import CAST_HINT, NULL_SAFE_HINT, Kind, Span, Token, tokenize
from pielake.semantics.relations import ENDPOINTS, allen_where

MAX_NESTING = 100

KEYWORDS = frozenset({
    "FROM", "PARTITION", "BY", "DEFINE", "AS", "AT", "LEAST", "MOST", "BETWEEN", "AND", "OR", "NOT", "IN",
    "IS", "NULL", "TRUE", "FALSE", "PATTERN", "WITHIN", "RETURN",
})
# SQL words that have no place in a pattern query; seeing one gets a pointed message instead of a generic one.
SQL_STATEMENT_WORDS = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER", "MERGE",
                                 "TRUNCATE", "GRANT", "UNION", "EXEC", "EXECUTE", "CALL"})
# Where SQL over a query's matches runs: what SQL's clauses and DISTINCT in a query are told to write there.
SQL_OVER_MATCHES = 'pielake sql ... "SELECT ... FROM matches_<query> ..."'
CASTS = frozenset({"CAST", "TRY_CAST", "CONVERT"})  # SQL's, Spark's and SQL Server's cast of a value to a type
QUERY_CLAUSES = ("PARTITION", "DEFINE", "PATTERN", "WITHIN", "RETURN")  # the words that open a clause of a query
# SQL's clauses after a SELECT list, which are no name of a RETURN column: each is told where SQL runs instead.
SQL_CLAUSE_WORDS = frozenset({"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "QUALIFY", "WINDOW"})
# SQL's operators that match text against a pattern, which predicates do not have: each gets what to write instead.
SQL_PATTERN_MATCHING = frozenset({"ILIKE", "RLIKE", "REGEXP", "SIMILAR"})
# How other event languages write a sequence (SASE's and CORE's `SEQ(A, B)`, the arrows of Esper and Flink's
# pattern API), told in relations where a relation is expected.
SEQUENCE_HINT = ("{} is a sequence in {}; here a pattern relates situations: A before B (A ends before B starts), "
                 "A meets B, or A followed-by B (nothing of either between them).")
# Units a user may write after a number with a space (`70 mph`); glued units (`8m/s2`) may be anything.
SPACED_UNITS = frozenset({"mph", "kmh", "kph", "mps", "knots", "kn", "kt", "rpm", "hz", "deg", "degrees",
                          "percent", "pct", "km", "cm", "mm", "mi", "ft", "kg", "bar", "psi", "kpa", "volt",
                          "volts", "amp", "amps", "kw", "watt", "watts", "g"}) | frozenset(ast.TIME_UNIT_SECONDS)

_COMPARISONS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_OR_OPS = {"||", "|"}
_AND_OPS = {"&&", "&"}


@dataclass(frozen=True)
class QueryWarning:
    """Something accepted but worth telling the user, such as an ignored unit."""

    message: str
    line: int
    col: int

    def render(self) -> str:
        return f"warning: {self.message} (line {self.line}, col {self.col})"


@dataclass(frozen=True)
class ParseResult:
    query: ast.Query
    warnings: tuple[QueryWarning, ...]
    source: str


class Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = tokenize(source)
        self.i = 0
        self.depth = 0
        self.reached = 0  # the deepest level an expression being read has reached (`chain`)
        self.symbols: set[str] = set()
        self.qualifier = "S"  # the first stream's alias or name, once FROM is read
        self.warnings: list[QueryWarning] = []
        # Each precedence level of the binary operators is a `chain` of the next one, bound here rather than
        # called from a method of its own, so that a level is one frame of Python's stack: an expression nested
        # MAX_NESTING deep then fits within Python's recursion limit.
        self.term = partial(self.chain, self.unary, self.taking("*", "/", "%"))
        self.sum = partial(self.chain, self.term, self.taking("+", "-"))
        self.and_expr = partial(self.chain, self.not_expr, self.taking(*_AND_OPS, keyword="AND"))
        self.expr = partial(self.chain, self.and_expr, self.taking(*_OR_OPS, keyword="OR"), nests=True)

    # ------------------------------------------------------------ token helpers

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def ahead(self, n: int = 1) -> Token:
        return self.tokens[min(self.i + n, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tok
        if token.kind is not Kind.EOF:
            self.i += 1
        return token

    def at_keyword(self, *words: str) -> bool:
        return self.tok.kind is Kind.IDENT and self.tok.upper() in words

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind is Kind.OP and self.tok.text in ops

    def error(self, message: str, token: Token | None = None, suggestion: str | None = None) -> QuerySyntaxError:
        token = token or self.tok
        width = max(1, token.span.end - token.span.start)
        shown = token.text if token.kind is not Kind.EOF else ""
        detail = ErrorDetail(message, token.span.line, token.span.col, shown,
                             source_excerpt(self.source, token.span.line, token.span.col, width), suggestion)
        return QuerySyntaxError([detail])

    def describe(self, token: Token) -> str:
        if token.kind is Kind.EOF:
            return "the end of the query"
        if token.kind is Kind.STRING:
            return f"string '{token.text}'"
        return f"'{token.text}'"

    def expect_keyword(self, word: str, suggestion: str | None = None) -> Token:
        if not self.at_keyword(word):
            raise self.error(f"expected {word}, found {self.describe(self.tok)}",
                             suggestion=self.misspelled(word) or suggestion)
        return self.advance()

    def misspelled(self, word: str) -> str | None:
        """'Did you mean' `word`, where the word at hand is one of its slips (`PATERN`, `WITHN`), else None."""
        close = self.tok.kind is Kind.IDENT and difflib.get_close_matches(self.tok.upper(), [word], n=1, cutoff=0.75)
        return f"Did you mean {word}?" if close else None

    def expect_op(self, op: str, context: str) -> Token:
        if not self.at_op(op):
            raise self.error(f"expected '{op}' {context}, found {self.describe(self.tok)}",
                             suggestion=f"Write '{op}' {context}.")
        return self.advance()

    def name(self, what: str, *, suggestion: str = "Choose another name.") -> ast.Name:
        token = self.tok
        if token.kind is Kind.IDENT and token.upper() in KEYWORDS:
            raise self.error(f"'{token.text}' is a keyword and cannot be used as {what}", suggestion=suggestion)
        return self.word(what)

    def word(self, what: str) -> ast.Name:
        """Any identifier, a keyword too: where nothing but a name can stand, a keyword is one."""
        token = self.tok
        if token.kind is not Kind.IDENT:
            raise self.error(f"expected {what}, found {self.describe(token)}",
                             suggestion=f"Write {what} here, letters, digits and '_'.")
        self.advance()
        return ast.Name(token.text, token.span)

    def span_from(self, start: Span) -> Span:
        last = self.tokens[self.i - 1] if self.i else self.tok
        return Span(start.line, start.col, start.start, last.span.end)

    # ------------------------------------------------------------ query

    def query(self) -> ast.Query:
        start = self.tok.span
        self.expect_keyword("FROM", "A query starts with FROM <stream>.")
        streams = self.comma_list(self.stream)
        self.qualifier = (streams[0].alias or streams[0].name).text  # what an error's example qualifies with
        partition: tuple[ast.Column, ...] = ()
        if self.at_keyword("PARTITION"):
            self.advance()
            self.expect_keyword("BY")
            partition = self.comma_list(self.column_ref)
        self.refuse_where()
        self.expect_keyword("DEFINE", "Define the situations: DEFINE A AS <predicate>, B AS ...")
        defines = self.comma_list(self.define)
        self.after_defines(defines[-1])
        pattern = self.constraint_chain()
        while self.at_keyword("AND"):
            self.advance()
            pattern += self.constraint_chain()
        if self.at_op(","):
            raise self.error("a comma between constraints", suggestion=(
                "Constraints that must all hold are joined by AND: PATTERN A meets B AND B before C."))
        self.expect_keyword("WITHIN", "Every pattern needs a window, e.g. WITHIN 5 minutes.")
        window = self.duration()
        returns: tuple[ast.ReturnItem, ...] = ()
        if self.at_keyword("RETURN"):
            self.advance()
            if self.at_keyword("DISTINCT"):
                raise self.error("RETURN has no DISTINCT: each match is a row of its own", suggestion=(
                    f"Name its columns; distinct values are SQL's over its tables ({SQL_OVER_MATCHES})."))
            returns = self.comma_list(self.return_item)
        if self.at_op(";"):
            self.advance()
        if self.tok.kind is not Kind.EOF:
            clause = self.tok.kind is Kind.IDENT and self.tok.upper() in SQL_CLAUSE_WORDS
            raise self.error(f"unexpected {self.describe(self.tok)} after the end of the query", suggestion=(
                f"{self.tok.upper()} is SQL's: a query ends with RETURN, and its matches are filtered, sorted and "
                f"counted in SQL over its tables ({SQL_OVER_MATCHES})."
                if clause else "A query file holds exactly one query; remove the trailing text."))
        return ast.Query(streams, partition, defines, tuple(pattern), window, returns, self.span_from(start))

    def after_defines(self, last: ast.Define) -> None:
        """PATTERN follows the definitions. What stands there instead is most often one of a few slips, each
        named: a definition without the comma before it, a one-dash comment, whose words the last predicate took
        for a subtraction (`... - Horizontal speed(m/s)`), a misspelled PATTERN, or a predicate that goes on
        where no condition can (`x NOT > 1`, `y 2`). A clause after it (WITHIN, RETURN) or the query's end means
        PATTERN is missing."""
        if self.tok.kind is Kind.IDENT and self.ahead().kind is Kind.IDENT and self.ahead().upper() == "AS":
            raise self.error(f"expected ',' before the definition of {self.tok.text}",
                             suggestion="Separate definitions with commas: A AS <predicate>, B AS <predicate>.")
        dash, word = self.tokens[self.i - 2], self.tokens[self.i - 1]
        if not self.at_keyword("PATTERN") and dash.kind is Kind.OP and dash.text == "-" \
                and word.kind is Kind.IDENT and dash.span.line == word.span.line == self.tok.span.line:
            raise self.error(f"expected PATTERN, found {self.describe(self.tok)}", suggestion=(
                f"If '- {word.text} ...' is meant as a comment, a comment starts with two dashes: '--'."))
        matching = self.ahead() if self.at_keyword("NOT") else self.tok
        if matching.kind is Kind.IDENT and matching.upper() in SQL_PATTERN_MATCHING:
            raise self.error(f"{matching.text} is not how a predicate matches text against a pattern", matching,
                             "Write SQL's LIKE: x LIKE 'ON%', lower(x) LIKE 'on%' (% any run of characters, _ one).")
        after = self.ahead()
        if self.at_keyword("FOR") and (after.kind is Kind.NUMBER
                                       or (after.kind is Kind.IDENT and after.upper() in ("AT", "BETWEEN"))):
            raise self.error("a duration constraint is written without FOR", suggestion=(
                f"Write it right after the predicate: {last.symbol.text} AS <predicate> AT LEAST 30 s (or AT MOST d, "
                "BETWEEN d1 AND d2)."))
        if not (self.at_keyword("PATTERN", "WITHIN", "RETURN") or self.tok.kind is Kind.EOF
                or self.misspelled("PATTERN")):
            raise self.error(f"expected ',' or PATTERN after the predicate of {last.symbol.text}, found "
                             f"{self.describe(self.tok)}", suggestion=(
                                 "A predicate is one condition, such as x > 1 AND y < 2; NOT goes before a condition "
                                 "(NOT x > 1) or before BETWEEN and IN (x NOT IN (1, 2))."))
        self.expect_keyword("PATTERN", "Name the relations: PATTERN A overlaps B AND ...")

    def comma_list(self, item):  # type: ignore[no-untyped-def]
        """Items parted by commas. A comma that the next clause or the query's end follows is the slip, not that
        clause's word: read as an item, PATTERN would be refused as a keyword used as a name."""
        items = [item()]
        while self.at_op(","):
            comma = self.advance()
            if self.at_keyword(*QUERY_CLAUSES) or self.at_op(";") or self.tok.kind is Kind.EOF:
                raise self.error(f"a comma ends the list before {self.describe(self.tok)}", token=comma,
                                 suggestion="Remove the comma, or write the next item after it.")
            items.append(item())
        return tuple(items)

    def stream(self) -> ast.StreamRef:
        start = self.tok.span
        name = self.name("a stream name")
        alias = None
        if self.tok.kind is Kind.IDENT and self.tok.upper() not in KEYWORDS:
            self.refuse_misspelled_clause(("PARTITION", "DEFINE"), "A word after a stream's name is read as its alias.")
            self.refuse_where()
            alias = self.name("a stream alias")
        return ast.StreamRef(name, alias, self.span_from(start))

    def refuse_where(self) -> None:
        """SQL's WHERE after the streams: read as a stream's alias or where DEFINE is due, the error would not say
        where a condition on the events goes."""
        if self.tok.kind is Kind.IDENT and self.tok.upper() == "WHERE":
            raise self.error("WHERE is SQL's: a query filters its events in DEFINE", suggestion=(
                "Add the condition to each predicate it bounds: DEFINE A AS x > 0 AND <A's condition>, ..."))

    def refuse_misspelled_clause(self, clauses: tuple[str, ...], read_as: str) -> None:
        """A word where a name may stand is a name, unless it is a slip of a clause that may follow (`DEFNE` after
        a stream's name, read as its alias; `WITHN` after a pattern's symbol, read as a relation): read as a name,
        it would leave the clause missing a word later, where the error would not say why."""
        for clause in clauses:
            if hint := self.misspelled(clause):
                raise self.error(f"expected {clause}, found {self.describe(self.tok)}",
                                 suggestion=f"{hint} {read_as}")

    def column_ref(self) -> ast.Column:
        """`name` or `qualifier.name`. After a qualifier any word is a column's name, so a stream's column that is
        called like a keyword (`from`, `partition`: a stream's columns are its data's, not the query's choice)
        is read as `S.from`."""
        start = self.tok.span
        first = self.name("a column name", suggestion=f"If a column is called {self.tok.text}, qualify it with its "
                                                      f"stream: {self.qualifier}.{self.tok.text}.")
        if self.at_op("."):
            self.advance()
            second = self.word("a column name")
            if self.at_op("."):
                raise self.nested_field(first, second, start)
            return ast.Column(second.text, first.text, self.span_from(start))
        return ast.Column(first.text, None, self.span_from(start))

    def nested_field(self, qualifier: ast.Name, record: ast.Name, start: Span) -> QuerySyntaxError:
        """`S.record.field`: a nested record's field is read as a column of its own, named by its path with '_'
        between the names (`readings.rpm` is `readings_rpm`), so a column is never more than `S.column`."""
        path = [record.text]
        while self.at_op("."):
            self.advance()
            path.append(self.word("a field name").text)
        column = "_".join(path)
        written = Token(Kind.IDENT, f"{qualifier.text}.{'.'.join(path)}", self.span_from(start))
        return self.error(f"'{written.text}' names a field inside a record", written,
                          f"A nested record's field is the column named by its path: write {qualifier.text}.{column} "
                          f"(docs/operations.md, \"Streams\").")

    # ------------------------------------------------------------ DEFINE

    def define(self) -> ast.Define:
        start = self.tok.span
        symbol = self.name("a symbol name")
        self.symbols.add(symbol.text)
        self.expect_keyword("AS", f"Write {symbol.text} AS <predicate>.")
        predicate = self.expr()
        duration = self.duration_bound()
        if duration is not None and self.at_keyword("AT", "BETWEEN"):
            raise self.error(f"{symbol.text} has a duration constraint already: a symbol takes one",
                             suggestion="Give both bounds in one: BETWEEN 5 s AND 10 s.")
        return ast.Define(symbol, predicate, duration, self.span_from(start))

    def duration_bound(self) -> ast.DurationConstraint | None:
        start = self.tok.span
        if self.at_keyword("AT"):
            self.advance()
            if self.at_keyword("LEAST"):
                self.advance()
                return ast.DurationConstraint(self.duration(), None, self.span_from(start))
            if self.at_keyword("MOST"):
                self.advance()
                return ast.DurationConstraint(None, self.duration(), self.span_from(start))
            raise self.error(f"expected LEAST or MOST after AT, found {self.describe(self.tok)}",
                             suggestion="Write AT LEAST or AT MOST before the duration, e.g. AT LEAST 2 s.")
        if self.at_keyword("BETWEEN"):
            self.advance()
            low = self.duration()
            self.expect_keyword("AND")
            return ast.DurationConstraint(low, self.duration(), self.span_from(start))
        return None

    def duration(self) -> ast.Duration:
        """`5 s`, or a sum of such parts as people say one (`1 hour 30 minutes`), kept in its finest unit
        (`90 minutes`): every unit is a whole number of each finer one, so the sum is exact."""
        start = self.tok.span
        parts = [self.duration_part()]
        while self.tok.kind is Kind.NUMBER:
            parts.append(self.duration_part())
        if len(parts) == 1:
            return parts[0]
        finest = min(parts, key=lambda part: ast.TIME_UNIT_SECONDS[part.unit]).unit
        amount = sum((part.amount * int(ast.TIME_UNIT_SECONDS[part.unit] / ast.TIME_UNIT_SECONDS[finest])
                      for part in parts), Decimal(0))
        whole = amount == amount.to_integral_value()  # 1.5 h 10 min is 100 min, not 100.0
        return ast.Duration(Decimal(int(amount)) if whole else amount, finest, self.span_from(start))

    def duration_part(self) -> ast.Duration:
        token = self.tok
        if token.kind is not Kind.NUMBER:
            raise self.error(f"expected a duration such as '5 s', found {self.describe(token)}",
                             suggestion="Write a number and its unit: us, ms, s, min, h, d or w.")
        self.advance()
        unit_text, unit_token = token.unit, token
        if unit_text is None:
            if self.tok.kind is not Kind.IDENT:
                raise self.error(f"the duration '{token.text}' needs a time unit", token,
                                 "Add one of us, ms, s, min, h, d, e.g. '5 s'.")
            unit_token = self.advance()
            unit_text = unit_token.text
        unit = unit_text.lower()
        if unit not in ast.TIME_UNIT_SECONDS:
            raise self.error(f"unknown time unit '{unit_text}'", unit_token,
                             "Use us, ms, s, sec, min, minute(s), h, hour(s), d, day(s), w or week(s).")
        return ast.Duration(Decimal(token.text), unit, self.span_from(token.span))

    # ------------------------------------------------------------ PATTERN

    def constraint_chain(self) -> list[ast.Constraint]:
        """A constraint, or a chain `A r1 B r2 C` of relations from one symbol to the next, read as `A r1 B AND
        B r2 C` (the TPStream paper writes patterns so), or a chain of endpoint comparisons `A.ts < B.ts < A.te`,
        read as `A.ts < B.ts AND B.ts < A.te` (ISEQ writes patterns so)."""
        chain = [self.constraint()]
        while self.at_op(*_COMPARISONS) and (end := self.chained_endpoint(chain[-1])) is not None:
            left = chain[-1].alternatives[0].right
            chain.append(ast.Constraint((self.compared(left, end, left.span),), self.span_from(left.span)))
        while self.tok.kind is Kind.IDENT and self.tok.upper() not in KEYWORDS and self.tok.text not in self.symbols:
            self.refuse_misspelled_clause(("WITHIN",), "A word after a pattern's symbol is read as a relation.")
            alternatives = chain[-1].alternatives
            if len(alternatives) != 1:
                raise self.error(f"expected AND, found {self.describe(self.tok)}",
                                 suggestion="A chain A r1 B r2 C starts with one relation list between two symbols.")
            left = alternatives[0].right
            relations = self.relations()
            right = self.name("a symbol")
            span = Span(left.span.line, left.span.col, left.span.start, right.span.end)
            chain.append(ast.Constraint((ast.Alternative(left, relations, right, span),), span))
        return chain

    def constraint(self) -> ast.Constraint:
        start = self.tok.span
        alternatives = list(self.alternative())
        while self.at_op(";") or self.at_keyword("OR"):
            self.advance()
            alternatives.extend(self.alternative())
        return ast.Constraint(tuple(alternatives), self.span_from(start))

    def alternative(self) -> tuple[ast.Alternative, ...]:
        if self.at_op("("):
            self.enter()
            self.advance()
            inner = self.constraint()
            self.expect_op(")", "to close the constraint")
            self.depth -= 1
            return inner.alternatives
        start = self.tok.span
        self.refuse_not()
        left = self.name("a symbol")
        if self.at_op("."):
            return (self.compared(left, self.endpoint(left), start),)
        relations = self.relations()
        right = self.name("a symbol")
        return (ast.Alternative(left, relations, right, self.span_from(start)),)

    def chained_endpoint(self, last: ast.Constraint) -> str | None:
        """The endpoint (`ts`, `te`) a chain of comparisons goes on from: that of the right side of the constraint
        just read, where it is one comparison written bare (`A.ts < B.ts`, then `< A.te`). A disjunction or a
        parenthesis ends a chain."""
        dot, end = self.tokens[self.i - 2:self.i]
        bare = len(last.alternatives) == 1 and dot.kind is Kind.OP and dot.text == "."
        return end.text.lower() if bare and end.text.lower() in ENDPOINTS else None

    def endpoint(self, symbol: ast.Name) -> str:
        """`.ts` or `.te` after a symbol in PATTERN: where its situation starts or ends."""
        self.expect_op(".", "between a symbol and its endpoint (A.ts)")
        end = self.word("ts or te")
        if end.text.lower() not in ENDPOINTS:
            raise self.error(f"a pattern compares where situations start and end, not '{symbol.text}.{end.text}'",
                             self.tokens[self.i - 1], f"Write {symbol.text}.ts or {symbol.text}.te; a predicate "
                                                      "on the events belongs in DEFINE.")
        return end.text.lower()

    def compared(self, left: ast.Name, left_end: str, start: Span) -> ast.Alternative:
        """`A.ts < B.te`, after its left side: the Allen relations under which the comparison holds
        (`allen_where`), as one alternative between the two symbols. It holds under all of them or none, so the
        comparison and the relations are one condition."""
        if not self.at_op(*_COMPARISONS):
            other = "B" if left.text != "B" else "A"
            arithmetic = self.at_op("+", "-", "*", "/")
            raise self.error(f"expected a comparison after {left.text}.{left_end}, found {self.describe(self.tok)}",
                             suggestion=(
                                 "A pattern compares endpoints as they are, with no arithmetic: bound a whole match "
                                 "with WITHIN and a situation's length with AT LEAST / AT MOST in DEFINE."
                                 if arithmetic else
                                 f"Compare endpoints of two symbols, e.g. {left.text}.{left_end} < {other}.ts, or "
                                 f"relate the symbols: {left.text} overlaps {other}."))
        op = _COMPARISONS[self.advance().text]
        right = self.name("a symbol")
        right_end = self.endpoint(right)
        span = self.span_from(start)
        if right.text == left.text:
            written = Token(Kind.OP, self.source[span.start:span.end], span)
            always = COMPARE[op](*(ENDPOINTS.index(end) for end in (left_end, right_end)))
            raise self.error(f"{written.text} compares a situation with itself, and {'always' if always else 'never'} "
                             "holds", written, "Every situation starts before it ends: leave it out, or compare "
                                               "endpoints of two symbols.")
        relations = tuple(ast.RelationRef(name, span) for name in allen_where(left_end, op, right_end))
        return ast.Alternative(left, relations, right, span)

    def relations(self) -> tuple[ast.RelationRef, ...]:
        """`meets; overlaps; starts`: the relation list between two symbols."""
        found = [self.relation()]
        while self.at_op(";") and self.ahead().kind is Kind.IDENT and self.ahead().text not in self.symbols:
            self.advance()
            found.append(self.relation())
        return tuple(found)

    def sequence_hint(self) -> str | None:
        """What to write for another language's sequence, `SEQ(A, B)` or `A -> B`, read up to where a relation
        was expected."""
        before = self.tokens[self.i - 1]
        if self.at_op("(") and before.upper() == "SEQ":
            return SEQUENCE_HINT.format("SEQ(A, B)", "SASE and CORE")
        if self.at_op("-") and self.ahead().text == ">":
            return SEQUENCE_HINT.format("A -> B", "other event languages")
        return None

    def refuse_not(self) -> None:
        """NOT before a constraint or a relation (`NOT A during B`, `A not during B`, `A !overlaps B`): a pattern
        says which relations may hold, so the fix is the list of the others."""
        if self.at_keyword("NOT") or self.at_op("!"):
            raise self.error("a pattern has no NOT: a constraint lists the relations that may hold between two "
                             "symbols", suggestion="List the relations you accept instead, e.g. A before; meets; "
                             "during B (pielake relations draws every one).")

    def relation(self) -> ast.RelationRef:
        self.refuse_not()
        token = self.tok
        if token.kind is not Kind.IDENT:
            raise self.error(f"expected a relation such as 'overlaps', found {self.describe(token)}",
                             suggestion=self.sequence_hint() or "Relate two symbols by Allen's relations, e.g. "
                                                                "A overlaps B, or A before; meets B.")
        if token.text in self.symbols:
            raise self.error(f"expected a relation between two symbols, found the symbol '{token.text}'",
                             suggestion="Write <symbol> <relation> <symbol>, e.g. A overlaps B.")
        if token.upper() in KEYWORDS:
            raise self.error(f"expected a relation to a second symbol, found {token.upper()}",
                             suggestion="A pattern relates two symbols or more: <symbol> <relation> <symbol>, e.g. "
                                        "A overlaps B.")
        self.advance()
        parts, end = [token.text], token.span.end
        while (self.at_op("-") and self.tok.span.start == end and self.ahead().kind is Kind.IDENT
               and self.ahead().span.start == self.tok.span.end):
            self.advance()
            word = self.advance()
            parts.append(word.text)
            end = word.span.end
        span = Span(token.span.line, token.span.col, token.span.start, end)
        return ast.RelationRef("-".join(parts), span)

    # ------------------------------------------------------------ RETURN

    def return_item(self) -> ast.ReturnItem:
        """`expr [AS] name`: as in SQL's SELECT, a name right after the expression names its column."""
        start = self.tok.span
        if self.at_op("*") or (self.tok.kind is Kind.IDENT and self.ahead().text == "." and self.ahead(2).text == "*"):
            star = self.tok if self.at_op("*") else self.ahead(2)
            raise self.error("RETURN names its columns one by one", star, (
                "Every match has its keys and each symbol's ts and te without RETURN; RETURN adds what is "
                "computed from a symbol's events: max(B.speed) AS top, first(B.x) AS x0."))
        expr = self.expr()
        alias = None
        if self.at_keyword("AS"):
            self.advance()
            alias = self.name("an output column name")
        elif self.tok.kind is Kind.IDENT and self.tok.upper() not in KEYWORDS | SQL_CLAUSE_WORDS | SQL_STATEMENT_WORDS:
            alias = self.name("an output column name")
        return ast.ReturnItem(expr, alias, self.span_from(start))

    # ------------------------------------------------------------ expressions

    def enter(self) -> None:
        self.depth += 1
        self.reached = max(self.reached, self.depth)
        if self.depth > MAX_NESTING:
            raise self.too_deep(self.tok)

    def too_deep(self, token: Token) -> QuerySyntaxError:
        return self.error(f"expression nested deeper than {MAX_NESTING} levels", token, suggestion=(
            "Each parenthesis, and each operator of a chain such as a OR b OR c, is a level: write many values as "
            "IN (...), or simplify the predicate."))

    def chain(self, operand: Callable[[], ast.Expr], operator: Callable[[], str | None], *,
              nests: bool = False) -> ast.Expr:
        """`a op b op c …` as a left-deep tree, `operator` taking the next operator if one follows; a level of
        nesting itself if it `nests` (a whole expression, in parentheses or as an argument).

        Every walk of the tree, Spark's analyzer's too, recurses once per level of it, so the tree's height
        counts as nesting: each operator puts the chain so far one level below it, beside its right operand.
        A chain of thousands would otherwise overflow a stack in the first walk, with no word of where."""
        if nests:
            self.enter()
        outer, self.reached = self.reached, self.depth
        start = self.tok.span
        left = operand()
        height = self.reached - self.depth  # of the tree built so far, in levels below this chain
        while (op := operator()) is not None:
            taken = self.tokens[self.i - 1]
            self.reached = self.depth
            right = operand()
            height = 1 + max(height, self.reached - self.depth)
            if self.depth + height > MAX_NESTING:
                raise self.too_deep(taken)
            left = ast.Binary(op, left, right, self.span_from(start))
        self.reached = max(outer, self.depth + height)
        if nests:
            self.depth -= 1
        return left

    def taking(self, *ops: str, keyword: str | None = None) -> Callable[[], str | None]:
        """An `operator` for `chain`: the next token if it is one of `ops` or `keyword`, taken; spelled as the
        keyword where there is one (`||` is OR)."""
        def take() -> str | None:
            if not ((keyword is not None and self.at_keyword(keyword)) or self.at_op(*ops)):
                return None
            taken = self.advance().text
            return keyword or taken
        return take

    def not_expr(self) -> ast.Expr:
        start = self.tok.span
        if self.at_keyword("NOT") or self.at_op("!"):
            self.advance()
            self.enter()
            operand = self.not_expr()
            self.depth -= 1
            return ast.Unary("NOT", operand, self.span_from(start))
        return self.comparison()

    def comparison(self) -> ast.Expr:
        start = self.tok.span
        left = self.sum()
        if self.tok.kind is Kind.OP and self.tok.text in _COMPARISONS:
            op = _COMPARISONS[self.advance().text]
            return ast.Binary(op, left, self.sum(), self.span_from(start))
        negated = False
        if self.at_keyword("NOT") and self.ahead().kind is Kind.IDENT and self.ahead().upper() in {"BETWEEN", "IN",
                                                                                                   "LIKE"}:
            self.advance()
            negated = True
        if self.at_keyword("BETWEEN") and (negated or not self._between_is_duration()):
            self.advance()
            low = self.sum()
            self.expect_keyword("AND", "Write x BETWEEN low AND high.")
            return ast.Between(left, low, self.sum(), negated, self.span_from(start))
        if self.at_keyword("IN"):
            self.advance()
            self.expect_op("(", "after IN")
            items = self.comma_list(self.expr)
            self.expect_op(")", "to close the IN list")
            return ast.InList(left, items, negated, self.span_from(start))
        if self.at_keyword("LIKE"):
            self.advance()
            return ast.Like(left, self.like_pattern(), negated, self.span_from(start))
        if self.at_keyword("IS"):
            self.advance()
            is_not = False
            if self.at_keyword("NOT"):
                self.advance()
                is_not = True
            self.expect_keyword("NULL", self.is_hint(is_not))
            return ast.IsNull(left, is_not, self.span_from(start))
        return left

    def is_hint(self, is_not: bool) -> str:
        """The fix for SQL's other tests after IS, which compare with NULL as a value: a predicate's NULL is false
        (docs/semantics.md §1), so each is written with IS NULL where NULL must count."""
        negated = "NOT " if is_not else ""
        if self.at_keyword("DISTINCT"):
            return (f"IS NOT DISTINCT FROM counts NULL as a value: {NULL_SAFE_HINT}" if is_not
                    else "IS DISTINCT FROM counts NULL as a value: write x <> 'v' OR x IS NULL.")
        if self.at_keyword("TRUE", "FALSE", "UNKNOWN"):
            word = self.tok.upper()
            written = {("", "TRUE"): "x", ("", "FALSE"): "NOT x", ("NOT ", "TRUE"): "NOT x OR x IS NULL",
                       ("NOT ", "FALSE"): "x OR x IS NULL"}.get((negated, word), f"x IS {negated}NULL")
            return f"x IS {negated}{word} is written {written}."
        return "Write IS NULL or IS NOT NULL."

    def like_pattern(self) -> ast.Literal:
        """The string literal after LIKE, a pattern Spark takes as it is written (`pattern_fault`), with SQL's
        `ESCAPE 'c'` after it if the pattern escapes with another character than \\: the pattern is kept as
        written with \\ (`with_backslash`), so everything after the parser reads one form."""
        token = self.tok
        if token.kind is not Kind.STRING:
            raise self.error(f"expected a pattern in quotes after LIKE, found {self.describe(token)}",
                             suggestion="Write x LIKE 'ON%': % stands for any run of characters, _ for one.")
        self.advance()
        pattern = token.text
        if self.at_keyword("ESCAPE"):
            self.advance()
            escape = self.tok
            if escape.kind is not Kind.STRING or len(escape.text) != 1:
                raise self.error(f"expected one character in quotes after ESCAPE, found {self.describe(escape)}",
                                 suggestion="Write x LIKE '100!%' ESCAPE '!'.")
            self.advance()
            pattern, fault = with_backslash(token.text, escape.text)
            if fault is not None:
                raise self.error(f"the LIKE pattern '{token.text}' cannot be read: {fault}", token,
                                 f"Write {escape.text}% or {escape.text}_ for % or _ themselves.")
        fault = pattern_fault(pattern)
        if fault is not None:
            raise self.error(f"the LIKE pattern '{token.text}' cannot be read: {fault}", token,
                             "% stands for any run of characters, _ for one, \\% and \\_ for themselves.")
        return ast.Literal(pattern, span=self.span_from(token.span))

    def _between_is_duration(self) -> bool:
        """`speed > 70 BETWEEN 4s AND 30s` is a duration bound; tell it apart by the unit on the low bound."""
        low = self.ahead()
        after_low = self.ahead(2)
        glued = low.kind is Kind.NUMBER and (low.unit or "").lower() in ast.TIME_UNIT_SECONDS
        spaced = (low.kind is Kind.NUMBER and low.unit is None and after_low.kind is Kind.IDENT
                  and after_low.text.lower() in ast.TIME_UNIT_SECONDS)
        return glued or spaced

    def unary(self) -> ast.Expr:
        start = self.tok.span
        if self.at_op("-"):
            self.advance()
            self.enter()
            operand = self.unary()
            self.depth -= 1
            if isinstance(operand, ast.Literal) and isinstance(operand.value, Decimal):
                return ast.Literal(-operand.value, operand.unit, self.span_from(start))
            return ast.Unary("-", operand, self.span_from(start))
        return self.primary()

    def primary(self) -> ast.Expr:
        token = self.tok
        if token.kind is Kind.NUMBER:
            return self.number_literal()
        if token.kind is Kind.STRING:
            self.advance()
            return ast.Literal(token.text, None, token.span)
        if self.at_op("("):
            self.advance()
            inner = self.expr()
            self.expect_op(")", "to close the parenthesis")
            return inner
        if token.kind is not Kind.IDENT:
            raise self.reversed_comparison() or self.error(
                f"expected a value, a column or '(', found {self.describe(token)}",
                suggestion="Give every operator its operands, e.g. D.speed > 10.")
        word = token.upper()
        if word in {"TRUE", "FALSE"}:
            self.advance()
            return ast.Literal(word == "TRUE", None, token.span)
        if word == "NULL":
            self.advance()
            return ast.Literal(None, None, token.span)
        if word in SQL_STATEMENT_WORDS:
            raise self.error(f"'{token.text}' is SQL; subqueries and statements are not part of a pattern query",
                             suggestion="Predicates compare the event's own columns with values.")
        if word == "CASE" and self.ahead().kind is Kind.IDENT and self.ahead().upper() == "WHEN":
            raise self.error("CASE WHEN is SQL; a predicate is a condition, not a choice of values",
                             suggestion="Write each branch as a condition and join them with OR: "
                                        "(x > 1 AND y = 'a') OR (x > 5 AND y = 'b').")
        if self.ahead().kind is Kind.OP and self.ahead().text == "(":
            return self.call()
        return self.column_ref()

    def reversed_comparison(self) -> QuerySyntaxError | None:
        """`=>` or `=<`, as some languages write an arrow or a comparison, read as `=` then an operand that is an
        operator: the comparison is written `>=` or `<=`."""
        before, token = self.tokens[max(self.i - 1, 0)], self.tok
        if not (before.text == "=" and token.text in {">", "<"} and before.span.end == token.span.start):
            return None
        written = Token(Kind.OP, f"={token.text}", Span(before.span.line, before.span.col, before.span.start,
                                                          token.span.end))
        return self.error(f"'{written.text}' is no operator", written, f"Write {token.text}=.")

    def number_literal(self) -> ast.Literal:
        token = self.advance()
        unit, unit_token = token.unit, token
        if unit is None and self.tok.kind is Kind.IDENT and self.tok.text.lower() in SPACED_UNITS \
                and not (self.ahead().kind is Kind.OP and self.ahead().text in {".", "("}):
            unit_token = self.advance()
            unit = unit_token.text
        if unit is not None:
            self.warnings.append(QueryWarning(
                f"unit '{unit}' after {token.text} is ignored; values are compared as plain numbers",
                unit_token.span.line, unit_token.span.col))
        if not math.isfinite(float(token.text)):
            raise self.error(f"the number {token.text} is beyond what a DOUBLE holds (about 1.8e308)", token,
                             "Give a number within that range.")
        return ast.Literal(Decimal(token.text), unit, self.span_from(token.span))

    def call(self) -> ast.Call:
        start = self.tok.span
        name = self.advance()
        if name.text.upper() in CASTS:
            raise self.error(f"{name.text.upper()}(...) is not in the language: a query has no cast", name,
                             CAST_HINT)
        self.advance()  # "("
        if self.at_op("*"):  # SQL's count(*): a match has no rows of its own, each symbol has its events
            raise self.error(f"{name.text}(*) names no symbol's events", suggestion=(
                f"An aggregate reads one symbol's events: write {name.text}(B.<column>) for those of B."))
        if self.at_keyword("DISTINCT"):
            raise self.error(f"{name.text}(DISTINCT ...) is SQL's", suggestion=(
                f"An aggregate here reads all of a symbol's events ({name.text}(B.x)); distinct values are counted "
                f"in SQL over the matches' tables ({SQL_OVER_MATCHES})."))
        args: tuple[ast.Expr, ...] = ()
        if not self.at_op(")"):
            args = self.comma_list(self.expr)
        self.expect_op(")", f"to close {name.text}(...)")
        return ast.Call(name.text.lower(), args, self.span_from(start))


def parse(source: str) -> ParseResult:
    """Parse query text into an AST, with the warnings met on the way.

    Raises:
        QuerySyntaxError: with line, column, offending text and a suggestion.
    """
    parser = Parser(source)
    query = parser.query()
    return ParseResult(query, tuple(parser.warnings), source)
