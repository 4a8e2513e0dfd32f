"""The lake's Great Expectations project: where the gates' suites, validation definitions, checkpoints, results
and Data Docs live, laid out as GX lays out any file project.

    <lake>/_checks/gx/great_expectations.yml
    <lake>/_checks/gx/expectations/<query>/<gate>.json        one suite per query and gate, named `<query>.<gate>`
    <lake>/_checks/gx/checkpoints/, validation_definitions/
    <lake>/_checks/gx/uncommitted/validations/…              every gate's result, by suite, run id and time
    <lake>/_checks/gx/uncommitted/data_docs/local_site/index.html

Each gate is a Checkpoint of one validation definition (the stage's staged frame, a Spark DataFrame asset, or its
rows on the driver, a pandas one, against the query's suite), so a GX user opens the site, or the checkpoint, as
with any other project of theirs. The Data Docs are updated once a run (`update_docs`), by the gate that stops it
or once every gate has passed, not by each checkpoint's action: every update rebuilds the index from all stored
results, and a run has four gates.

Data Docs draw their index table with scripts loaded from public CDNs, so a site opened where those cannot be
reached (an air-gapped cluster, CI) shows an empty index. The lake's site therefore renders its index with
`data_docs.view.IndexView`, GX's index view with one template of pielake's own in front (`bootstrap_table.j2`) that
writes every table's rows into the page itself; where the scripts load, they take the table over as before. The
site's configuration names that view, as GX's own configuration names any custom view.

GX keeps the current project in a process-wide slot, and an engine runs gates of several lakes and queries from
threads: every use of a project holds `_PROJECT_LOCK` and makes its context the current one first.
"""

from __future__ import annotations

import difflib
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pielake import vocabulary as V

# Where a gate's frame is validated, by GX's Spark engine or by its pandas engine on the driver
# (`pielake.pipeline.gates.batch_data` says when): the data source, and what the gate's validation definition and
# checkpoint add to its name there.
ENGINES = {"spark": ("pielake", ""), "pandas": ("pielake_driver", ".driver")}
SITE_NAME = "local_site"
BATCH = "staged"  # the batch definition: a stage's whole staged frame
SITE_FOLDER = Path("uncommitted") / "data_docs" / SITE_NAME  # inside gx/, where GX keeps its default site
_PROJECT_LOCK = threading.Lock()

SITE = {
    "class_name": "SiteBuilder",
    "show_how_to_buttons": False,
    "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": f"{SITE_FOLDER}/"},
    "site_index_builder": {"class_name": "DefaultSiteIndexBuilder",
                           "view": {"module_name": "pielake.pipeline.data_docs.view", "class_name": "IndexView"}},
}


def project_root(lake_root: Path) -> Path:
    """The folder holding the lake's GX project (`gx/` inside it, as `gx.get_context(mode="file")` makes it)."""
    return lake_root / V.CHECKS_DIR


def docs_index(lake_root: Path) -> Path:
    return project_root(lake_root) / "gx" / SITE_FOLDER / "index.html"


@contextmanager
def project(lake_root: Path) -> Iterator[Any]:
    """The lake's GX project (created on first use), held for this thread until the block ends."""
    import great_expectations as gx  # noqa: PLC0415 (seconds to import: only gated runs pay for it)
    from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: PLC0415

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    with _PROJECT_LOCK:
        try:
            context = gx.get_context(mode="file", project_root_dir=str(project_root(lake_root)))
            context.variables.progress_bars = ProgressBarsConfig(globally=False)
            _configure_site(context)
            yield context
        finally:
            _forget_loaded_documents()


def _forget_loaded_documents() -> None:
    """GX parses its project's YAML with loaders it keeps in module globals, ruamel.yaml's `YAML` or GX's
    `YAMLHandler` around one, and ruamel.yaml's loader keeps a record of every document it has loaded
    (`YAML.doc_infos`; it reads only the record of the document being loaded). A gated run loads about 300, so a
    process that serves runs for days (the engine) would keep them all (docs/performance.md): they are forgotten
    whenever GX is done."""
    from great_expectations.core.yaml_handler import YAMLHandler  # noqa: PLC0415 (imported with GX)
    from ruamel.yaml import YAML  # noqa: PLC0415

    for name, module in list(sys.modules.items()):
        if name.startswith("great_expectations") and module is not None:
            for value in list(vars(module).values()):
                loader = value._handler if isinstance(value, YAMLHandler) else value
                if isinstance(loader, YAML) and isinstance(getattr(loader, "doc_infos", None), list):
                    loader.doc_infos.clear()


def _configure_site(context: Any) -> None:
    """The project's one Data Docs site (GX's default `local_site`), its index rendered with `IndexView`."""
    sites = context.config.data_docs_sites or {}
    if sites.get(SITE_NAME) != SITE:
        if SITE_NAME in sites:
            context.update_data_docs_site(SITE_NAME, SITE)
        else:
            context.add_data_docs_site(SITE_NAME, SITE)


def checkpoint(context: Any, name: str, expectations: list[dict[str, Any]], result_format: str, *,
               engine: str) -> Any:
    """The checkpoint of the gate `name` (`<query>.<gate>`) on `engine` (`ENGINES`): its suite, and its data
    source's asset, batch, validation definition and checkpoint, created or brought up to date (a query's columns
    change when its text does).

    Each engine has its own validation definition and checkpoint. Updating a data source empties it of the other
    gates' assets, and GX resolves a stored definition's asset before it replaces the definition: so a definition
    only ever names the asset just made again in its own engine's data source."""
    import great_expectations as gx  # noqa: PLC0415

    source_name, suffix = ENGINES[engine]
    source = getattr(context.data_sources, f"add_or_update_{engine}")(name=source_name)
    asset = source.add_dataframe_asset(name=name)
    batch = asset.add_batch_definition_whole_dataframe(BATCH)
    suite = context.suites.add_or_update(gx.ExpectationSuite(name=name, expectations=[
        expectation(e["type"], e["kwargs"]) for e in expectations]))
    validation = context.validation_definitions.add_or_update(gx.ValidationDefinition(
        name=name + suffix, data=batch, suite=suite))
    return context.checkpoints.add_or_update(gx.Checkpoint(
        name=name + suffix, validation_definitions=[validation], result_format=result_format))


def expectation(kind: str, kwargs: dict[str, Any]) -> Any:
    """GX's expectation `kind` with `kwargs`, or a ValueError that says why GX builds none in words a suite's
    author acts on: a type GX does not have (with those whose names are closest), arguments it does not take.

    GX is imported whole first: its expectations register themselves as their modules load, and a process may be
    importing GX in another thread (`gates.import_gx_meanwhile`), whose registry is complete once the package is."""
    import great_expectations  # noqa: F401, PLC0415
    from great_expectations.compatibility.pydantic import ValidationError  # noqa: PLC0415
    from great_expectations.exceptions import GreatExpectationsError  # noqa: PLC0415
    from great_expectations.expectations.registry import (  # noqa: PLC0415
        get_expectation_impl,
        list_registered_expectation_implementations,
    )

    try:
        build = get_expectation_impl(kind)
    except GreatExpectationsError:
        close = difflib.get_close_matches(kind, list_registered_expectation_implementations(), n=3)
        raise ValueError(f"Great Expectations has no expectation '{kind}'"
                         + (f"; did you mean {' or '.join(close)}?" if close else "")) from None
    try:
        return build(**kwargs)
    except ValidationError as error:
        problems = "; ".join(f"{_field(e['loc'])}: {e['msg']}" for e in error.errors())
        raise ValueError(f"{kind} does not take these arguments: {problems}") from None
    except GreatExpectationsError as error:
        raise ValueError(f"{kind} does not take these arguments: {error}") from None


def _field(location: tuple[Any, ...]) -> str:
    """Where pydantic found a problem: an argument's name, or the arguments together (its `__root__`)."""
    return "the arguments" if location == ("__root__",) else ".".join(map(str, location))


def update_docs(context: Any, run_id: str) -> None:
    """Render the pages of every stored result of the run `run_id`, then the index, in one Data Docs build.

    A build costs a page's rendering per result it is given plus the index, which is rebuilt from every stored
    result, seconds once a query has run a while (docs/performance.md): once per run rather than once per gate
    saves three index builds a run."""
    keys = [k for k in context.validation_results_store.list_keys() if k.run_id.run_name == run_id]
    context.build_data_docs(site_names=[SITE_NAME], resource_identifiers=keys)


def run_identifier(run_id: str) -> Any:
    """GX's identifier of a pielake run: its name is the run id, so Data Docs list a run's gates under it."""
    from great_expectations.core.run_identifier import RunIdentifier  # noqa: PLC0415

    return RunIdentifier(run_name=run_id, run_time=datetime.now(UTC))


def keep_newest(context: Any, lake_root: Path, suite: str, keep: int) -> int:
    """Delete the results of `suite` but its newest `keep` (their Data Docs pages too); returns how many went.
    Run before a checkpoint, so the index it rebuilds lists a bounded number of results (`docs_runs`)."""
    store = context.validation_results_store
    held = sorted((k for k in store.list_keys() if k.expectation_suite_identifier.name == suite),
                  key=lambda k: k.run_id.run_time)
    old = held[:max(len(held) - keep, 0)]
    for key in old:
        store.remove_key(key)
        result_page(lake_root, key).unlink(missing_ok=True)
    return len(old)


def result_page(lake_root: Path, key: Any) -> Path:
    """The Data Docs page of one validation result (GX names it by suite, run, time and batch)."""
    suite, run_name, run_time, batch = key.to_tuple()[:-3], *key.to_tuple()[-3:]
    return (docs_index(lake_root).parent / "validations" / Path(*suite) / run_name / run_time / f"{batch}.html")
