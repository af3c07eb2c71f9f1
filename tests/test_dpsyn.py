"""dpsyn releases on shapes that once failed: few non-group columns, public marginals in the
public regime, marginal selection at a tiny budget."""
import json

import numpy as np
import pandas as pd
import pytest

from dpsyn import main
from dpsyn.lib.tuning import T
from dpsyn.method.planner import ADAPTIVE, TableShape, adaptive_rounds, make_plan
from helpers import with_rounds, write_params


def release(tmp_path, schema, private: pd.DataFrame, *args, public: pd.DataFrame | None = None, eps=10.0,
            theta=1):
    run = {"epsilon": eps, "delta": 1e-9, "max_records": 10 ** 5, "max_records_per_individual": theta}
    params = write_params(tmp_path / "params.json", schema, [run])
    private.to_csv(tmp_path / "private.csv", index=False)
    argv = ["--params", str(params), "--private", str(tmp_path / "private.csv"), "--output",
            str(tmp_path / "out" / "s.csv"), "--seed", "1", "--quiet", *args]
    if public is not None:
        public.to_csv(tmp_path / "public.csv", index=False)
        argv += ["--public", str(tmp_path / "public.csv")]
    code = main.main(argv)
    ledger = json.loads((tmp_path / "out" / f"s.ledger.eps{eps:g}.json").read_text()) if code == 0 else None
    return code, (pd.read_csv(tmp_path / "out" / "s.csv") if code == 0 else None), ledger


def table(rng, n, **columns):
    return pd.DataFrame({name: rng.choice(values, n) for name, values in columns.items()})


@pytest.mark.parametrize("regime,share", [("one-way", 0.2), ("two-way", 0.8), (None, 0.2)])
def test_one_non_group_column_releases(tmp_path, capsys, regime, share):
    """The two-way regime measures group × column (all its marginal budget: there is no pair)."""
    schema = {"G": {"dtype": "str", "values": ["a", "b"]}, "X": {"dtype": "int", "values": [0, 1, 2]}}
    rng = np.random.default_rng(0)
    private = pd.DataFrame({"G": np.repeat(["a", "b"], 400), "X": np.r_[np.zeros(400, int), rng.integers(0, 3, 400)]})
    extra = ["--regime", regime] if regime else []
    code, out, ledger = release(tmp_path, schema, private, "--group-columns", "G", *extra)
    assert code == 0, capsys.readouterr().err
    assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-12)
    assert len(out) > 600 and set(out["X"]) <= {0, 1, 2}
    assert out[out.G == "a"].X.eq(0).mean() > share  # group a is all X = 0 in the private table
    assert not [c for c in ledger["charges"] if c["step"].startswith("adaptive round")] or regime is None  # no triple


def test_two_way_regime_splits_group_marginals_by_cells(tmp_path, capsys):
    """Group × column marginals get rho ∝ cells^(2/3) (least summed L1 noise); pairs an even split."""
    schema = {"G": {"dtype": "str", "values": ["a", "b"]}, "X": {"dtype": "int", "values": [0, 1]},
              "Y": {"dtype": "int", "values": list(range(16))}, "Z": {"dtype": "int", "values": [0, 1, 2]}}
    private = table(np.random.default_rng(0), 600, G=["a", "b"], X=[0, 1], Y=list(range(16)), Z=[0, 1, 2])
    code, _, ledger = release(tmp_path, schema, private, "--group-columns", "G", "--regime", "two-way")
    assert code == 0, capsys.readouterr().err
    rho = {c["step"].removeprefix("2-way marginal ").removeprefix("3-way marginal "): c["rho"]
           for c in ledger["charges"]}
    assert rho["G × Y"] / rho["G × X"] == pytest.approx(8 ** (2 / 3), rel=1e-9)
    assert rho["G × Z"] / rho["G × X"] == pytest.approx(1.5 ** (2 / 3), rel=1e-9)
    assert rho["X × Y"] == pytest.approx(rho["Y × Z"], rel=1e-12) == pytest.approx(rho["X × Z"], rel=1e-12)
    assert sum(rho[f"G × {c}"] for c in "XYZ") == pytest.approx(sum(rho[p] for p in ("X × Y", "X × Z", "Y × Z")),
                                                               rel=1e-9)  # T.dpsyn_group_marginal_share = 0.5
    assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-12)


@pytest.mark.parametrize("method", ["dpsyn", "histogram"])
def test_every_column_a_group_column_releases(tmp_path, capsys, method):
    schema = {"G": {"dtype": "str", "values": ["a", "b"]}, "H": {"dtype": "int", "values": [0, 1, 2]}}
    private = table(np.random.default_rng(0), 500, G=["a", "b"], H=[0, 1, 2])
    code, out, ledger = release(tmp_path, schema, private, "--group-columns", "G,H", "--method", method)
    assert code == 0, capsys.readouterr().err
    assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-12)
    assert abs(len(out) - 500) < 50


def test_public_regime_keeps_the_shape_of_public_marginals(tmp_path, capsys):
    """Public 2-way marginals (400 rows) are rescaled to the noisy total (4000 rows) before consistency, so
    their shape reaches the synthetic table: here A = B in every public row."""
    schema = {"G": {"dtype": "str", "values": ["g1", "g2", "g3", "g4"]},
              "A": {"dtype": "int", "values": [0, 1, 2, 3]}, "B": {"dtype": "int", "values": [0, 1, 2, 3]}}
    rng = np.random.default_rng(0)
    private = table(rng, 4000, G=["g1", "g2", "g3", "g4"], A=[0, 1, 2, 3], B=[0, 1, 2, 3])
    a = rng.integers(0, 4, 400)
    public = pd.DataFrame({"G": rng.choice(["g1", "g2"], 400), "A": a, "B": a})
    code, out, ledger = release(tmp_path, schema, private, "--group-columns", "G", "--regime", "public",
                                public=public, eps=1.0)
    assert code == 0, capsys.readouterr().err
    assert [c["step"] for c in ledger["charges"]] == ["group counts (G)"]
    assert (out.A == out.B).mean() > 0.95  # flattened by the total's gap before the fix: about 0.3


def test_marginal_selection_at_a_tiny_budget_releases(tmp_path, capsys):
    """The dependency scores' noise once overflowed the exact sampler (sigma > 2^30 grid steps)."""
    schema = {c: {"dtype": "int", "values": [0, 1, 2]} for c in "ABC"}
    private = table(np.random.default_rng(0), 300, A=[0, 1, 2], B=[0, 1, 2], C=[0, 1, 2])
    code, out, ledger = release(tmp_path, schema, private, "--group-columns", "none", "--marginals", "select",
                                "--regime", "two-way", eps=1e-5)
    assert code == 0, capsys.readouterr().err
    scores = next(c for c in ledger["charges"] if c["step"].startswith("dependency scores"))
    assert "rounded to multiples of" in scores["sensitivity_reason"]
    assert scores["rho"] >= scores["sensitivity"] ** 2 / (2 * scores["noise_scale"] ** 2)
    assert ledger["rho_spent"] <= ledger["rho_budget"]


@pytest.mark.parametrize("regime, joint_groups, assign_cells, max_entropy, low, high", [
    ("two-way", 100, 0, False, 0.98, 1.0),  # 0.997: the base carries the group column
    ("two-way", 0, T.groups_assign_cells, False, 0.98, 1.0),  # 0.998: base records assigned to groups
    ("two-way", 0, 0, False, 0.0, 0.96),  # 0.934: random shares of the base, rewritten per group
    ("adaptive", 100, 0, True, 0.99, 1.0),  # 0.995: drawn from the max-entropy fit
    ("adaptive", 100, T.groups_assign_cells, False, 0.99, 1.0),  # 0.995
    ("adaptive", 100, 0, False, 0.0, 0.99),  # 0.984
])
def test_groups_without_public_records_keep_pairs_with_a_column_that_differs_between_them(tmp_path, capsys,
                                                                                         monkeypatch, regime,
                                                                                         joint_groups, assign_cells,
                                                                                         max_entropy, low,
                                                                                         high):
    """No public file, three groups: X depends on the group and Y copies X.  Each group keeps its own X
    and the X = Y pair, whether the base carries the group column (two-way regime, at most
    T.dpsyn_joint_groups groups), the records are drawn from the maximum-entropy fit with the group column
    (adaptive regime) or each base record is assigned to one group (groups.assigned_rows); rewriting X
    per group in a random share of a base without them breaks it (T.groups_assign_cells 0).  The same under --seed
    with two jobs."""
    monkeypatch.setattr(T, "dpsyn_joint_groups", joint_groups)
    monkeypatch.setattr(T, "groups_assign_cells", assign_cells)
    if regime == "adaptive" and not max_entropy:  # GUM's records instead of the maximum-entropy fit's
        with_rounds(monkeypatch, max_entropy=False)
    schema = {"G": {"dtype": "str", "values": ["a", "b", "c"]}, "X": {"dtype": "int", "values": [0, 1, 2]},
              "Y": {"dtype": "int", "values": [0, 1, 2]}, "Z": {"dtype": "int", "values": [0, 1]}}
    rng = np.random.default_rng(0)
    g = rng.integers(0, 3, 3000)
    x = np.where(rng.random(3000) < 0.8, g, rng.integers(0, 3, 3000))
    private = pd.DataFrame({"G": np.array(["a", "b", "c"])[g], "X": x, "Y": x, "Z": rng.integers(0, 2, 3000)})
    code, out, ledger = release(tmp_path, schema, private, "--group-columns", "G", "--regime", regime, eps=50.0)
    assert code == 0, capsys.readouterr().err
    assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-12)
    assert low < out.X.eq(out.Y).mean() < high
    again = release(tmp_path, schema, private, "--group-columns", "G", "--regime", regime, "--jobs", "2", eps=50.0)
    pd.testing.assert_frame_equal(again[1], out)  # the same under --seed, whatever the jobs
    for code_, name in enumerate("abc"):
        assert out[out.G == name].X.eq(code_).mean() == pytest.approx(0.8 + 0.2 / 3, abs=0.05)


def test_few_groups_two_way_rounds_measure_the_triple_the_pairs_miss(tmp_path, capsys, monkeypatch):
    """Two-way regime, no public file, few groups: after every pair (and group × column) marginal, the
    rounds spend T.dpsyn_triple_share of the marginals' rho and find Z = X xor Y, which no pair shows (each pair
    of X, Y, Z is independent); without the rounds (beyond T.dpsyn_triple_work) the release keeps it no better than
    chance."""
    schema = {"G": {"dtype": "str", "values": ["a", "b", "c"]}, "X": {"dtype": "int", "values": [0, 1]},
              "Y": {"dtype": "int", "values": [0, 1]}, "Z": {"dtype": "int", "values": [0, 1]},
              "W": {"dtype": "int", "values": [0, 1, 2]}}
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 2, 3000), rng.integers(0, 2, 3000)
    private = pd.DataFrame({"G": rng.choice(["a", "b", "c"], 3000), "X": x, "Y": y, "Z": x ^ y,
                            "W": rng.integers(0, 3, 3000)})
    code, out, ledger = release(tmp_path, schema, private, "--group-columns", "G", "--regime", "two-way", eps=20.0)
    assert code == 0, capsys.readouterr().err
    assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-12)
    rounds = [c for c in ledger["charges"] if c["step"].startswith("adaptive round")]
    marginals = [c for c in ledger["charges"] if "marginal" in c["step"] and not c["step"].startswith("adaptive")]
    assert all(c["sensitivity"] == pytest.approx(1, rel=0.01) and c["sensitivity"] >= 1 for c in rounds)  # theta
    spent = sum(c["rho"] for c in rounds)
    assert spent / (spent + sum(c["rho"] for c in marginals)) == pytest.approx(T.dpsyn_triple_share, rel=1e-9)
    assert any("X × Y × Z" in c["step"] for c in rounds)
    assert (out.Z == out.X ^ out.Y).mean() > 0.95
    monkeypatch.setattr(T, "dpsyn_triple_work", 0.0)  # too wide a table for rounds: the pairs get it all
    code, out, ledger = release(tmp_path, schema, private, "--group-columns", "G", "--regime", "two-way", eps=20.0)
    assert code == 0 and (out.Z == out.X ^ out.Y).mean() < 0.7  # 0.50
    assert not [c for c in ledger["charges"] if c["step"].startswith("adaptive round")]
    assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-12)


@pytest.mark.parametrize("public, groups, noisy, expected", [
    (False, True, False, True), (False, True, True, True), (False, False, True, True), (False, False, False, False),
    (True, True, False, False), (True, False, True, False)])
def test_the_final_records_come_from_the_maximum_entropy_fit_without_public_records_where_groups_or_noisy_pairs(
        public, groups, noisy, expected):
    noise = 10 * T.planner_rich_pair_noise if noisy else T.planner_two_way_noise  # pairs mostly noise, or worth it
    assert adaptive_rounds(noise, noise, public, groups).max_entropy is expected
    forced = make_plan(1.0, 1, 5000.0, TableShape(groups, public, pair_cells=(4,)), ADAPTIVE, rho=1.0)
    assert forced.rounds is not None and forced.rounds.max_entropy is (not public and groups)
