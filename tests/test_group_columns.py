"""Group × column marginals of the columns that differ most between groups (method/group_columns.py)."""
import numpy as np
import pytest

from dpsyn.lib.tuning import T
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import parse_schema
from dpsyn.method.planner import PUBLIC, TableShape, make_plan
from helpers import run_method

SCHEMA = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": 1}],
                       "schema": {"G": {"dtype": "str", "values": ["a", "b", "c"]},
                                  "X": {"dtype": "int", "values": [0, 1, 2, 3]},
                                  "Y": {"dtype": "int", "values": [0, 1]},
                                  "Z": {"dtype": "int", "values": [0, 1, 2]}}})


def test_without_public_records_the_planner_gives_half_the_group_share_to_group_columns(public_regime):
    rows = 7600.0  # the write-up's public regime at eps 0.1, theta 1 (eps < eps0 + eps1 + 1500/rows); auto's by the fixture
    auto = make_plan(0.1, 1, rows, TableShape(True, False, pair_cells=(4,)), rho=1e-4)
    written = make_plan(0.1, 1, rows, TableShape(True, False))
    assert auto.regime == written.regime == PUBLIC
    assert written.group_column_share == 0.0
    assert auto.group_column_share == pytest.approx(0.5 * written.group_share)
    assert auto.group_share + auto.pair_share == pytest.approx(0.5 * written.group_share)  # tests/test_dependent_pairs
    assert (auto.total_share + auto.group_share + auto.marginal_share + auto.group_column_share + auto.pair_share
            == pytest.approx(1.0))
    assert make_plan(0.1, 1, rows, TableShape(True, True, pair_cells=(4,)), rho=1e-4).group_column_share == 0.0  # public file
    assert make_plan(0.1, 1, rows, TableShape(False, False, pair_cells=(4,)), rho=1e-4).group_column_share == 0.0  # no groups


def test_group_columns_take_nothing_from_group_counts_that_would_become_too_noisy(public_regime):
    """After the cut, the group counts' noise sd must stay within T.planner_group_count_noise of the mean group size."""
    rows, rho = 7600.0, 1e-4
    sigma_after = 1 / (2 * (1 - T.planner_group_column_share) * make_plan(0.1, 1, rows, TableShape(True, False)).group_share * rho) ** 0.5
    few = int(T.planner_group_count_noise * rows / sigma_after)  # groups at which the mean group is just large enough
    assert make_plan(0.1, 1, rows, TableShape(True, False, pair_cells=(4,), n_groups=few), rho=rho).group_column_share > 0
    assert make_plan(0.1, 1, rows, TableShape(True, False, pair_cells=(4,), n_groups=few + 1), rho=rho).group_column_share == 0
    assert make_plan(0.01, 1, None, TableShape(True, False, pair_cells=(4,)), rho=rho).group_column_share == 0  # no total


def test_the_column_that_differs_between_groups_is_measured_per_group(monkeypatch, public_regime):
    """X follows the group, Y and Z do not: with one column to choose, the choice is X, and the
    ledger still sums to the budget, the choice charged with the marginals' sensitivity theta."""
    rng = np.random.default_rng(0)
    n = 6000
    g = rng.integers(0, 3, n)
    x = np.where(rng.random(n) < 0.8, g, 3)
    codes = np.column_stack([g, x, rng.integers(0, 2, n), rng.integers(0, 3, n)]).astype(np.int32)
    monkeypatch.setattr(T, "group_columns_group_columns", 1)
    encoder = Encoder.fit(SCHEMA)
    out, ledger = run_method("dpsyn", encoder, codes, theta=2, epsilon=0.5, groups=("G",), seed=4)
    assert any(c.step == "noisy total" for c in ledger.charges)  # the public regime from eps2 up
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    choice = [c for c in ledger.charges if c.step.startswith("choice of 1 of 3 columns")]
    per_group = [c for c in ledger.charges if c.step.startswith("2-way marginal G ×")]
    assert len(choice) == 1 and 2 <= choice[0].sensitivity <= 2 * (1 + 2 ** -10) + 2 ** -15  # + the scores' float-error bound
    assert [c.step for c in per_group] == ["2-way marginal G × X"]
    assert choice[0].rho == pytest.approx(T.adaptive_select_share / (1 - T.adaptive_select_share)
                                          * per_group[0].rho)
    # each group keeps its own distribution of X
    for cell in range(3):
        shares = np.bincount(out[out[:, 0] == cell, 1], minlength=4) / max((out[:, 0] == cell).sum(), 1)
        assert shares[cell] > 0.6
