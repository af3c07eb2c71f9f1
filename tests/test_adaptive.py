"""Adaptive measurement (method/adaptive.py), the planner's choice of it, and sensitivity from
columns declared distinct per individual."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsyn.lib.tuning import T
from dpsyn.api import release
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import SchemaError, parse_schema
from dpsyn.method.adaptive import Model
from dpsyn.method.planner import ADAPTIVE, ONE_WAY, PUBLIC, TWO_WAY, TableShape, make_plan, pair_noise
from dpsyn.method.split_columns import SplitColumns
from helpers import noisy_pairs, run_method, with_rounds

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": 1}],
                       "schema": {"G": {"dtype": "str", "values": ["a", "b", "c"]},
                                  "X": {"dtype": "int", "values": [0, 1, 2, 3]},
                                  "Y": {"dtype": "int", "values": [0, 1]},
                                  "Z": {"dtype": "int", "values": [0, 1, 2]}}})


def correlated(n: int = 4000, seed: int = 0) -> np.ndarray:
    """G, X, Y, Z codes with Y a noisy copy of X's parity and Z of G: pairs worth measuring."""
    rng = np.random.default_rng(seed)
    g, x = rng.integers(0, 3, n), rng.integers(0, 4, n)
    y = np.where(rng.random(n) < 0.9, x % 2, rng.integers(0, 2, n))
    z = np.where(rng.random(n) < 0.8, g, rng.integers(0, 3, n))
    return np.column_stack([g, x, y, z]).astype(np.int32)


@pytest.mark.parametrize("groups", [("G",), ()])
@pytest.mark.parametrize("epsilon", [0.3, 3.0])
def test_adaptive_rounds_spend_exactly_the_budget_and_record_every_choice(groups, epsilon):
    encoder = Encoder.fit(SCHEMA)
    out, ledger = run_method("dpsyn", encoder, correlated(), theta=2, epsilon=epsilon, groups=groups, seed=3,
                             regime="adaptive")
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    assert ledger.spent <= ledger.budget * (1 + 1e-12)
    selections = [c for c in ledger.charges if c.mechanism.startswith("exponential mechanism")]
    rounds = [c for c in ledger.charges if c.step.startswith("adaptive round") and c not in selections]
    assert selections and len(selections) == len(rounds)  # each round: one choice, then one measurement
    for chosen, measured in zip(selections, rounds[:-1]):
        assert chosen.rho == pytest.approx(T.adaptive_select_share / (1 - T.adaptive_select_share) * measured.rho, rel=1e-9)
    # theta = 2; a selection adds its grid step (2^-10 of it) and twice its scores' float-error bound (< 2^-15)
    assert all(2 <= c.sensitivity <= 2 * (1 + 2 ** -10) + 2 ** -15 for c in ledger.charges)
    assert ((out >= 0) & (out < np.array(encoder.sizes))).all()
    assert abs(len(out) - 4000) < 800


@pytest.mark.parametrize("per_column, one_way_rounds", [(T.adaptive_few_rounds_per_column, 1),
                                                       (T.adaptive_rounds_per_column, 2),
                                                       (T.adaptive_rounds_per_column, T.planner_poor_one_way_rounds)])
def test_the_planners_round_choices_spend_exactly_the_budget(monkeypatch, per_column, one_way_rounds):
    """The plan's fewer rounds and larger 1-way rho (method/planner.py) still spend the budget exactly,
    the 1-way marginals at one_way_rounds rounds' measuring rho each."""
    with_rounds(monkeypatch, per_column=per_column, one_way=one_way_rounds)
    out, ledger = run_method("dpsyn", Encoder.fit(SCHEMA), correlated(), epsilon=3.0, seed=2, regime="adaptive")
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    one_way = [c.rho for c in ledger.charges if c.step.startswith("1-way marginal")]
    choice = next(c.rho for c in ledger.charges if c.mechanism.startswith("exponential mechanism"))
    round_measure = choice * (1 - T.adaptive_select_share) / T.adaptive_select_share
    assert len(one_way) == 4 and one_way == pytest.approx([one_way_rounds * round_measure] * 4, rel=1e-9)
    assert ((out >= 0) & (out < np.array(Encoder.fit(SCHEMA).sizes))).all()


def test_many_rounds_start_smaller_and_still_spend_exactly_the_budget(monkeypatch):
    """Where pairs are noisy, the first round's rho is the budget over T.adaptive_many_rounds_per_column rounds a
    column instead of T.adaptive_rounds_per_column, and the ledger still sums to the budget."""
    first_choice = {}
    for many in (False, True):
        with_rounds(monkeypatch, **(noisy_pairs() if many else {}))
        _, ledger = run_method("dpsyn", Encoder.fit(SCHEMA), correlated(), epsilon=3.0, seed=2, regime="adaptive")
        assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
        first_choice[many] = next(c.rho for c in ledger.charges if c.mechanism.startswith("exponential mechanism"))
    assert first_choice[True] / first_choice[False] == pytest.approx(T.adaptive_rounds_per_column / T.adaptive_many_rounds_per_column,
                                                                      rel=1e-9)

def test_records_drawn_from_the_maximum_entropy_estimate_spend_the_budget_and_keep_the_dependence(monkeypatch,
                                                                                                  caplog):
    """Without groups or public records, where the plan finds the pairs noisy, the final records come from the
    maximum-entropy estimate (method/planner.py ``adaptive_rounds``): post-processing, so the ledger still sums to
    the budget; the records stay in the domain and keep Y as X's parity."""
    import logging

    with_rounds(monkeypatch, **noisy_pairs())
    encoder = Encoder.fit(SCHEMA)
    with caplog.at_level(logging.INFO, logger="dpsyn.method.adaptive"):
        out, ledger = run_method("dpsyn", encoder, correlated(), epsilon=3.0, seed=5, regime="adaptive")
    assert "drawn from the maximum-entropy distribution" in caplog.text
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    assert ((out >= 0) & (out < np.array(encoder.sizes))).all()
    assert np.mean(out[:, 2] == out[:, 1] % 2) > 0.85  # 0.95 in the private data, 0.5 if independent


def test_adaptive_is_deterministic_under_a_seed_and_learns_the_dependence():
    encoder = Encoder.fit(SCHEMA)
    first, _ = run_method("dpsyn", encoder, correlated(), epsilon=3.0, seed=5, regime="adaptive")
    second, _ = run_method("dpsyn", encoder, correlated(), epsilon=3.0, seed=5, regime="adaptive")
    assert np.array_equal(first, second)
    parity = np.mean(first[:, 2] == first[:, 1] % 2)  # 0.95 in the private data, 0.5 if independent
    assert parity > 0.85


def test_the_model_merges_repeated_measurements_by_inverse_variance():
    model = Model(("A",), (2,), ())
    model.add((0,), np.array([10.0, 0.0]), 1.0)
    model.add((0,), np.array([0.0, 10.0]), 2.0)
    values, sigma = model.noisy[(0,)]
    assert np.allclose(values, [8.0, 2.0]) and sigma == pytest.approx((1 + 0.25) ** -0.5)


def test_the_model_counts_every_candidate_as_it_counts_one():
    rng = np.random.default_rng(3)
    sizes = (4, 3, 5, 2)
    model = Model(("a", "b", "c", "d"), sizes, ())
    model.records = np.column_stack([rng.integers(0, k, 500) for k in sizes]).astype(np.int32)
    candidates = [(0,), (1, 3), (0, 2, 3), (2, 1)]
    for one, batch in zip([model.answer(c) for c in candidates], model.answers(candidates)):
        np.testing.assert_array_equal(one, batch)


def test_the_planner_measures_every_pair_only_when_that_is_cheap():
    cells, rows = (400, 400, 400), 5000
    cheap = pair_noise(10.0, 1, rows, cells)
    dear = pair_noise(0.001, 1, rows, cells)
    assert cheap < T.planner_two_way_noise < dear
    # eps = 5, theta = 1, 5,000 rows: the write-up picks two-way; the noise of all pairs decides
    assert make_plan(5.0, 1, rows, TableShape(True, False, pair_cells=cells), rho=10.0).regime == TWO_WAY
    assert make_plan(5.0, 1, rows, TableShape(False, True, pair_cells=cells), rho=10.0).regime == TWO_WAY
    assert make_plan(5.0, 1, rows, TableShape(True, False, pair_cells=cells), rho=0.001).regime == ADAPTIVE
    # with neither groups nor a public file, cheap pairs go to few adaptive rounds, which may measure beyond pairs
    plan = make_plan(5.0, 1, rows, TableShape(False, False, pair_cells=cells), rho=10.0)
    assert (plan.regime, plan.rounds.per_column) == (ADAPTIVE, T.adaptive_few_rounds_per_column)
    assert make_plan(5.0, 1, rows, TableShape(False, False)).regime == TWO_WAY  # the write-up alone
    assert make_plan(1.0, 1, rows, TableShape(False, False)).regime == ONE_WAY
    assert make_plan(1.0, 1, rows, TableShape(False, False, pair_cells=cells), rho=0.001).regime == ADAPTIVE
    # where the write-up keeps to public marginals, so does the planner
    assert make_plan(0.01, 1, rows, TableShape(True, True, pair_cells=cells), rho=0.001).regime == PUBLIC
    plan = make_plan(5.0, 1, rows, TableShape(True, False, pair_cells=cells), rho=0.03)  # pair noise about 1: rich
    assert (plan.regime, plan.rounds.one_way) == (ADAPTIVE, 2)  # the pairs worth their noise
    assert plan.group_share == make_plan(5.0, 1, rows, TableShape(True, False), TWO_WAY).group_share


def test_without_public_records_pairs_of_middling_noise_go_to_fewer_adaptive_rounds():
    cells, rows = (400, 400, 400), 5000
    rho = 0.3  # pair noise between the two thresholds
    assert T.planner_two_way_noise_from_draws < pair_noise(rho, 1, rows, cells) < T.planner_two_way_noise
    with_public = make_plan(5.0, 1, rows, TableShape(False, True, pair_cells=cells), rho=rho)
    from_draws = make_plan(5.0, 1, rows, TableShape(False, False, pair_cells=cells), rho=rho)
    assert (with_public.regime, with_public.rounds) == (TWO_WAY, None)
    assert (from_draws.regime, from_draws.rounds.per_column) == (ADAPTIVE, T.adaptive_few_rounds_per_column)
    assert f"{T.adaptive_few_rounds_per_column} rounds a column" in from_draws.describe(rho)
    assert from_draws.rounds.one_way == 1  # few rounds: none taken from them for the 1-ways
    dear = make_plan(5.0, 1, rows, TableShape(False, False, pair_cells=cells), rho=0.001)
    assert (dear.regime, dear.rounds.per_column, dear.rounds.one_way) == (ADAPTIVE, T.adaptive_many_rounds_per_column,
                                                                          T.planner_poor_one_way_rounds)
    assert make_plan(5.0, 1, rows, TableShape(False, True, pair_cells=cells), rho=0.001).rounds.one_way == 1  # public file
    grouped = make_plan(5.0, 1, rows, TableShape(True, False, pair_cells=cells, group_cells=cells, n_groups=4), rho=0.001)
    assert (grouped.regime, grouped.rounds.one_way) == (ADAPTIVE, T.planner_poor_grouped_one_way_rounds)
    rich = make_plan(5.0, 1, rows, TableShape(False, False, pair_cells=cells), rho=0.03)  # pair noise about 1
    assert T.planner_two_way_noise < pair_noise(0.03, 1, rows, cells) < T.planner_rich_pair_noise
    assert (rich.regime, rich.rounds.per_column, rich.rounds.one_way) == (ADAPTIVE, T.adaptive_rounds_per_column, 2)
    assert from_draws.rounds.one_way == 1
    assert make_plan(5.0, 1, rows, TableShape(False, False), ADAPTIVE).rounds.per_column == T.adaptive_rounds_per_column
    # forced: the usual rounds


def test_the_model_counts_coarse_readings_of_split_columns_as_it_counts_one():
    """Coarse readings with and without their exact reading among the candidates: the batch counts the
    ones without, sums the exact one's offsets out for the others, and agrees with ``answer`` on each."""
    rng = np.random.default_rng(4)
    sizes = (40, 3, 50, 2)
    layout = SplitColumns.choose(sizes, [0, 1, 2, 3])
    model = Model(("a", "b", "c", "d"), sizes, (), layout=layout)
    model.records = layout.encode(np.column_stack([rng.integers(0, k, 600) for k in sizes]).astype(np.int32))
    model.total = 600.0
    candidates = [layout.key((0, 2)), layout.key((0, 2), (0, 2)), layout.key((0, 1, 2), (0, 2)),
                  layout.key((2, 3), (2,)), layout.key((0,))]
    assert len({len(c) for c in candidates}) > 2  # exact pairs over split columns read more model columns
    for one, batch in zip([model.answer(c) for c in candidates], model.answers(candidates)):
        np.testing.assert_array_equal(one, batch)


def test_the_model_answers_a_measured_marginal_by_its_estimate_and_others_from_its_records():
    """A marginal the records fit poorly is not worth measuring again: its answer is the consistent
    estimate, so the rounds' score sees only what a new measurement would add (AIM's model answers)."""
    model = Model(("a", "b"), (2, 2), ())
    model.records = np.array([[0, 0]] * 3 + [[1, 1]], dtype=np.int32)
    model.total = 4.0
    model.consistent = {(0,): np.array([2.0, 2.0])}
    assert np.array_equal(model.answer((0,)), [2.0, 2.0])
    assert np.array_equal(model.answer((1,)), [3.0, 1.0])
    assert [a.tolist() for a in model.answers([(0,), (1,), (0, 1)])] == [[2.0, 2.0], [3.0, 1.0], [[3.0, 0.0], [0.0, 1.0]]]


def test_many_small_groups_make_the_planner_measure_adaptively():
    """Cheap pairs, but 1,000 groups of 5 rows: each group's own column marginals would be mostly
    noise (the Sprint-2 shape at eps 10), so two-way gives way to the adaptive rounds."""
    cells, rows = (400, 400, 400), 5000
    few, many = (20 * 20,) * 3, (1000 * 20,) * 3  # group cells × a column's 20 cells
    assert pair_noise(10.0, 1, rows, few) < T.planner_two_way_noise < pair_noise(10.0, 1, rows, many)
    assert make_plan(5.0, 1, rows, TableShape(True, False, pair_cells=cells, group_cells=few), rho=10.0).regime == TWO_WAY
    assert make_plan(5.0, 1, rows, TableShape(True, False, pair_cells=cells, group_cells=many), rho=10.0).regime == ADAPTIVE
    # without groups the group cells play no part
    assert make_plan(5.0, 1, rows, TableShape(False, True, pair_cells=cells, group_cells=many), rho=10.0).regime == TWO_WAY


def per_person_table(people: int = 300, seed: int = 0) -> pd.DataFrame:
    """Individuals with up to three rows, some of them twice in one year."""
    rng = np.random.default_rng(seed)
    rows = []
    for person in range(people):
        for _ in range(rng.integers(1, 4)):
            rows.append({"pid": f"p{person}", "YEAR": int(rng.integers(2018, 2020)),
                         "X": int(rng.integers(0, 3))})
    return pd.DataFrame(rows)


def distinct_params(theta: int = 3, distinct=("YEAR",)) -> dict:
    return {"runs": [{"epsilon": 1.0, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": theta}],
            "schema": {"YEAR": {"values": [2018, 2019]}, "X": {"values": [0, 1, 2]}},
            "distinct_per_individual": list(distinct)}


def test_declared_distinct_columns_give_sqrt_theta_to_marginals_over_them():
    (run,) = release(per_person_table(), distinct_params(), method="dpsyn", seed=0, id_column="pid",
                     group_columns=("YEAR",))
    by_step = {c.step: c for c in run.ledger.charges}
    assert by_step["group counts (YEAR)"].sensitivity == pytest.approx(np.sqrt(3))
    assert "distinct cells" in by_step["group counts (YEAR)"].sensitivity_reason
    others = [c for c in run.ledger.charges if "YEAR" not in c.step]
    assert others and all(c.sensitivity >= 3 for c in others)
    (plain,) = release(per_person_table(), distinct_params(), method="dpsyn", seed=0, id_column="pid",
                       group_columns=("YEAR",), distinct_per_individual=())
    assert all(c.sensitivity >= 3 for c in plain.ledger.charges)


@pytest.mark.parametrize("distinct, message", [(["ZIP"], "'ZIP' is not a schema column"),
                                               (["X", "X"], "named twice"), ("YEAR", "must be a list")])
def test_a_bad_distinct_declaration_is_one_line(distinct, message):
    params = distinct_params()
    params["distinct_per_individual"] = distinct
    with pytest.raises(SchemaError) as err:
        parse_schema(params)
    assert len(err.value.problems) == 1 and message in err.value.problems[0]


def test_a_numeric_distinct_column_on_the_command_line_exits_2_and_writes_nothing(tmp_path):
    params = json.loads((ROOT / "parameters.json").read_text())
    (tmp_path / "p.json").write_text(json.dumps(params))
    proc = subprocess.run([sys.executable, "main.py", "--params", tmp_path / "p.json", "--private",
                           ROOT / "data/demo/private.csv", "--output", tmp_path / "out.csv",
                           "--distinct-per-individual", "AGEP"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "AGEP must be a categorical column" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == [tmp_path / "p.json"]


def test_the_adaptive_regime_keeps_the_group_share_of_the_regime_it_replaces():
    cells, rows = (400, 400, 400), 5000
    one_way = make_plan(1.0, 1, rows, TableShape(True, False, pair_cells=cells), rho=0.03)
    assert (one_way.regime, one_way.rounds.one_way) == (ADAPTIVE, 2)
    assert one_way.group_share == make_plan(1.0, 1, rows, TableShape(True, False)).group_share  # the write-up's one-way


@pytest.mark.parametrize("has_public", [False, True])
def test_where_pairs_are_noisy_the_group_counts_keep_part_of_their_share(has_public):
    """Adaptive rounds on noisy pairs: the group counts give up (1 - T.planner_poor_group_share) of the write-up's share
    to the rounds; the shares still sum to the whole budget."""
    cells, rows = (400, 400, 400), 5000
    poor = make_plan(1.0, 1, rows, TableShape(True, has_public, pair_cells=cells), rho=0.001)
    assert (poor.regime, poor.rounds.group_keep) == (ADAPTIVE, T.planner_poor_group_share)
    written = make_plan(1.0, 1, rows, TableShape(True, has_public))
    assert poor.group_share == pytest.approx(T.planner_poor_group_share * written.group_share, rel=1e-12)
    assert poor.total_share + poor.group_share + poor.marginal_share == pytest.approx(1.0, rel=1e-12)
    many = T.adaptive_many_rounds_per_column
    assert (poor.rounds.per_column == many) == (not has_public)  # more, smaller rounds only from independent draws
    assert poor.rounds.coarse_reads == (not has_public)
    ungrouped = make_plan(1.0, 1, rows, TableShape(False, has_public, pair_cells=cells), rho=0.001)
    assert (ungrouped.rounds.per_column == many) == (not has_public)
    assert make_plan(1.0, 1, rows, TableShape(True, has_public, pair_cells=cells), rho=0.03).rounds.per_column != many  # rich


def test_the_model_answers_marginals_by_some_of_the_group_columns():
    """Groups P × Y, column X measured by P alone: each group's X follows its P's X distribution,
    scaled to the group's count, and the model answers P × X and Y × X from that."""
    model = Model(("P", "Y", "X"), (3, 2, 2), (0, 1))
    counts = np.array([[10.0, 30.0], [20.0, 20.0], [5.0, 15.0]])
    by_p = np.array([[36.0, 4.0], [20.0, 20.0], [2.0, 18.0]])
    model.consistent = {(0, 1): counts, (2,): by_p.sum(axis=0), (0, 2): by_p}
    model.total = counts.sum()
    assert model.group_parts(2) == [(0, 2)] and model.group_parts(0) == []
    per_group = model.per_group(2).reshape(3, 2, 2)
    np.testing.assert_allclose(per_group.sum(axis=2), counts, atol=1e-3)
    np.testing.assert_allclose(per_group.sum(axis=1), by_p, atol=1e-3)
    np.testing.assert_allclose(per_group[0, 1], [27.0, 3.0], atol=1e-3)  # 30 rows, 90% X = 0 as in P = 0
    np.testing.assert_allclose(model.answer((0, 2)), by_p, atol=1e-3)
    np.testing.assert_allclose(model.answer((1, 2)), per_group.sum(axis=0), rtol=1e-12)
    assert list(model.per_group_marginals()) == [2]


def _x_follows_p(n: int, rng: np.random.Generator):
    """(schema, codes) of n rows of groups P × Y (3 × 2) and columns X, Z, where X equals P in 80% of rows."""
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10_000,
                                     "max_records_per_individual": 1}],
                           "schema": {"P": {"dtype": "str", "values": ["a", "b", "c"]},
                                      "Y": {"dtype": "int", "values": [0, 1]},
                                      "X": {"dtype": "int", "values": [0, 1, 2, 3]},
                                      "Z": {"dtype": "int", "values": [0, 1]}}})
    p, y, z = rng.integers(0, 3, n), rng.integers(0, 2, n), rng.integers(0, 2, n)
    x = np.where(rng.random(n) < 0.8, p, rng.integers(0, 4, n))
    return schema, np.column_stack([p, y, x, z]).astype(np.int32)


def test_rounds_measure_a_column_by_the_one_group_column_it_depends_on():
    """X depends on P and not on Y: a round measures P × X (half the cells of P × Y × X) and the
    release keeps the dependence in every group, with large groups (1,500 rows) and small ones (500 rows)."""
    schema, codes = _x_follows_p(9000, np.random.default_rng(0))
    out, ledger = run_method("dpsyn", Encoder.fit(schema), codes, epsilon=2.0, groups=("P", "Y"), seed=1,
                             regime="adaptive")
    measured = [c.step.split(": ", 1)[1] for c in ledger.charges
                if c.step.startswith("adaptive round") and not c.mechanism.startswith("exponential")]
    assert measured[0] == "2-way marginal P × X"
    for group in range(3):
        assert np.mean(out[out[:, 0] == group, 2] == group) > 0.7  # 0.8 + 0.2 / 4 in the private table
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    small, ledger = run_method("dpsyn", Encoder.fit(schema), codes[:3000], epsilon=2.0, groups=("P", "Y"), seed=1,
                               regime="adaptive")
    measured = [c.step.split(": ", 1)[1] for c in ledger.charges
                if c.step.startswith("adaptive round") and not c.mechanism.startswith("exponential")]
    assert "2-way marginal P × X" in measured and "3-way marginal P × Y × X" not in measured, measured
    for group in range(3):
        assert np.mean(small[small[:, 0] == group, 2] == group) > 0.7


def test_from_public_records_small_groups_may_be_measured_by_one_group_column():
    """From public records groups are drawn whole by raking, so P × X is a candidate however small the
    groups are (500 rows a group here); the release keeps the dependence in every group."""
    from dpsyn.method.base import PublicData

    rng = np.random.default_rng(0)
    schema, codes = _x_follows_p(3000, rng)
    public = PublicData(np.column_stack([rng.integers(0, 3, 1000), rng.integers(0, 2, 1000),
                                         rng.integers(0, 4, 1000), rng.integers(0, 2, 1000)]).astype(np.int32), {})
    out, ledger = run_method("dpsyn", Encoder.fit(schema), codes, epsilon=2.0, groups=("P", "Y"), seed=1,
                             public=public, regime="adaptive")
    measured = [c.step.split(": ", 1)[1] for c in ledger.charges
                if c.step.startswith("adaptive round") and not c.mechanism.startswith("exponential")]
    assert measured[0] == "2-way marginal P × X"
    for group in range(3):
        assert np.mean(out[out[:, 0] == group, 2] == group) > 0.7
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)


def test_a_round_never_chooses_a_marginal_that_would_outgrow_the_exact_samplers_tree(monkeypatch):
    """The rule AIM keeps: measuring more never forces the final records off the maximum-entropy fit.  With
    pairs a-b and b-c measured, a-c closes a cycle (tree a-b-c, 1,000 cells here): over a 900-cell limit it
    is not a candidate, while a-b again (inside a clique) and c-d (a new small clique) are."""
    monkeypatch.setattr(T, "adaptive_max_entropy_cells", 900)
    model = Model(("a", "b", "c", "d"), (10, 10, 10, 2), ())
    for key in [(0, 1), (1, 2)]:
        model.add(key, np.ones((10, 10)), 1.0)
    kept = model.within_tree([(0, 1), (0, 2), (2, 3), (0,)], [0, 1, 2, 3])
    assert kept == [(0, 1), (2, 3), (0,)]
    monkeypatch.setattr(T, "adaptive_max_entropy_cells", 1_100)
    assert model.within_tree([(0, 2)], [0, 1, 2, 3]) == [(0, 2)]
