"""Delta's jars for a JVM's system class path (`pielake.engine.session.resolve_jars`): resolved by a JVM of its own
the first time, then read from the record kept beside the Ivy cache for as long as every jar it names is there."""

from __future__ import annotations

from pathlib import Path

import pytest

from pielake.engine import session
from pielake.engine.session import resolve_jars
from pielake.engine.settings import delta_package


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of the records alone (the jars stay in Spark's own Ivy cache)."""
    monkeypatch.setattr(session, "IVY_CACHE", tmp_path)
    return tmp_path / "pielake-resolved"


def test_a_resolution_is_kept_and_read_back_while_its_jars_are_there(records: Path) -> None:
    jars = resolve_jars([delta_package()])
    assert any(Path(j).name.startswith("io.delta_delta-spark") for j in jars) and all(Path(j).is_file() for j in jars)
    [record] = records.iterdir()
    assert record.read_text(encoding="utf-8").split() == jars
    kept = [str(records / "a.jar")]
    Path(kept[0]).touch()
    record.write_text(kept[0], encoding="utf-8")
    assert resolve_jars([delta_package()]) == kept  # read back: no JVM would answer a jar of this folder


def test_a_record_naming_a_jar_that_is_gone_is_resolved_again(records: Path) -> None:
    first = resolve_jars([delta_package()])
    [record] = records.iterdir()
    record.write_text(str(records / "gone.jar"), encoding="utf-8")
    assert resolve_jars([delta_package()]) == first
    assert record.read_text(encoding="utf-8").split() == first
