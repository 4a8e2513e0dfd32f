"""SQL's `LIKE` patterns, read as Spark reads them, for the evaluator and the sample streams.

In a pattern `%` stands for any run of characters (none too), `_` for any one character, and `\\` makes the
character after it stand for itself: `\\%`, `\\_` or `\\\\`. The pattern holds the whole text, from its first
character to its last, across line breaks too. Spark refuses `\\` before any other character and at the end of
a pattern, and matches a character beyond U+FFFF written in a pattern as two halves that no text holds, so
`pattern_fault` names those, and the parser refuses them before anything runs (docs/semantics.md §1).
"""

from __future__ import annotations

import re
from functools import cache

ESCAPE = "\\"
ANY_RUN, ANY_ONE = "%", "_"
_ESCAPED = frozenset({ANY_RUN, ANY_ONE, ESCAPE})
_LAST_UTF16_UNIT = 0xFFFF


def _parts(pattern: str) -> list[str]:
    """The pattern's parts as written: `%`, `_`, a character, or `\\` with the character after it (alone at the
    end of the pattern)."""
    parts, index = [], 0
    while index < len(pattern):
        width = 2 if pattern[index] == ESCAPE else 1
        parts.append(pattern[index:index + width])
        index += width
    return parts


def _refused(part: str) -> bool:
    """An escape Spark refuses: before another character than %, _ and \\, or at the end of the pattern."""
    return part[0] == ESCAPE and part[1:] not in _ESCAPED


def pattern_fault(pattern: str) -> str | None:
    """What Spark refuses in a pattern, or cannot match as written; None where there is nothing."""
    beyond = next((char for char in pattern if ord(char) > _LAST_UTF16_UNIT), None)
    if beyond is not None:
        return (f"'{beyond}' is a character beyond U+FFFF, which Spark's LIKE does not match where a pattern "
                "writes it: write _ in its place")
    refused = next((part for part in _parts(pattern) if _refused(part)), None)
    if refused == ESCAPE:
        return "the pattern ends with \\, which makes the character after it stand for itself: write \\\\ for \\"
    if refused is not None:
        return (f"'{refused}': \\ makes only %, _ or \\ after it stand for itself, and LIKE has no classes of "
                f"characters as a regular expression has: write '{refused[1]}' for itself, _ for any one character")
    return None


def with_backslash(pattern: str, escape: str) -> tuple[str, str | None]:
    """The pattern written with `ESCAPE 'c'` as it is written with \\, the escape this module reads, and what is
    wrong with it, if anything: `c%`, `c_` and `cc` are `\\%`, `\\_` and the character c itself (`\\\\` for
    \\), and a \\ that is no escape stands for itself (`\\\\`). As SQL and Spark refuse it, an escape
    before another character or at the end of the pattern is a fault. `escape` is one character."""
    written, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char != escape:
            written.append(ESCAPE + char if char == ESCAPE else char)
            index += 1
            continue
        after = pattern[index + 1:index + 2]
        if after not in (ANY_RUN, ANY_ONE, escape):
            where = "at the end of the pattern" if not after else f"before '{after}'"
            return pattern, (f"the escape '{escape}' stands {where}; it makes only %, _ or itself after it stand "
                             "for itself")
        written.append(ESCAPE + after if after in _ESCAPED else after)
        index += 2
    return "".join(written), None


@cache
def like_regex(pattern: str) -> re.Pattern[str]:
    """The pattern as a regular expression that `fullmatch`es exactly the text it holds."""
    return re.compile("".join(".*" if part == ANY_RUN else "." if part == ANY_ONE else re.escape(part[-1])
                              for part in _parts(pattern)), re.DOTALL)


def like_example(pattern: str) -> str:
    """A text the pattern holds: each `%` as nothing, each `_` as `x`."""
    return "".join("" if part == ANY_RUN else "x" if part == ANY_ONE else part[-1] for part in _parts(pattern))
