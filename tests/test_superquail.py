"""SuperQUAIL (method/superquail.py): accounting, the target inside its schema values, bad options,
determinism, and the pieces (SAGE values, round-robin merge, fair thresholds)."""
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpsyn.api import release
from dpsyn.main import main
from dpsyn.lib.records.domain import Domain
from dpsyn.lib.privacy.queries import LogisticGradients, DomainRecords
from dpsyn.lib.tuning import T
from dpsyn.method.superquail import AdditiveModel, fit_logistic, merge_rankings, sage_values, tune_thresholds
from test_rap import data

OPTIONS = {"target": "LABEL", "beta": 2, "alpha": 0.6}
STEPS = 20  # lib.tuning T.superquail_logistic_steps


@pytest.fixture(scope="module")
def runs():
    frame, params = data()
    return release(frame, params, None, "superquail", OPTIONS, seed=4, group_columns=())


def test_synthesizer_importance_and_classifiers_sum_to_the_budget(runs):
    for r in runs:
        charges = r.ledger.charges
        assert sum(c.rho for c in charges) == pytest.approx(r.ledger.budget, rel=1e-9)
        target = [c for c in charges if c.step.startswith("superquail: target classifier")]
        features = [c for c in charges if c.step.startswith("superquail: classifier of")]
        assert len(target) == STEPS and len(features) == 2 * 5  # gradient steps; 2 features × 5 other columns
        inside_bins = sum(c.rho for c in charges if "inside its bins" in c.step)  # AGE, INCOME, HOURS: no public file
        assert inside_bins == pytest.approx(T.bin_values_share * r.ledger.budget, rel=1e-9)
        budget = r.ledger.budget - inside_bins  # what the method is given
        assert sum(c.rho for c in target) == pytest.approx(0.6 * (1 - T.superquail_synth_share) * budget, rel=1e-6)
        assert sum(c.rho for c in features) == pytest.approx(0.4 * budget, rel=1e-6)
        synthesizer = sum(c.rho for c in charges
                          if not c.step.startswith("superquail") and "inside its bins" not in c.step)
        assert synthesizer == pytest.approx(0.6 * T.superquail_synth_share * budget, rel=1e-6)


def test_target_stays_in_the_schema_and_seeded_runs_repeat(runs):
    frame, params = data()
    again = release(frame, params, None, "superquail", OPTIONS, seed=4, group_columns=())
    for a, b in zip(runs, again):
        pd.testing.assert_frame_equal(a.table, b.table)
        assert set(a.table["LABEL"].astype(str)) <= {"no", "yes"} and len(a.table) > 0


def test_fair_variant_runs_per_group_with_the_same_accounting():
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    (run,) = release(frame, params, None, "superquail",
                     {**OPTIONS, "sensitive": "SEX", "fair": "bal", "classifier": "nb"}, seed=2, group_columns=())
    steps = [c.step for c in run.ledger.charges if c.step.startswith("superquail: target classifier")]
    assert steps and all(s.endswith("× SEX") for s in steps)
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)


def test_only_confident_predictions_replace_the_synthesizers_labels(monkeypatch):
    """Without --fair the target becomes the prediction only where the classifier is T.superquail_confidence sure:
    post-processing that touches the target alone (same seed: every other column and the ledger agree)."""
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    out = {}
    for confidence in (0.0, 1.01):  # every label replaced; none replaced
        monkeypatch.setattr(T, "superquail_confidence", confidence)
        (out[confidence],) = release(frame, params, None, "superquail", {"target": "LABEL"}, seed=3,
                                     group_columns=())
    every, none = out[0.0], out[1.01]
    others = [c for c in every.table.columns if c != "LABEL"]
    pd.testing.assert_frame_equal(every.table[others], none.table[others])
    assert (every.table["LABEL"] != none.table["LABEL"]).any()
    assert [(c.step, c.rho) for c in every.ledger.charges] == [(c.step, c.rho) for c in none.ledger.charges]


@pytest.mark.parametrize("extra, message", [
    (["--fair", "bal"], "--fair bal needs --sensitive COLUMN"),
    (["--target", "AGE"], "--target AGE must be a categorical column"),
    (["--target", "NOPE"], "--target NOPE: not a schema column"),
    (["--target", "LABEL", "--sensitive", "NOPE"], "--sensitive NOPE: not a schema column"),
    ([], "--method superquail needs --target COLUMN"),
])
def test_bad_superquail_options_are_one_line_and_write_nothing(tmp_path, capsys, extra, message):
    frame, params = data()
    (tmp_path / "p.json").write_text(json.dumps(params))
    frame.to_csv(tmp_path / "private.csv", index=False)
    if extra[:2] == ["--fair", "bal"]:
        extra = ["--target", "LABEL"] + extra
    code = main(["--params", str(tmp_path / "p.json"), "--private", str(tmp_path / "private.csv"),
                 "--output", str(tmp_path / "out.csv"), "--method", "superquail"] + extra)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "private.csv"]


def test_sage_ranks_the_informative_column_first():
    rng = np.random.default_rng(0)
    label = rng.integers(0, 2, 2000)
    informative = np.where(rng.random(2000) < 0.9, label, 1 - label)
    codes = np.column_stack([label, informative, rng.integers(0, 2, 2000)])
    log_table = {1: np.log(np.array([[[0.9, 0.1], [0.1, 0.9]]])), 2: np.log(np.full((1, 2, 2), 0.5))}
    model = AdditiveModel(0, [1, 2], np.log(np.full((1, 2), 0.5)), log_table)
    values = sage_values(model, codes, np.zeros(2000, dtype=np.int64), rng, permutations=8)
    assert values[1] > 0.3 and abs(values[2]) < 1e-9


def test_round_robin_merge_takes_the_protected_group_last_then_first_in_a_partial_round():
    rankings = [[1, 2, 3], [4, 1, 5]]
    assert merge_rankings(rankings, protected=1, count=4) == [1, 4, 2, 5]
    assert merge_rankings(rankings, protected=1, count=3) == [1, 4, 5]


def test_balanced_thresholds_bring_the_groups_false_negative_rates_together():
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 2, 4000)
    # a calibrated classifier whose probabilities are lower in group 1, so at 1/2 it misses more of its positives
    probability = np.where(groups == 1, 0.7, 1.0) * rng.beta(2, 2, 4000)
    truth = rng.random(4000) < probability

    def gap(t):
        fnr = [float((probability[(groups == g) & truth] < t[g]).mean()) for g in (0, 1)]
        return abs(fnr[0] - fnr[1])
    plain = tune_thresholds(probability, truth, groups, "none", 1, 2)
    balanced = tune_thresholds(probability, truth, groups, "bal", 1, 2)
    assert list(plain) == [0.5, 0.5] and gap(balanced) < gap(plain) / 2


def test_fnr_threshold_lowers_the_protected_groups_false_negatives_within_its_accuracy_slack():
    rng = np.random.default_rng(5)
    groups = rng.integers(0, 2, 4000)
    truth = rng.random(4000) < 0.4
    probability = np.clip(np.where(truth, 0.55, 0.35) + rng.normal(0, 0.15, 4000), 0, 1)
    thresholds = tune_thresholds(probability, truth, groups, "fnr", 1, 2)
    rows = (groups == 1)
    accuracy = [float(((probability[rows] >= t) == truth[rows]).mean()) for t in (0.5, thresholds[1])]
    fnr = [float((probability[rows & truth] < t).mean()) for t in (0.5, thresholds[1])]
    assert thresholds[0] == 0.5 and thresholds[1] < 0.5
    assert fnr[1] < fnr[0] and accuracy[1] >= accuracy[0] - 0.02


def test_logistic_gradient_sums_match_a_row_by_row_computation():
    rng = np.random.default_rng(2)
    domain = Domain(("A", "B", "Y"), (3, 2, 3))
    codes = np.column_stack([rng.integers(0, 3, 50), rng.integers(0, 2, 50), rng.integers(0, 3, 50)])
    weights = rng.normal(size=(3, 6))
    query = LogisticGradients(("A", "B"), "Y", tuple(map(tuple, weights)))
    expected = np.zeros((3, 6))
    for a, b, y in codes:
        x = np.zeros(6)
        x[[0, 1 + a, 4 + b]] = 1.0
        p = np.exp(weights @ x) / np.exp(weights @ x).sum()
        expected += np.outer(p - np.eye(3)[y], x)
    assert np.allclose(query.answer(DomainRecords(codes, {}, domain)), expected)


def test_warm_start_reads_only_the_synthetic_records_and_fits_them():
    """With no noisy steps the classifier comes from exact steps on the synthetic records alone: it never
    touches the private table, and it learns the label those records carry."""
    class NoPrivateAccess:
        def __getattr__(self, name):
            raise AssertionError(f"the warm start read the private table ({name})")

    rng = np.random.default_rng(6)
    label = rng.integers(0, 2, 3000)
    codes = np.column_stack([np.where(rng.random(3000) < 0.9, label, 1 - label), rng.integers(0, 4, 3000), label])
    ctx = SimpleNamespace(domain=Domain(("A", "B", "Y"), (2, 4, 2)))
    model = fit_logistic(NoPrivateAccess(), ctx, 2, [0, 1], 1.0, codes, steps=0)
    predicted = model.log_posterior(codes, np.zeros(3000, dtype=np.int64)).argmax(axis=1)
    assert (predicted == codes[:, 0]).mean() == 1.0  # the Bayes rule on these records: the label follows A
