"""zCDP conversion, noise scales and the ledger."""
import math

import numpy as np
import pytest

from dpsyn.lib.privacy.accounting import (BudgetExceeded, Ledger, classic_rho_from_eps_delta, delta_from_rho_eps,
                                          eps_from_rho_delta, gaussian_sigma, rho_from_eps_delta)

CASES = [(0.1, 1e-10), (1.0, 1e-9), (1.0, 3.4498908254380166e-11), (10.0, 1e-10)]


def brute_force_delta(rho, eps):
    """min over a fine log-spaced alpha grid of the CKS expression, computed in logs."""
    alpha = np.exp(np.linspace(np.log(1 + 1e-9), np.log(1e5), 400_001))
    log_d = (alpha - 1) * (alpha * rho - eps) + alpha * np.log1p(-1 / alpha) - np.log(alpha - 1)
    return float(np.exp(log_d.min()))


def test_classic_conversion_hand_computed():
    # eps = 1, delta = 1e-9: ln(1/delta) = 20.7232658; rho = (sqrt(21.7232658) - sqrt(20.7232658))^2
    assert classic_rho_from_eps_delta(1.0, 1e-9) == pytest.approx(0.0117811604, rel=1e-8)
    rho = classic_rho_from_eps_delta(1.0, 1e-9)
    assert rho + 2 * math.sqrt(rho * math.log(1e9)) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("rho,eps", [(0.05, 1.0), (0.0002, 0.1), (1.0, 10.0), (0.5, 1.0)])
def test_delta_matches_brute_force_minimum(rho, eps):
    assert delta_from_rho_eps(rho, eps) == pytest.approx(brute_force_delta(rho, eps), rel=1e-6)


@pytest.mark.parametrize("eps,delta", CASES)
def test_tight_rho_is_largest_valid_and_beats_classic(eps, delta):
    rho = rho_from_eps_delta(eps, delta)
    assert delta_from_rho_eps(rho, eps) <= delta
    assert delta_from_rho_eps(rho * (1 + 1e-9), eps) > delta
    gain = rho / classic_rho_from_eps_delta(eps, delta)
    assert 1.10 <= gain <= 1.50, gain
    # converting back never claims more than the requested epsilon
    assert eps_from_rho_delta(rho, delta) <= eps
    assert eps_from_rho_delta(rho, delta) == pytest.approx(eps, rel=1e-9)


def test_pinned_values():
    assert rho_from_eps_delta(1.0, 1e-9) == pytest.approx(0.0149730577, rel=1e-8)
    assert rho_from_eps_delta(0.1, 1e-10) == pytest.approx(0.000153605037, rel=1e-8)


def test_noise_scales_hand_computed():
    assert gaussian_sigma(2.0, 0.5) == pytest.approx(2.0)
    assert gaussian_sigma(7.0, 0.02) == pytest.approx(7.0 / 0.2)
    with pytest.raises(ValueError):
        gaussian_sigma(1.0, 0.0)


def test_rejects_bad_budget():
    for eps, delta in [(0, 1e-9), (-1, 1e-9), (1, 0), (1, 1), (1, 1.5)]:
        with pytest.raises(ValueError):
            rho_from_eps_delta(eps, delta)


def test_ledger_total_is_sum_and_budget_is_never_exceeded():
    ledger = Ledger(1.0, 1e-9)
    parts = [0.5, 0.25, 0.125, 0.125]
    for i, share in enumerate(parts):
        ledger.charge(f"step {i}", "Gaussian", 1.0, 1.0, share * ledger.budget)
    assert ledger.spent == pytest.approx(sum(c.rho for c in ledger.charges), rel=1e-15)
    assert ledger.spent <= ledger.budget * (1 + 1e-12)
    with pytest.raises(BudgetExceeded):
        ledger.charge("one more", "Gaussian", 1.0, 1.0, 1e-6 * ledger.budget)
    assert len(ledger.charges) == len(parts)  # a refused charge records nothing


def test_ledger_refuses_single_oversized_charge_and_serialises():
    ledger = Ledger(0.1, 1e-10)
    with pytest.raises(BudgetExceeded):
        ledger.charge("too much", "Gaussian", 1.0, 1.0, ledger.budget * 1.001)
    ledger.charge("all", "Gaussian", 1.0, 1.0, ledger.budget)
    d = ledger.to_dict()
    assert d["rho_spent"] == pytest.approx(d["rho_budget"])
    assert d["epsilon_spent"] <= 0.1
    assert d["charges"][0]["step"] == "all"


@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("parts", [3, 7, 23, 253, 276])
def test_shares_that_sum_to_the_budget_spend_it_exactly_and_never_more(eps, parts):
    """The last share takes exactly what remains: spent <= budget with no slack, and the
    epsilon reported never exceeds the requested one (it once read 10.000000000000002)."""
    ledger = Ledger(eps, 1e-10)
    for i in range(parts):
        rho = ledger.grant(ledger.budget / parts, f"step {i}")
        ledger.charge(f"step {i}", "Gaussian", 1.0, 1.0, rho)
    assert ledger.spent <= ledger.budget and ledger.spent == pytest.approx(ledger.budget, rel=1e-12)
    assert ledger.to_dict()["epsilon_spent"] <= eps
    assert ledger.remaining < 1e-12 * ledger.budget
    with pytest.raises(BudgetExceeded):
        ledger.grant(1e-6 * ledger.budget, "one more")


def test_grant_gives_exactly_the_remainder_only_within_float_slack():
    ledger = Ledger(1.0, 1e-9)
    ledger.charge("first", "Gaussian", 1.0, 1.0, ledger.budget / 3)
    left = ledger.remaining
    assert ledger.grant(left * (1 + 1e-13), "last") == left
    with pytest.raises(BudgetExceeded):
        ledger.grant(left * 1.001, "too much")
    with pytest.raises(BudgetExceeded):  # a charge that was not granted is refused, and nothing is recorded
        ledger.charge("unchecked", "Gaussian", 1.0, 1.0, left * 1.001)
    assert len(ledger.charges) == 1


def test_a_counts_distance_to_a_reference_is_exact_in_any_order():
    """Selection scores of counts: the reference rounded to the 2^-18 grid, then an exact integer sum, so the
    distance is the correctly rounded exact one whatever the order of the cells."""
    from fractions import Fraction
    from dpsyn.lib.privacy.private_table import REFERENCE_GRID, _l1_distance
    rng = np.random.default_rng(11)
    answer = rng.integers(0, 10 ** 6, 5000)
    reference = rng.random(5000) * 10 ** 6
    grid = np.rint(reference * REFERENCE_GRID) / REFERENCE_GRID
    exact = sum(abs(Fraction(int(a)) - Fraction(float(r))) for a, r in zip(answer, grid))
    got = _l1_distance(answer, reference, float(np.abs(reference).sum()), 1.0, True)
    assert got == float(exact)
    order = rng.permutation(5000)
    assert _l1_distance(answer[order], reference[order], float(np.abs(reference).sum()), 1.0, True) == got
