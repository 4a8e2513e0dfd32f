"""A YAML file a user writes by hand (a query's registration, a stream's schema), read strictly.

YAML itself lets a mapping name a key twice and keeps the last value, so a setting written twice, the second
time by mistake, silently replaces the first. A hand-written file is refused instead, naming the line and column
of the second and the line of the first; so is one that is not YAML, or not text, each with its fix. A setting
the file's reader does not know (`schedual:`, `units:`) would be as silent, left unread while its default
applies: `unknown_settings` names each such key, and the known one it may misspell.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from pielake.errors import PielakeError

MERGE_TAG = "tag:yaml.org,2002:merge"  # `<<: *defaults`: a key that merges a mapping in, meant to be overridden


class SetTwice(yaml.MarkedYAMLError):
    """A mapping names a key twice: `problem_mark` is the second."""


class _Once(yaml.SafeLoader):
    """YAML's safe loader, refusing a key a mapping names twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                earlier = first.setdefault(key, key_node.start_mark)
            except TypeError:  # a list or a mapping as a key: the loader's own error says so
                break
            if earlier is not key_node.start_mark:
                raise SetTwice(problem=f"'{key}' is set here and on line {earlier.line + 1}; keep one",
                               problem_mark=key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path, example: str) -> Any:
    """The value the YAML file `path` holds (None for an empty file). A file that is not YAML, not text YAML
    reads (UTF-8, UTF-16), or names a key of a mapping twice is refused with where and `example` of what to write."""
    try:
        return yaml.load(path.read_bytes(), Loader=_Once)  # a safe loader: plain values only
    except SetTwice as error:
        raise PielakeError(f"{path}{_where(error.problem_mark)}: {error.problem}") from None
    except yaml.MarkedYAMLError as error:  # where it starts to go wrong: an unclosed quote, not the file's end
        problem = ", ".join(part for part in (error.context, error.problem) if part)
        raise PielakeError(f"{path}{_where(error.context_mark or error.problem_mark)}: not YAML ({problem}); "
                           f"{example}") from None
    except yaml.YAMLError as error:  # bytes that are no text of an encoding YAML reads
        raise PielakeError(f"{path}: not YAML ({' '.join(str(error).split())}); save it as UTF-8") from None


def unknown_settings(given: Iterable[object], known: Sequence[str], within: str = "") -> list[str]:
    """The keys of `given` that are not `known`, each as `within` and its name, with the known one it may misspell
    (`schedual (did you mean schedule?)`)."""
    return [f"{within}{key}" + "".join(f" (did you mean {within}{close}?)"
                                         for close in difflib.get_close_matches(str(key), known, n=1))
            for key in given if key not in known]


def _where(mark: yaml.Mark | None) -> str:
    return f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
