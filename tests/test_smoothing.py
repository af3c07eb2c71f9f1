"""Smoothing noisy 1-way marginals of ordered columns, shrinking swamped ones toward flat (lib/estimation/smoothing.py), and
where the release uses them."""
import numpy as np
import pytest

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import parse_schema
from dpsyn.lib.estimation.smoothing import denoise, kernel, shrink, smooth, toward_zero
from dpsyn.lib.tuning import T
from dpsyn.method.adaptive import Model


def bell(size: int = 60, total: float = 20_000.0) -> np.ndarray:
    x = np.arange(size)
    p = np.exp(-0.5 * ((x - 25) / 9) ** 2)
    return total * p / p.sum()


def test_a_smooth_histogram_is_smoothed_and_its_error_falls():
    truth = bell()
    rng = np.random.default_rng(0)
    raw_error, smooth_error = 0.0, 0.0
    for _ in range(20):
        noisy = truth + rng.normal(0, 100, truth.size)
        out, bandwidth, share = smooth(noisy, 100, truth.size)
        assert bandwidth > 0 and share <= T.smoothing_risk_share
        raw_error += ((noisy - truth) ** 2).sum()
        smooth_error += ((out - truth) ** 2).sum()
    assert smooth_error < 0.25 * raw_error


def test_the_risk_estimate_is_unbiased_for_a_fixed_smoother():
    truth, sigma, size = bell(), 100.0, 60
    k = kernel(size, 2.0)
    rng = np.random.default_rng(1)
    estimated, actual = [], []
    for _ in range(400):
        noisy = truth + rng.normal(0, sigma, size)
        out = k @ noisy
        estimated.append(((noisy - out) ** 2).sum() + 2 * sigma ** 2 * np.trace(k) - size * sigma ** 2)
        actual.append(((out - truth) ** 2).sum())
    assert abs(np.mean(estimated) - np.mean(actual)) < 0.1 * np.mean(actual)


def test_a_spiky_histogram_and_a_precise_one_are_left_alone():
    spiky = np.zeros(60)
    spiky[[10, 39, 49]] = [5000, 20_000, 3000]
    noisy = spiky + np.random.default_rng(2).normal(0, 50, 60)
    out, bandwidth, _ = smooth(noisy, 50, 60)
    assert bandwidth == 0 and np.array_equal(out, noisy)
    precise = bell() + np.random.default_rng(3).normal(0, 0.01, 60)
    assert smooth(precise, 0.01, 60)[1] == 0


def test_codes_after_the_ordered_ones_are_left_alone():
    truth = np.append(bell(), 3000.0)  # a null token's count after 60 ordered codes
    noisy = truth + np.random.default_rng(4).normal(0, 100, truth.size)
    out, bandwidth, _ = smooth(noisy, 100, 60)
    assert bandwidth > 0 and out[-1] == noisy[-1] and not np.allclose(out[:60], noisy[:60])
    assert smooth(noisy[:2], 100, 2)[1] == 0  # too few ordered codes to smooth


def test_the_domain_says_which_codes_are_ordered():
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 100, "max_records_per_individual": 1}],
                           "schema": {"age": {"dtype": "int", "min": 0, "max": 99, "bins": 10, "null": "N"},
                                      "level": {"dtype": "int", "values": [1, 2, 5]},
                                      "code": {"dtype": "int", "values": [3, 1, 2]},
                                      "name": {"dtype": "str", "values": ["a", "b", "c"]}}})
    ordered = Encoder.fit(schema).domain.ordered
    assert ordered == {"age": 10, "level": 3}  # age's null code after its 10 bins is not ordered


def test_the_adaptive_model_smooths_ordered_one_way_marginals_only_without_public_records():
    noisy = bell() + np.random.default_rng(5).normal(0, 100, 60)
    for from_public in (False, True):
        model = Model(("age",), (60,), (), from_public=from_public, ordered={0: 60})
        model.add((0,), noisy, 100.0)
        values, sigma = model.smoothed((0,))
        assert sigma == 100.0
        assert np.array_equal(values, noisy) == from_public
        assert ((0,) in model.smoothing) != from_public
    unordered = Model(("code",), (60,), (), ordered={0: 0})
    unordered.add((0,), noisy, 100.0)
    assert np.array_equal(unordered.smoothed((0,))[0], noisy)


def test_shrinking_takes_the_weight_that_minimises_steins_risk_estimate():
    """Brute force on a small grid of weights: the closed form is the grid's best, and it keeps the total."""
    rng = np.random.default_rng(8)
    sigma = 30.0
    for x in (np.full(12, 100.0), np.linspace(0, 400, 12)):
        y = x + rng.normal(0, sigma, x.size)
        out, weight, share = shrink(y, sigma)
        grid = np.linspace(0, 1, 10001)
        risk = [((y - (w * y + (1 - w) * y.mean())) ** 2).sum() + 2 * sigma ** 2 * (w * y.size + 1 - w)
                - y.size * sigma ** 2 for w in grid]
        best = grid[int(np.argmin(risk))]
        if share <= T.smoothing_risk_share:
            assert abs(weight - best) < 1e-3 and out.sum() == pytest.approx(y.sum())
        else:
            assert weight == 1.0 and np.array_equal(out, y)


def test_noise_that_swamps_a_flat_column_is_shrunk_away_and_a_clear_shape_is_kept():
    rng = np.random.default_rng(9)
    flat = np.full(20, 50.0)
    noisy = flat + rng.normal(0, 200, 20)
    out, weight, share = shrink(noisy, 200.0)
    assert weight < 0.3 and share <= T.smoothing_risk_share
    assert np.abs(out - flat).sum() < 0.3 * np.abs(noisy - flat).sum()
    shaped = np.array([5000.0, 0, 0, 3000, 0, 0, 2000, 0, 0, 0]) + rng.normal(0, 10, 10)
    assert np.array_equal(shrink(shaped, 10.0)[0], shaped)
    assert denoise(shaped, 10.0, 0) == (pytest.approx(shaped), "")


def test_from_public_records_a_noisy_marginal_is_pulled_toward_the_public_one_only_as_far_as_its_noise_says():
    """The public file as the prior: a noisy marginal close to the public records' own (scaled to its total) is
    pulled most of the way to it; one that departs from it by far more than the noise is left as measured."""
    rng = np.random.default_rng(12)
    public = np.repeat(np.arange(10), np.arange(1, 11) * 10)[:, None].astype(np.int32)  # code k: 10(k + 1) rows
    shape = np.arange(1, 11) * 10.0
    like = shape * 20 + rng.normal(0, 300, 10)
    unlike = shape[::-1] * 20 + rng.normal(0, 5, 10)
    for noisy, sigma, moved in ((like, 300.0, True), (unlike, 5.0, False)):
        model = Model(("a",), (10,), (), from_public=True, public=public)
        model.add((0,), noisy, sigma)
        values, _ = model.smoothed((0,))
        guess = shape * noisy.sum() / shape.sum()
        if moved:
            assert np.abs(values - guess).sum() < 0.5 * np.abs(noisy - guess).sum()
            assert np.abs(values - shape * 20).sum() < np.abs(noisy - shape * 20).sum()
        else:
            assert np.array_equal(values, noisy) and not model.smoothing[(0,)]


def test_counts_mostly_noise_go_toward_zero_and_large_ones_stay():
    """Over seeds: 40 empty cells plus noise lose most of it (squared error well below the noise's); 40 cells of
    counts far above the noise keep a weight near 1; the weight is the formula's."""
    rng = np.random.default_rng(0)
    errors, weights = [], []
    for _ in range(200):
        noisy = rng.normal(0, 10.0, 40)
        out, weight = toward_zero(noisy, 10.0)
        assert weight == max(0.0, 1 - 38 * 100.0 / float((noisy ** 2).sum()))
        errors.append(float((out ** 2).sum()) / float((noisy ** 2).sum()))
        big = 1000.0 + rng.normal(0, 10.0, 40)
        weights.append(toward_zero(big, 10.0)[1])
    assert np.mean(errors) < 0.2 and min(weights) > 0.999
    out, weight = toward_zero(np.array([5.0, -3.0]), 1.0)  # two cells: left alone
    assert weight == 1.0 and (out == [5.0, -3.0]).all()
