"""Column names used inside the kernels, in one place. Double underscores keep them clear of user columns."""

from __future__ import annotations

import re

import pyarrow as pa

GLOBAL_KEY = "__key"  # the one key of a stream read without PARTITION BY: a constant column (`SparkQuery.keyed`)
T = "__t"  # event time as BIGINT in the stream's unit (TIMESTAMP streams: microseconds)
SERIES = "__series"
VALUE = "__value"
START = "__run_start"
END = "__run_end"
FIRST_IN_PART = "__first_in_part"
LAST_IN_PART = "__last_in_part"
PREV = "__prev_value"  # the value of the run before / after in its series (NULL at the ends of its key)
NEXT = "__next_value"
# A constraint run's situations of its left/right predicate (`pielake.spark.runs`): start and end, and whether the
# kernel could not know them yet (they lie in another time range: the stitch fills them in).
LEFT_SINCE = "__left_since"
RIGHT_SINCE = "__right_since"
LEFT_UNTIL = "__left_until"
RIGHT_UNTIL = "__right_until"
LEFT_PENDING = "__left_pending"
RIGHT_PENDING = "__right_pending"
LEFT_UNTIL_PENDING = "__left_until_pending"
RIGHT_UNTIL_PENDING = "__right_until_pending"
PENDING = "__pending"  # the four flags above as bits of one column, as the runs kernel writes them

LAST_TIME = "__last_t"  # a key's latest time, as far as a run knows it: what statuses and the next run read
NEVER_TOLD = -(2**62)  # a key's time in a stream that has told nothing of it: before every time, and a window
STREAM = "__stream"  # which stream of a query over several a row of their events comes from (its number)

FLAGS_PER_WORD = 62  # predicate bits per BIGINT word: clear of the sign bit on both the JVM and numpy sides


def last_time(stream: int) -> str:
    """A key's latest time in stream number `stream` of a query over several (docs/semantics.md §5)."""
    return f"{LAST_TIME}{stream}"


def flags_word(symbol: int) -> str:
    """The BIGINT column whose bit `symbol % FLAGS_PER_WORD` holds symbol number `symbol`'s predicate."""
    return f"__flags{symbol // FLAGS_PER_WORD}"


_ARROW_TYPES = {"BIGINT": pa.int64(), "LONG": pa.int64(), "INT": pa.int32(), "INTEGER": pa.int32(),
                "SMALLINT": pa.int16(), "TINYINT": pa.int8(), "DOUBLE": pa.float64(), "FLOAT": pa.float32(),
                "REAL": pa.float32(), "STRING": pa.string(), "BOOLEAN": pa.bool_(),
                "TIMESTAMP": pa.timestamp("us", tz="UTC"), "DATE": pa.date32(), "ARRAY<DOUBLE>": pa.list_(pa.float64())}


def arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type Spark exchanges for a Spark SQL type name."""
    decimal = re.match(r"DECIMAL\((\d+),(\d+)\)", spark_type.upper().replace(" ", ""))
    if decimal:
        return pa.decimal128(int(decimal.group(1)), int(decimal.group(2)))
    return _ARROW_TYPES[spark_type.upper()]
