"""Pairs of columns that depart most from independence, in the public regime without a public file
(method/dependent_pairs.py)."""
import numpy as np
import pytest

from dpsyn.lib.tuning import T
from dpsyn.dataloader.encoding import Encoder
from dpsyn.method.planner import PUBLIC, TableShape, make_plan
from helpers import run_method
from test_group_columns import SCHEMA  # G (3 groups), X (4 codes), Y (2), Z (3)


def test_the_pairs_take_their_share_of_the_group_counts_wherever_group_columns_are_measured(public_regime):
    rows = 7600.0  # public regime at eps 0.1, theta 1, with group columns (tests/test_group_columns.py)
    plan = make_plan(0.1, 1, rows, TableShape(True, False, columns=3, pair_cells=(4,)), rho=1e-4)
    written = make_plan(0.1, 1, rows, TableShape(True, False, columns=3))
    assert plan.regime == PUBLIC and plan.group_column_share > 0
    assert plan.pair_share == pytest.approx(T.planner_pair_share * (1 - T.planner_group_column_share) * written.group_share)
    assert plan.group_share == pytest.approx((1 - T.planner_pair_share) * (1 - T.planner_group_column_share) * written.group_share)
    assert (plan.total_share + plan.group_share + plan.marginal_share + plan.group_column_share + plan.pair_share
            == pytest.approx(1.0))
    assert written.pair_share == 0.0  # the write-up's planner
    assert make_plan(0.1, 1, rows, TableShape(True, True, columns=3, pair_cells=(4,)), rho=1e-4).pair_share == 0.0  # public file
    assert make_plan(0.1, 1, rows, TableShape(True, False, columns=1, pair_cells=()), rho=1e-4).pair_share == 0.0  # no pair
    assert make_plan(0.1, 1, rows, TableShape(True, False, columns=3, pair_cells=(4,), n_groups=1000), rho=1e-4).pair_share == 0.0  # counts too noisy for group columns: none for pairs either


def test_the_dependent_pair_is_chosen_measured_and_kept(monkeypatch, public_regime):
    """Y follows X, Z follows nothing: with one pair to choose, the choice is X × Y, charged with the
    marginals' sensitivity theta, the ledger sums to the budget, and the records keep Y's dependence on X."""
    rng = np.random.default_rng(0)
    n = 6000
    g, x = rng.integers(0, 3, n), rng.integers(0, 4, n)
    y = np.where(rng.random(n) < 0.95, x >= 2, x < 2)
    codes = np.column_stack([g, x, y, rng.integers(0, 3, n)]).astype(np.int32)
    monkeypatch.setattr(T, "dependent_pairs_pairs", 1)
    out, ledger = run_method("dpsyn", Encoder.fit(SCHEMA), codes, theta=2, epsilon=0.5, groups=("G",), seed=4)
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    choice = [c for c in ledger.charges if c.step.startswith("choice of 1 of 3 pairs")]
    pairs = [c for c in ledger.charges if c.step.startswith("2-way marginal") and "G" not in c.step]
    assert len(choice) == 1 and 2 <= choice[0].sensitivity <= 2 * (1 + 2 ** -10) + 2 ** -15  # + the scores' float-error bound
    assert [c.step for c in pairs] == ["2-way marginal X × Y"]
    assert choice[0].rho == pytest.approx(T.dependent_pairs_select_share / (1 - T.dependent_pairs_select_share)
                                          * pairs[0].rho)
    high = out[:, 1] >= 2
    assert out[high, 2].mean() > 0.8 and out[~high, 2].mean() < 0.2
