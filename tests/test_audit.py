"""Empirical privacy audit (quick version of bench/audit.py)."""
import numpy as np
import pytest

from privacy_audit import broken_mechanism, run_audit
from privacy_audit import clopper_pearson, epsilon_lower_bound

EPS, DELTA, THETA, TRIALS = 1.0, 1e-6, 20, 300


def test_clopper_pearson_hand_values():
    assert clopper_pearson(0, 10, 0.05) == (0.0, pytest.approx(0.30849, abs=1e-5))
    lo, hi = clopper_pearson(5, 10, 0.05)
    assert lo == pytest.approx(0.18709, abs=1e-5) and hi == pytest.approx(0.81291, abs=1e-5)


def test_identical_distributions_give_no_evidence():
    rng = np.random.default_rng(0)
    assert epsilon_lower_bound(rng.normal(size=2000), rng.normal(size=2000), DELTA).epsilon_lower_bound < 0.3


@pytest.mark.parametrize("method", ["histogram", "dpsyn"])
def test_audit_bound_stays_below_epsilon_and_catches_noise_without_theta(method):
    shipped = run_audit(method, EPS, DELTA, THETA, TRIALS)
    assert shipped.epsilon_lower_bound <= EPS
    with broken_mechanism():
        broken = run_audit(method, EPS, DELTA, THETA, TRIALS)
    assert broken.epsilon_lower_bound > EPS
