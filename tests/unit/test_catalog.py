"""The catalog's Spark settings: the lake's own Derby metastore by default, any JDBC metastore by configuration,
the password only from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from pielake.lake.catalog import PASSWORD_VARIABLE, Metastore, kind_view

JDO = "spark.hadoop.javax.jdo.option."


def test_the_default_catalog_is_a_derby_database_under_the_lake(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PASSWORD_VARIABLE, raising=False)
    conf = Metastore().spark_conf(tmp_path)
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf[f"{JDO}ConnectionURL"] == f"jdbc:derby:;databaseName={tmp_path}/_catalog/metastore_db;create=true"
    assert conf["spark.sql.warehouse.dir"] == f"{tmp_path}/_catalog/warehouse"
    assert not any(key.startswith(f"{JDO}Connection") and key != f"{JDO}ConnectionURL" for key in conf)


def test_an_external_metastore_takes_its_url_driver_user_and_the_password_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_VARIABLE, "s3cret")
    conf = Metastore("jdbc:postgresql://db:5432/metastore", "org.postgresql.Driver", "hive").spark_conf(tmp_path)
    assert {key: conf[f"{JDO}{key}"] for key in ("ConnectionURL", "ConnectionDriverName", "ConnectionUserName",
                                                 "ConnectionPassword")} == {
        "ConnectionURL": "jdbc:postgresql://db:5432/metastore", "ConnectionDriverName": "org.postgresql.Driver",
        "ConnectionUserName": "hive", "ConnectionPassword": "s3cret"}


def test_a_kind_is_a_view_of_its_results_table_built_from_quoted_identifiers_only() -> None:
    columns = ["kind", "car`id", "anchor", "run_id", "matches", "situations", "pairs", "progress"]
    assert kind_view("matches_q", "results_q", columns) == (
        "CREATE OR REPLACE VIEW default.matches_q WITH SCHEMA EVOLUTION AS SELECT `car``id`, matches.*, run_id "
        "FROM default.results_q WHERE kind = 'matches'")
    assert "run_id" not in kind_view("situations_q", "results_q", columns)
