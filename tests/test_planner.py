"""DPSyn's planner: regimes from the write-up's thresholds, shares that sum to the budget."""
import math

import numpy as np
import pytest

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import parse_schema
from dpsyn.lib.privacy.accounting import eps_from_rho_delta
from dpsyn.lib.privacy.mechanisms import QUANTUM_BITS
from dpsyn.lib.tuning import T
from dpsyn.method.planner import (ADAPTIVE, MARGINAL_CHOICES, ONE_WAY, PUBLIC, REGIMES, SELECT, TWO_WAY, TableShape, make_plan,
                                  needs_total, selection_margin)
from helpers import run_method


@pytest.mark.parametrize("eps,theta,n,regime", [
    (0.1, 7, 1e6, PUBLIC),      # eps < eps2 = 0.2
    (0.1, 1, 54_000, ONE_WAY),  # eps0 + eps1 + tau1 = 0.048 <= 0.1 < eps0 + eps1 + tau2 = 0.187
    (0.04, 1, 54_000, PUBLIC),  # eps2 <= eps < eps0 + eps1 + tau1
    (1.0, 7, 1e6, TWO_WAY),
    (10.0, 1, 54_000, TWO_WAY),
])
def test_regimes_follow_the_writeup(eps, theta, n, regime):
    total = n if needs_total(eps, theta, True, None) else None
    plan = make_plan(eps, theta, total, TableShape(True, True))
    assert plan.regime == regime
    assert plan.total_share + plan.group_share + plan.marginal_share == pytest.approx(1.0, abs=1e-12)


def test_two_way_group_share_is_capped_by_eps3():
    plan = make_plan(10.0, 1, 54_000, TableShape(True, True))
    assert plan.group_share == pytest.approx((1 / 25) / 10)  # y = min(eps3, eps1 + x/2) = eps3


def test_the_plan_carries_the_shared_base_and_its_size():
    """Two-way with few groups and no public file: one base for all groups, dpsyn_joint_base_per_row records a row,
    rounds of 3-way marginals where they stay within dpsyn_triple_work; more groups or a public file: none (from
    public records with groups, groups_rich_base_per_row a row)."""
    from dpsyn.lib.tuning import T
    shape = TableShape(True, False, 3, (4, 4, 4), (12, 12, 12), 3, 3, 1)
    joint = make_plan(10.0, 1, 3000.0, shape, TWO_WAY, rho=1.0)
    assert (joint.joint, joint.joint_rounds, joint.base_per_row) == (True, True, T.dpsyn_joint_base_per_row)
    many = make_plan(10.0, 1, 3000.0, TableShape(True, False, 3, (4, 4, 4), (12, 12, 12), T.dpsyn_joint_groups + 1),
                     TWO_WAY, rho=1.0)
    assert (many.joint, many.base_per_row) == (False, None)
    public = make_plan(10.0, 1, 3000.0, TableShape(True, True, 3, (4, 4, 4), (12, 12, 12), 3), TWO_WAY, rho=1.0)
    assert (public.joint, public.base_per_row) == (False, T.groups_rich_base_per_row)
    assert not make_plan(10.0, 1, 3000.0, shape, TWO_WAY).joint  # the write-up's planner: per-group refits only


def test_the_rounds_read_tuned_values_when_the_plan_is_made():
    """``--set`` overrides a tuned value for one run (lib/tuning.py ``overridden``): the plan's rounds follow it."""
    from dpsyn.lib.tuning import T
    with T.overridden({"adaptive_rounds_per_column": 3}):
        plan = make_plan(5.0, 1, 5000.0, TableShape(False, False, pair_cells=(400,)), ADAPTIVE, rho=1.0)
    assert plan.rounds is not None and plan.rounds.per_column == 3


def test_selection_margin_is_the_first_selections_score_gap_over_the_rows():
    """Three columns of 4 codes and three groups: C = 3 one-way + 3 two-way + 3 group × column candidates; the
    selection gets adaptive_select_share of rho over per_column × columns rounds: 2θ·ln C / ε_select over the rows."""
    shape = TableShape(True, False, 3, (16, 16, 16), (12, 12, 12), 3)
    eps_select = math.sqrt(8 * 0.1 * 0.5 / (6 * 3))
    with T.overridden({"adaptive_select_share": 0.1}):
        assert selection_margin(0.5, 2, 1000.0, shape, 6) == pytest.approx(2 * 2 * math.log(9) / eps_select / 1000)
        # without groups the group × column marginals are no candidates
        alone = TableShape(False, False, 3, (16, 16, 16), (12, 12, 12))
        assert selection_margin(0.5, 2, 1000.0, alone, 6) == pytest.approx(2 * 2 * math.log(6) / eps_select / 1000)


# 40 columns of 10 codes, no groups, no public file: many candidates (820), pairs noisy
WIDE = TableShape(False, False, 40, (100,) * 780)


@pytest.mark.parametrize("eps,rho,rows,auto,written", [
    (0.3, 1e-3, 10_000.0, PUBLIC, ONE_WAY),    # margin 0.95: the write-up would measure 1-way marginals
    (0.3, 1e-3, 3_000.0, PUBLIC, PUBLIC),      # both public
    (1.0, 1e-2, 30_000.0, ADAPTIVE, TWO_WAY),  # both measure marginals
])
def test_the_rounds_run_only_where_their_selection_can_tell_marginals_apart(eps, rho, rows, auto, written):
    """The auto planner (given rho and pairs) takes the public regime from eps2 up exactly where the rounds' selection
    margin exceeds planner_selection_margin of the noisy total, whichever way the write-up's thresholds go; the
    write-up's planner (no rho) keeps them."""
    assert make_plan(eps, 1, rows, WIDE, rho=rho).regime == auto
    assert make_plan(eps, 1, rows, WIDE).regime == written


def test_a_small_table_runs_rounds_where_the_writeup_would_not():
    """Three columns of 4 codes, 60,000 rows, eps 0.04 at delta 1e-9 (its own rho): the write-up's test says public
    (eps < eps0 + eps1 + 1500/rows = 0.046); six candidates, easy to tell apart (margin about 0.04)."""
    from dpsyn.lib.privacy.accounting import rho_from_eps_delta
    small = TableShape(False, False, 3, (16, 16, 16))
    rho = rho_from_eps_delta(0.04, 1e-9)
    assert make_plan(0.04, 1, 60_000.0, small).regime == PUBLIC
    assert make_plan(0.04, 1, 60_000.0, small, rho=rho).regime == ADAPTIVE


def test_the_public_regime_begins_where_the_margin_passes_the_tuned_value():
    """The same plan flips from the rounds to the public regime as planner_selection_margin passes its margin."""
    from dpsyn.method.planner import adaptive_rounds, pair_noise
    rho, rows = 1e-3, 10_000.0
    noise = pair_noise(rho, 1, rows, WIDE.pair_cells)
    margin = selection_margin(rho, 1, rows, WIDE, adaptive_rounds(noise, noise, False, False).per_column)
    with T.overridden({"planner_selection_margin": margin * 1.01}):
        assert make_plan(0.3, 1, rows, WIDE, rho=rho).regime == ADAPTIVE
    with T.overridden({"planner_selection_margin": margin * 0.99}):
        assert make_plan(0.3, 1, rows, WIDE, rho=rho).regime == PUBLIC


def test_without_public_file_or_groups_every_regime_still_measures_marginals():
    for regime in REGIMES:
        total = 1000.0 if needs_total(0.01, 1, True, regime) else None
        assert make_plan(0.01, 1, total, TableShape(True, False), regime).marginal_share > 0
        plan = make_plan(0.5, 1, 5000.0, TableShape(False, False), regime)
        assert plan.group_share == 0 and plan.total_share > 0


SCHEMA = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": 1}],
                       "schema": {"G": {"dtype": "str", "values": ["a", "b", "c"]},
                                  "X": {"dtype": "int", "values": [0, 1, 2, 3]},
                                  "Y": {"dtype": "int", "values": [0, 1]},
                                  "Z": {"dtype": "int", "min": 0, "max": 9}}})


@pytest.mark.parametrize("marginals", MARGINAL_CHOICES)
@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("groups", [("G",), ()])
def test_dpsyn_spends_exactly_the_budget_in_every_regime(regime, groups, marginals):
    rng = np.random.default_rng(0)
    encoder = Encoder.fit(SCHEMA)
    codes = np.column_stack([rng.integers(0, s, 3000) for s in encoder.sizes]).astype(np.int32)
    out, ledger = run_method("dpsyn", encoder, codes, theta=2, groups=groups, max_records=10_000, seed=1,
                             regime=regime, marginals=marginals)
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    assert ledger.spent <= ledger.budget * (1 + 1e-12)
    pairs = len(encoder.names) - len(groups)
    pairs = pairs * (pairs - 1) // 2
    for charge in ledger.charges:  # theta = 2; real-valued scores pay up to 2^-QUANTUM_BITS more for rounding
        # a score is 4 theta per pair, plus 2^-18 for its float rounding (PRIVACY.md, "Floating point")
        expected = (4 * 2 + 2.0 ** -18) * np.sqrt(pairs) if charge.step.startswith("dependency scores") else 2
        # a selection adds twice its scores' float-error bound (< 2^-15 here)
        assert expected <= charge.sensitivity <= expected * (1 + 2.0 ** -QUANTUM_BITS) + 2.0 ** -15
        assert charge.rho * (1 + 1e-12) >= charge.sensitivity ** 2 / (2 * charge.noise_scale ** 2)
    assert eps_from_rho_delta(ledger.spent, 1e-9) <= 1.0 * (1 + 1e-9)
    assert all(c.sensitivity_reason and c.sampler for c in ledger.charges)
    scored = any(c.step.startswith("dependency scores") for c in ledger.charges)
    assert scored == (marginals == SELECT and regime not in (PUBLIC, ADAPTIVE))
    assert ((out >= 0) & (out < np.array(encoder.sizes))).all()
    assert abs(len(out) - 3000) < 600


@pytest.mark.parametrize("groups", [("G",), ()])
def test_histogram_spends_exactly_the_budget(groups):
    rng = np.random.default_rng(0)
    encoder = Encoder.fit(SCHEMA)
    codes = np.column_stack([rng.integers(0, s, 3000) for s in encoder.sizes]).astype(np.int32)
    _, ledger = run_method("histogram", encoder, codes, theta=3, epsilon=0.5, groups=groups, max_records=10_000,
                           seed=1)
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-12)
    assert ledger.spent <= ledger.budget * (1 + 1e-12)
    assert eps_from_rho_delta(ledger.spent, 1e-9) <= 0.5 * (1 + 1e-9)
    assert all(c.sensitivity == 3 for c in ledger.charges)
    assert all(c.rho * (1 + 1e-12) >= c.sensitivity ** 2 / (2 * c.noise_scale ** 2) for c in ledger.charges)
