"""Reweighting toward noisy answers (stages/reweight.py, lib/estimation/tilting.py): the dual against a cvxpy
solve of the primal, the weights, the tolerance's two ends, accounting, determinism, bad specs."""
import json

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

from dpsyn.api import release
from dpsyn.lib.estimation.tilting import denoised_answers, effective_share, resample, tempered, tilt
from dpsyn.main import main
from dpsyn.method.base import OptionError
from dpsyn.stages.reweight import fitted_weights, parse_reweight, with_bounds
from test_rap import data

# a tiny sample: 6 points, 2 queries; the targets are reachable with every point kept
Q = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.5, 0.2], [0.2, 0.9], [0.0, 0.0]])
TARGETS = np.array([0.55, 0.45])


def primal(gamma: float) -> np.ndarray:
    """min KL(p || uniform) s.t. |Q'p - a| <= gamma, p a distribution: the paper's problem (3)."""
    p = cp.Variable(len(Q), nonneg=True)
    constraints = [cp.sum(p) == 1, cp.abs(Q.T @ p - TARGETS) <= gamma]
    cp.Problem(cp.Minimize(cp.sum(cp.rel_entr(p, np.full(len(Q), 1 / len(Q))))), constraints).solve()
    return p.value


@pytest.mark.parametrize("gamma", [0.0, 0.02])
def test_the_dual_matches_a_cvxpy_solve_of_the_primal(gamma):
    result = tilt(Q - TARGETS, gamma=gamma, iterations=200)
    assert np.abs(result.weights - primal(gamma)).max() < 1e-4
    assert result.objective[1] < result.objective[0]


def test_weights_are_positive_and_finite_and_a_huge_tolerance_keeps_the_sample():
    rng = np.random.default_rng(0)
    x = rng.random((500, 3)) ** 3  # skewed, so matching the means takes a real tilt
    targets = x.mean(axis=0) + np.array([0.05, -0.03, 0.02])
    result = tilt(x - targets)
    assert np.isfinite(result.weights).all() and (result.weights > 0).all()
    assert np.abs(result.weights @ x - targets).max() <= 1e-5 + 1e-9  # within gamma, the default tolerance
    untouched = tilt(x - targets, gamma=1e6)
    assert np.allclose(untouched.weights, 1 / 500) and not untouched.lam.any()
    assert np.array_equal(resample(untouched.weights, np.zeros(500), rng), np.arange(500))
    assert not np.array_equal(resample(result.weights, np.zeros(500), rng), np.arange(500))


def test_resampling_keeps_group_sizes_and_follows_the_weights():
    groups = np.repeat([3, 1, 2], [100, 50, 30])
    weights = np.where(np.arange(180) % 2 == 0, 3.0, 1.0)
    rows = resample(weights, groups, np.random.default_rng(1))
    assert [int((groups[rows] == g).sum()) for g in (3, 1, 2)] == [100, 50, 30]
    assert np.mean(rows % 2 == 0) == pytest.approx(0.75, abs=0.02)


def test_denoised_answers_follow_the_more_precise_source():
    support = np.column_stack([np.ones(len(Q)), Q])
    p = np.array([3.0, 1.0, 2.0, 0.0, 4.0, 5.0]) / 15
    truth, synthetic = support.T @ p, support.T @ np.full(6, 1 / 6)
    tiny, huge = np.full(3, 1e-6), np.full(3, 1e3)
    assert np.allclose(denoised_answers(support, truth, tiny, synthetic, huge)[0], truth, atol=1e-5)
    assert np.allclose(denoised_answers(support, truth, huge, synthetic, tiny)[0], synthetic, atol=1e-5)
    halfway, _ = denoised_answers(support, truth, np.ones(3), synthetic, np.ones(3))  # equal precision: the middle
    assert np.allclose(halfway, (truth + synthetic) / 2, atol=1e-5)


def test_tempering_keeps_the_effective_sample_floor():
    w = np.random.default_rng(0).random(1000) ** 8
    assert effective_share(w) < 0.3
    kept, t = tempered(w, 0.5)
    assert effective_share(kept) == pytest.approx(0.5, abs=1e-3) and 0 < t < 1
    assert tempered(w, 0.0)[1] == 1.0


def moment_blocks(x: np.ndarray, truth: np.ndarray, sd: float, seed: int):
    """One moments block for rows ``x`` (n × p in [0, 1]): the noisy answers are ``truth``'s moments plus
    Gaussian noise of ``sd`` (shares of rows), as the release's means of one measurement."""
    from dpsyn.lib.privacy.queries import Moments
    query = Moments(tuple(f"c{i}" for i in range(x.shape[1])))
    exact = query.row_values(truth).mean(axis=0)
    noisy = exact + np.random.default_rng(seed).normal(0, sd, exact.size)
    noisy[0] = 1.0
    return [(query.row_values(x), noisy, np.full(exact.size, sd))], exact


def test_a_synthetic_table_already_right_is_left_alone_when_the_noise_is_large():
    rng = np.random.default_rng(1)
    x = rng.random((2000, 3)) ** 2
    blocks, _ = moment_blocks(x, x, 0.05, seed=2)
    weights, result = fitted_weights(blocks, np.zeros(len(x)), 0.5, rng)
    assert effective_share(weights) > 0.99 and result.noise_error > result.gap / 2


def test_a_synthetic_table_far_off_is_tilted_to_the_truth_when_the_noise_is_small():
    rng = np.random.default_rng(3)
    x = rng.random((3000, 2))
    truth = np.column_stack([x[:, 0] ** 0.7, (x[:, 1] + x[:, 0]) / 2])  # other means, a correlation
    blocks, exact = moment_blocks(x, truth, 1e-4, seed=4)
    weights, result = fitted_weights(blocks, np.zeros(len(x)), 0.0, rng)
    tilted = weights @ blocks[0][0]
    assert np.abs(tilted - exact)[1:].max() < 0.25 * np.abs(x.mean(axis=0) - truth.mean(axis=0)).max()
    assert np.abs(tilted - exact)[1:].mean() < 0.1 * result.gap
    floored, floored_result = fitted_weights(blocks, np.zeros(len(x)), 0.9, rng)
    assert effective_share(floored) >= 0.9 - 1e-6 and floored_result.kept_tilt < 1


@pytest.mark.parametrize("spec, message", [
    ("moments:AGE[79,18]", "AGE[79,18]: bounds must be finite with low < high"),
    ("moments:AGE[18]", "AGE[18] needs two numbers"),
    ("moments:NOPE[0,1]", "not schema columns: NOPE"),
    ("moments:SEX[0,1]", "moments take numeric columns; SEX is categorical"),
    ("moments:AGE[18,60];moments:AGE[20,60],HOURS", "AGE is given two different bounds"),
])
def test_bad_bounds_are_one_line_and_write_nothing(tmp_path, capsys, spec, message):
    frame, params = data()
    (tmp_path / "p.json").write_text(json.dumps(params))
    frame.to_csv(tmp_path / "private.csv", index=False)
    code = main(["--params", str(tmp_path / "p.json"), "--private", str(tmp_path / "private.csv"),
                 "--output", str(tmp_path / "out" / "s.csv"), "--reweight", spec])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_bounds_are_declared_or_public_quantiles_or_the_range():
    spec = parse_reweight("moments:AGE[20,60],HOURS,INCOME", ["AGE", "HOURS", "INCOME"], ["AGE", "HOURS", "INCOME"])
    public = {"AGE": np.arange(100.0), "HOURS": np.linspace(0, 50, 101), "INCOME": np.full(5, np.nan)}
    filled = with_bounds(spec, {"AGE": (0, 99), "HOURS": (0, 60), "INCOME": (0, 300000)}, public)
    assert filled.bound("AGE") == (20, 60) and filled.bound("INCOME") == (0, 300000)
    assert filled.bound("HOURS") == pytest.approx((0.5, 49.5))
    assert dict(filled.sources) == {"AGE": "declared", "HOURS": "public 1%-99% quantiles", "INCOME": "its range"}


def test_declared_bounds_reach_the_ledger_and_the_log(caplog):
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    (run,) = release(frame, params, None, "histogram", {}, seed=2, group_columns=(),
                     reweight="moments:AGE[20,60],HOURS[0,40]", reweight_share=0.2)
    (charge,) = [c for c in run.ledger.charges if c.step.startswith("reweighting")]
    assert charge.step == "reweighting: first and second moments of AGE[20,60], HOURS[0,40]"
    assert "AGE [20, 60] ±" in caplog.text and "expected error" in caplog.text
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)


@pytest.fixture(scope="module")
def reweighted():
    frame, params = data()
    return release(frame, params, None, "dpsyn", {}, seed=3, group_columns=(), reweight="moments:AGE,INCOME,HOURS",
                   reweight_share=0.2)


def test_the_reweighting_share_is_charged_and_the_ledger_sums_to_the_budget(reweighted):
    for r in reweighted:
        charges = r.ledger.charges
        assert sum(c.rho for c in charges) == pytest.approx(r.ledger.budget, rel=1e-9)
        mine = [c for c in charges if c.step.startswith("reweighting")]
        assert len(mine) == 1 and mine[0].rho == pytest.approx(0.2 * r.ledger.budget, rel=1e-6)
        theta = r.run.max_records_per_individual  # sqrt(10): (1, x, x²) for three columns, on the noise's grid
        assert theta * np.sqrt(10) <= mine[0].sensitivity <= 1.01 * theta * np.sqrt(10)


def test_reweighted_runs_are_schema_valid_and_repeat_under_a_seed(reweighted):
    frame, params = data()
    again = release(frame, params, None, "dpsyn", {}, seed=3, group_columns=(), reweight="moments:AGE,INCOME,HOURS",
                    reweight_share=0.2)
    for a, b in zip(reweighted, again):
        pd.testing.assert_frame_equal(a.table, b.table)
        assert a.table["AGE"].astype(float).between(18, 79).all()
        assert set(a.table["JOB"].astype(str)) <= {"a", "b", "c"}


def test_reweighting_per_group_keeps_each_groups_rows(monkeypatch):
    """Resampling happens within groups: each group has as many rows after reweighting as the method
    gave it, and the tilt did move rows (the table is not the method's own)."""
    import dpsyn.stages.pipeline as pipeline
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    seen = {}
    real = pipeline.reweight_rows

    def recorded(private, codes, values, ctx, spec):
        seen["codes"], seen["sex"] = codes.copy(), ctx.domain.index("SEX")
        result = real(private, codes, values, ctx, spec)
        seen["rows"] = result.rows
        return result
    monkeypatch.setattr(pipeline, "reweight_rows", recorded)
    (run,) = release(frame, params, None, "histogram", {}, seed=2, group_columns=("SEX",),
                     reweight="moments:AGE;marginals:JOB×LABEL", reweight_share=0.3)
    steps = [c.step for c in run.ledger.charges if c.step.startswith("reweighting")]
    assert steps == ["reweighting: first and second moments of AGE[18,79]", "reweighting: 2-way marginal JOB × LABEL"]
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)
    before = np.bincount(seen["codes"][:, seen["sex"]], minlength=2)
    after = run.table["SEX"].astype(str).value_counts().reindex(["F", "M"], fill_value=0).to_numpy()
    assert before.min() > 0 and (after == before).all()
    kept_sex = seen["codes"][seen["rows"], seen["sex"]]
    assert (np.bincount(kept_sex, minlength=2) == before).all()


@pytest.mark.parametrize("spec, message", [
    ("moments:AGE,NOPE", "--reweight moments:AGE,NOPE: not schema columns: NOPE"),
    ("moments:AGE,SEX", "moments take numeric columns; SEX is categorical"),
    ("moments:", "--reweight moments:: names no columns"),
    ("", "--reweight names no measures"),
    ("marginals:SEX×JOB×LABEL", "is not a 1- or 2-way marginal"),
    ("means:AGE", "unknown measure 'means'"),
    (None, "--reweight-share needs --reweight SPEC"),
])
def test_bad_reweight_specs_are_one_line_and_write_nothing(tmp_path, capsys, spec, message):
    frame, params = data()
    (tmp_path / "p.json").write_text(json.dumps(params))
    frame.to_csv(tmp_path / "private.csv", index=False)
    extra = ["--reweight", spec] if spec is not None else ["--reweight-share", "0.2"]
    code = main(["--params", str(tmp_path / "p.json"), "--private", str(tmp_path / "private.csv"),
                 "--output", str(tmp_path / "out.csv")] + extra)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "private.csv"]


def test_moments_star_takes_every_numeric_column_and_the_share_is_checked():
    spec = parse_reweight("moments:*; marginals:A*B", ["A", "B", "X", "Y"], ["X", "Y"])
    assert spec.moments == (("X", "Y"),) and spec.marginals == (("A", "B"),)
    with pytest.raises(OptionError, match="--reweight-share must be in"):
        parse_reweight("moments:X", ["X"], ["X"], share=1.0)


def test_superquail_inside_a_reweighted_release_nests_its_hold_and_spends_the_budget():
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    (run,) = release(frame, params, None, "superquail", {"target": "LABEL"}, seed=6, group_columns=(),
                     reweight="moments:AGE,HOURS", reweight_share=0.2)
    charges = run.ledger.charges
    assert sum(c.rho for c in charges) == pytest.approx(run.ledger.budget, rel=1e-9)
    assert sum(c.rho for c in charges if c.step.startswith("reweighting")) == pytest.approx(
        0.2 * run.ledger.budget, rel=1e-6)
    assert not run.ledger.held


def test_a_held_share_is_out_of_reach_until_released():
    from dpsyn.lib.privacy.accounting import BudgetExceeded, Ledger
    ledger = Ledger(1.0, 1e-9)
    ledger.hold(0.3 * ledger.budget)
    assert ledger.remaining == pytest.approx(0.7 * ledger.budget)
    with pytest.raises(BudgetExceeded):
        ledger.charge("too much", "gaussian", 1.0, 1.0, 0.8 * ledger.budget)
    ledger.charge("the method", "gaussian", 1.0, 1.0, ledger.remaining)
    ledger.unhold()
    assert ledger.remaining == pytest.approx(0.3 * ledger.budget) and ledger.spent <= ledger.budget
    ledger.hold(0.2 * ledger.budget)
    ledger.hold(0.05 * ledger.budget)  # a stage inside a held block holds a share of what it sees
    assert ledger.remaining == pytest.approx(0.05 * ledger.budget)
    ledger.unhold()
    ledger.unhold()
    assert ledger.remaining == pytest.approx(0.3 * ledger.budget)


def test_a_column_of_one_value_has_no_moments_to_reweight(tmp_path, capsys):
    """``moments:*`` leaves out a numeric column whose range is one value (every row holds it; its bounds would be
    equal, which the moments query refuses: the release failed), and a spec left with no measure at all is
    refused in one line before anything is read."""
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    params["schema"] = dict(params["schema"], ONE={"dtype": "int", "min": 7, "max": 7})
    frame = frame.assign(ONE=7)
    spec = with_bounds(parse_reweight("moments:*", list(params["schema"]), ["AGE", "INCOME", "HOURS", "ONE"]),
                       {"AGE": (18, 79), "INCOME": (0, 300000), "HOURS": (0, 60), "ONE": (7, 7)}, None)
    assert spec.moments == (("AGE", "INCOME", "HOURS"),) and dict(spec.sources)["ONE"] == "one value: left out"
    (run,) = release(frame, params, None, "histogram", {}, seed=2, group_columns=(), reweight="moments:*")
    assert len(run.table) and "ONE" not in str([c.step for c in run.ledger.charges])
    (tmp_path / "p.json").write_text(json.dumps(params))
    frame.to_csv(tmp_path / "private.csv", index=False)
    code = main(["--params", str(tmp_path / "p.json"), "--private", str(tmp_path / "private.csv"),
                 "--output", str(tmp_path / "out" / "s.csv"), "--reweight", "moments:ONE"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "every moment column holds one value" in err[0], err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
