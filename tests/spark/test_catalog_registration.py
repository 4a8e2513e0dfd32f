"""The engine's look at the lake (`pielake.lake.catalog.CatalogRegistration`): a table registers once its folder
appears, and a look that finds the lake's tables unchanged asks the catalog nothing, so a table dropped from the
catalog stays dropped until the lake's tables change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pielake.lake.catalog import DATABASE, STATEMENTS, CatalogRegistration, use_statements_database
from pielake.lake.delta import Lake

FIRST, SECOND = "events_registration_first", "events_registration_second"


@pytest.fixture
def lake(spark: SparkSession, tmp_path: Path) -> Iterator[Lake]:
    yield Lake(spark, tmp_path / "lake")
    for name in (FIRST, SECOND):  # nothing of the test left in the shared session's catalog
        spark.sql(f"DROP TABLE IF EXISTS {DATABASE}.{name}")


def catalogued(spark: SparkSession) -> set[str]:
    return {t.name for t in spark.catalog.listTables(DATABASE)} & {FIRST, SECOND}


def test_a_table_registers_when_it_appears_and_an_unchanged_lake_asks_the_catalog_nothing(
        spark: SparkSession, lake: Lake) -> None:
    # arrange
    registration = CatalogRegistration(lake)
    lake.overwrite(spark.range(3), FIRST)
    # act, assert: the first look registers the table, the next finds nothing new
    assert registration.refresh() == [FIRST]
    assert registration.refresh() == []
    assert catalogued(spark) == {FIRST}
    # a table dropped from the catalog is not looked for while the lake's tables stay the same
    spark.sql(f"DROP TABLE {DATABASE}.{FIRST}")
    assert registration.refresh() == []
    assert catalogued(spark) == set()
    # a new table changes the lake's tables: the look asks the catalog again, and registers both
    lake.overwrite(spark.range(2), SECOND)
    assert sorted(registration.refresh()) == [FIRST, SECOND]
    assert catalogued(spark) == {FIRST, SECOND}


def test_a_statement_s_database_dropped_by_a_sql_client_is_made_again_for_the_next_statement(
        spark: SparkSession) -> None:
    """`pielake sql` on an engine answers in `STATEMENTS`, which a SQL client on its JDBC endpoint can drop."""
    session = spark.newSession()
    spark.sql(f"DROP DATABASE IF EXISTS {STATEMENTS}")
    use_statements_database(session)
    assert session.catalog.currentDatabase() == STATEMENTS
    use_statements_database(session)  # as every later statement finds it
    assert session.catalog.currentDatabase() == STATEMENTS
