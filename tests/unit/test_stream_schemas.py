"""A stream's columns, as a schema declares them and as one inferred from a file is checked
(`pielake.streams.schema_column`): plain names of flat primitive types, or a SchemaError that names the column."""

from __future__ import annotations

import pytest

from pielake.streams import SchemaError, parse_ddl, schema_column

pytestmark = pytest.mark.unit


def test_a_declared_schema_spells_its_types_in_upper_case_without_spaces() -> None:
    assert parse_ddl("unit string, speed decimal(10, 2), at TIMESTAMP") == (
        ("unit", "STRING"), ("speed", "DECIMAL(10,2)"), ("at", "TIMESTAMP"))


@pytest.mark.parametrize(("name", "kind", "named"), [
    ("speed km/h", "double", "column name 'speed km/h' is not a plain identifier"),
    ("1st", "int", "column name '1st' is not a plain identifier"),
    ("tags", "struct<a:bigint>", "column 'tags': type struct<a:bigint> is not a flat primitive type"),
    ("path", "array<double>", "column 'path': type array<double> is not a flat primitive type"),
    ("blob", "binary", "column 'blob': type binary is not a flat primitive type"),
])
def test_a_column_no_stream_can_hold_is_named(name: str, kind: str, named: str) -> None:
    with pytest.raises(SchemaError, match=named.replace("(", r"\(")):
        schema_column(name, kind)


def test_a_declared_column_with_a_name_that_is_not_plain_is_named() -> None:
    with pytest.raises(SchemaError, match="column name 'my-speed' is not a plain identifier"):
        parse_ddl("unit STRING, my-speed DOUBLE")


def test_a_declared_type_no_stream_holds_is_named_with_the_types_it_may_be() -> None:
    with pytest.raises(SchemaError, match=r"column 'at': type TIMESTAMP_NTZ is not a flat primitive type \(one of "
                                          r"BIGINT, BOOLEAN, .*, TIMESTAMP, TINYINT or DECIMAL\(p,s\)\)"):
        parse_ddl("unit STRING, at TIMESTAMP_NTZ")
