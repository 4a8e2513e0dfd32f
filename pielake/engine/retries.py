"""How long a Spark Connect client of an engine retries a call the engine did not answer."""

from __future__ import annotations

from pyspark.sql.connect.client.retries import DefaultPolicy

from pielake.engine.client import EngineAddress, unanswered

ANSWER_CHECK_S = 2.0  # how long a retry waits for the engine's port to take a connection before it gives up


class WhileTheEngineListens(DefaultPolicy):
    """Spark Connect's retries of a call the engine did not answer, for as long as the engine's port takes
    connections. The client's own policy retries for ten minutes, for a server that comes back with the session;
    an engine that stopped comes back without it (a new engine is a new application), so retrying past its end
    only delays the error, and the calls that release a statement's results, retried in threads of their own,
    keep the process from ending for as long."""

    def __init__(self, address: EngineAddress) -> None:
        super().__init__()
        self._address = address

    def can_retry(self, e: BaseException) -> bool:
        """A call the default policy retries, while the engine's port still takes connections."""
        return super().can_retry(e) and unanswered(self._address, ANSWER_CHECK_S) is None
