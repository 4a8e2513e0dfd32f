"""Small builders shared by tests: event streams drawn as strings, one character per event; a free port."""

from __future__ import annotations

import socket
from typing import Any


def drawn(key: Any = "k", start: int = 0, **columns: str) -> list[dict[str, Any]]:
    """Events at times start, start+1, ...; column c is True where its string has 'X'.

    >>> drawn(a="X.", b=".X")
    [{'key': 'k', 'ts': 0, 'a': True, 'b': False}, {'key': 'k', 'ts': 1, 'a': False, 'b': True}]
    """
    length = max(len(v) for v in columns.values())
    return [{"key": key, "ts": start + i, **{c: v[i] == "X" if i < len(v) else False for c, v in columns.items()}}
            for i in range(length)]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, for the servers tests start."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
