"""`explain` output for the bundled example query, kept as a golden file."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pydot
from click.testing import CliRunner

from pielake.cli import main
from pielake.explain import RELATION_EXAMPLES, explain, explain_dot, relation_pictures
from pielake.query.analyzer import load_query
from pielake.semantics.automata import AUTOMATA, Action
from pielake.semantics.relations import RELATIONS
from tests.conftest import FIXTURES

EXAMPLE = Path(__file__).parents[2] / "examples" / "queries" / "aggressive_driving.tpq"


def test_explain_of_the_aggressive_driving_query_matches_its_golden_file() -> None:
    actual = explain(load_query(EXAMPLE.read_text(encoding="utf-8"), "aggressive_driving"))
    golden = FIXTURES / "explain" / "aggressive_driving.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")


def test_explain_ends_with_the_query_s_warnings_each_at_its_line_and_column() -> None:
    """TPStream's own listing writes units after its values, which are read and ignored (values compare as their
    columns hold them): explain says so last, as `pielake check` does."""
    listing = (FIXTURES / "queries" / "valid" / "tpstream_listing1.tpq").read_text(encoding="utf-8")
    assert explain(load_query(listing, "listing1")).splitlines()[-3:] == [
        "warning: unit 'm/s2' after 8 is ignored; values are compared as plain numbers (line 2, col 24)",
        "warning: unit 'mph' after 70 is ignored; values are compared as plain numbers (line 3, col 27)",
        "warning: unit 'm/s2' after 9 is ignored; values are compared as plain numbers (line 4, col 25)"]


def test_explain_names_before_as_a_range_join_and_the_prefix_group_decision() -> None:
    text = explain(load_query("FROM S DEFINE A AS a, B AS b, C AS c "
                              "PATTERN A before B AND B starts; equals; started-by C WITHIN 1 h"))
    assert "A before B:  range join on A.te < B.ts, bounded by the window; decided at B.ts" in text
    assert "if B starts C: decided at B.ts = C.ts" in text
    assert "if B started-by C: decided at B.ts = C.ts" in text


def test_explain_dot_is_one_graphviz_digraph_with_every_automaton_drawn() -> None:
    plan = load_query(EXAMPLE.read_text(encoding="utf-8"), "aggressive_driving")
    [graph] = pydot.graph_from_dot_data(explain_dot(plan))
    clusters = {g.get_name(): g for g in graph.get_subgraphs()}
    automata = [(c, r) for c in plan.constraints for r in c.ordered_relations() if r in AUTOMATA]
    assert set(clusters) == {"cluster_query"} | {f"cluster_{c.id}_{r.replace('-', '_')}" for c, r in automata}
    decomposition = {(e.get_source(), e.get_destination()) for e in clusters["cluster_query"].get_edges()}
    for c in plan.constraints:
        assert {(f"symbol_{c.left}", c.id), (f"symbol_{c.right}", c.id), (c.id, "matches")} <= decomposition
    for c, relation in automata:
        edges = clusters[f"cluster_{c.id}_{relation.replace('-', '_')}"].get_edges()
        transitions = AUTOMATA[relation].transitions
        assert len(edges) == len(transitions) + 1  # and the arrow into the start state
        triggers = [e for e in edges if e.get("color") == "red"]
        assert len(triggers) == sum(t.action is Action.TRIGGER for t in transitions) > 0


def test_explain_dot_without_automata_draws_the_decomposition_alone() -> None:
    plan = load_query(EXAMPLE.read_text(encoding="utf-8"), "aggressive_driving")
    [alone] = pydot.graph_from_dot_data(explain_dot(plan, automata=False))
    [whole] = pydot.graph_from_dot_data(explain_dot(plan))
    [query] = alone.get_subgraphs()
    assert query.get_name() == "cluster_query"
    assert query.to_string() == next(g for g in whole.get_subgraphs() if g.get_name() == "cluster_query").to_string()


def test_explain_dot_quotes_the_query_text_it_shows() -> None:
    plan = load_query("FROM S DEFINE A AS name = 'say \"hi\" }; x', B AS b PATTERN A meets B WITHIN 1 h")
    [graph] = pydot.graph_from_dot_data(explain_dot(plan))
    [symbol] = [n for g in graph.get_subgraphs() for n in g.get_nodes() if n.get_name() == "symbol_A"]
    assert symbol.get("label") == '"A\\nname = \'say \\"hi\\" }; x\'"'


def test_every_relation_example_satisfies_its_relation_and_no_other() -> None:
    for name, (left, right) in RELATION_EXAMPLES.items():
        a, b = (SimpleNamespace(ts=ts, te=te) for ts, te in (left, right))
        holding = {n for n, r in RELATIONS.items() if r.allen and r.condition(a, b)}
        endpoints_of = {"followed-by": "before", "follows": "after"}  # plus the quiet gap, not an endpoint matter
        assert holding == {endpoints_of.get(name, name)}, name
    assert set(RELATION_EXAMPLES) == set(RELATIONS)


def test_the_query_language_page_shows_the_relation_pictures_pielake_prints() -> None:
    page = (Path(__file__).parents[2] / "docs" / "query-language.md").read_text(encoding="utf-8")
    assert f"```\n{relation_pictures()}```\n" in page


def test_explain_of_a_query_over_interval_rows_says_how_its_situations_are_made(tmp_path: Path) -> None:
    query = tmp_path / "q.tpq"
    query.write_text((EXAMPLE.parent / "alarm_before_repair.tpq").read_text(encoding="utf-8"))
    result = CliRunner().invoke(main, ["explain", str(query)])
    assert result.exit_code == 0, result.output
    assert "situations = unions of the interval rows satisfying the predicate" in result.output
    assert "maximal runs of events" not in result.output


def test_explain_checks_the_columns_against_the_streams_schema(tmp_path: Path) -> None:
    """A stream with a schema in `schemas/`: a misspelt column fails explain as it would fail a run, naming the line
    and column and suggesting the column meant."""
    query = tmp_path / "q.tpq"
    text = (EXAMPLE.parent / "alarm_before_repair.tpq").read_text(encoding="utf-8")
    query.write_text(text.replace("M.state = 'MAINT'", "M.stat = 'MAINT'"))
    result = CliRunner().invoke(main, ["explain", str(query)])
    assert result.exit_code == 2
    assert "unknown column 'stat'. Line 6, Col 39. Did you mean 'state'?" in result.output
