"""Values inside the bins of numeric columns without public values (stages/bin_values.py)."""
import json

import numpy as np
import pandas as pd
import pytest

from dpsyn import main
from dpsyn.lib.tuning import T
from dpsyn.api import release
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import parse_schema
from dpsyn.stages.bin_values import shrunk_weights, sub_edges

SCHEMA = {"W": {"dtype": "int", "min": 0, "max": 9999}, "INC": {"dtype": "int", "min": -500, "max": 2000, "null": "N"},
          "X": {"dtype": "float", "min": 0, "max": 1}, "K": {"dtype": "str", "values": ["a", "b"]}}


def params(eps: float = 10.0) -> dict:
    return {"runs": [{"epsilon": eps, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": 1}],
            "schema": SCHEMA}


def frame(rng: np.random.Generator, n: int = 4000) -> pd.DataFrame:
    """W crowds the low end of its first bin of 500 (zeros and 50-150) with a top code; INC holds zeros."""
    w = np.where(rng.random(n) < 0.3, 0, rng.integers(50, 151, n))
    w[rng.random(n) < 0.1] = 9999
    inc = np.where(rng.random(n) < 0.4, 0, rng.integers(1, 60, n)).astype(object)
    inc[rng.random(n) < 0.1] = "N"
    return pd.DataFrame({"W": w, "INC": inc, "X": np.round(rng.random(n), 3), "K": rng.choice(["a", "b"], n)})


def test_sub_edges_give_the_first_and_last_values_and_zero_their_own_sub_bins():
    encoder = Encoder.fit(parse_schema(params()))
    for name in ("W", "INC"):
        coder = encoder.coder(name)
        edges = sub_edges(coder)
        assert edges.shape == (coder.size, T.bin_values_sub_bins + 1) and (np.diff(edges, axis=1) > 0).all()
        for b in range(len(coder.edges) - 1):
            lo, hi = edges[b, 0], edges[b, -1]
            assert (lo, hi) == (coder.edges[b], coder.edges[b + 1])
            first = coder.first_value(b)
            assert first in edges[b] and edges[b, 1] == first  # (lo, first] holds the first value alone
            assert hi - 1 in edges[b] or hi - 1 <= first  # (hi - 1, hi] holds the last value alone
            if lo < -1 and 0 < hi:
                assert {-1.0, 0.0} <= set(edges[b])


def test_values_inside_wide_bins_follow_the_private_rows_and_are_charged():
    """Values inside bins (the default), no public file: each numeric column's sub-bin counts are measured
    (T.bin_values_share of rho, sensitivity theta), and synthetic values follow them: W's zeros, its 50-150 crowd and its top code,
    INC's zeros; the same under --seed."""
    private = frame(np.random.default_rng(0))
    (run,) = release(private, params(), None, "dpsyn", {}, seed=3, group_columns=())
    inside = [c for c in run.ledger.charges if "inside its bins" in c.step]
    assert [c.step.split()[0] for c in inside] == ["W", "INC", "X"]
    assert all(c.sensitivity == 1 for c in inside)
    assert sum(c.rho for c in inside) == pytest.approx(T.bin_values_share * run.ledger.budget, rel=1e-12)
    assert run.ledger.spent == pytest.approx(run.ledger.budget, rel=1e-12)
    w = run.table.W.astype(float)
    assert (w == 0).mean() == pytest.approx(0.27, abs=0.03)  # uniform inside (-1, 499]: 0.002
    assert w.between(26, 180).mean() == pytest.approx(0.63, abs=0.03)  # sub-bins of 26; uniform: 0.19
    assert (w == 9999).mean() == pytest.approx(0.1, abs=0.02)
    inc = pd.to_numeric(run.table.INC, errors="coerce")
    assert (inc == 0).mean() == pytest.approx(0.36, abs=0.03)
    assert inc.isna().mean() == pytest.approx(0.1, abs=0.02)
    again = release(private, params(), None, "dpsyn", {}, seed=3, group_columns=())[0].table
    pd.testing.assert_frame_equal(again, run.table)


def test_nothing_is_measured_inside_bins_when_turned_off_with_public_values_or_for_rap():
    rng = np.random.default_rng(1)
    private, public = frame(rng), frame(rng, 500)
    for given, method, options, asked in [(None, "dpsyn", {}, False), (public, "dpsyn", {}, True),
                                          (None, "rap", {"rounds": 2, "rows": 200, "steps": 3}, True)]:
        (run,) = release(private, params(), given, method, options, seed=3, group_columns=(), bin_values=asked)
        assert not [c for c in run.ledger.charges if "inside its bins" in c.step]
        assert run.ledger.spent == pytest.approx(run.ledger.budget, rel=1e-12)


def test_the_command_measures_inside_bins_by_default_and_not_with_no_bin_values(tmp_path):
    """main.py: the ledger beside the output holds the sub-bin charges unless --no-bin-values."""
    (tmp_path / "params.json").write_text(json.dumps(params()))
    frame(np.random.default_rng(4), 600).to_csv(tmp_path / "private.csv", index=False)
    for flag, measured in [((), True), (("--no-bin-values",), False)]:
        out = tmp_path / f"out{measured}.csv"
        assert main.main(["--params", str(tmp_path / "params.json"), "--private", str(tmp_path / "private.csv"),
                          "--output", str(out), "--quiet", "--seed", "1", "--group-columns", "", *flag]) == 0
        ledger = json.loads((tmp_path / f"out{measured}.ledger.eps10.json").read_text())
        assert any("inside its bins" in c["step"] for c in ledger["charges"]) == measured
        assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-9)


def test_weights_stay_even_over_values_where_the_counts_vary_no_more_than_their_noise():
    """shrunk_weights: pure noise leaves a bin's weights even per value (a sub-bin of two values weighs
    double; one of none, nothing); counts far above their noise keep their shape."""
    rng = np.random.default_rng(2)
    prior = np.array([[1.0, 2.0, 1.0, 1.0, 0.0, 0.0]])
    noisy = rng.normal(100, 50, (1, 6))
    noisy[0, 4:] = 1e6  # no value there: ignored
    weights = shrunk_weights(noisy, prior, sigma=50.0)
    assert weights[0] == pytest.approx(prior[0] / 5 * noisy[0, :4].sum())
    strong = shrunk_weights(np.array([[1000.0, 0, 0, 0, 5000, 0]]), np.ones((1, 6)), sigma=10.0)
    assert strong[0] == pytest.approx([1000, 0, 0, 0, 5000, 0], abs=1.0)
    assert (shrunk_weights(np.full((1, 3), -40.0), np.ones((1, 3)), sigma=50.0) > 0).all()  # a negative total


def test_a_float_column_keeps_its_zeros_its_top_code_and_its_whole_numbers():
    """A float column without a grid: its range's ends, zero and, where a bin holds few of them, whole numbers get
    sub-bins of their own, so that zero-inflated values, clipped values and counts stored as floats come out exact
    (drawn uniformly inside the bin, no value would be)."""
    schema = {"F": {"dtype": "float", "min": 0, "max": 30}, "K": {"dtype": "str", "values": ["a", "b"]}}
    parameters = {"runs": [{"epsilon": 10.0, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": 1}],
                  "schema": schema}
    coder = Encoder.fit(parse_schema(parameters)).coder("F")
    edges = sub_edges(coder)
    assert edges.shape == (coder.size, T.bin_values_sub_bins + 1) and (np.diff(edges, axis=1) > 0).all()
    for b in range(len(coder.edges) - 1):
        lo, hi = edges[b, 0], edges[b, -1]
        for atom in [v for v in (0.0, 30.0, *range(31)) if lo < v <= hi]:  # bins of 1.5: one or two whole numbers
            assert np.nextafter(atom, -np.inf) in edges[b] and atom in edges[b]
    rng = np.random.default_rng(4)
    f = np.where(rng.random(4000) < 0.4, 0.0, np.where(rng.random(4000) < 0.5, 12.0, rng.uniform(0, 30, 4000)))
    f[rng.random(4000) < 0.1] = 30.0
    private = pd.DataFrame({"F": f, "K": rng.choice(["a", "b"], 4000)})
    (run,) = release(private, parameters, None, "dpsyn", {}, seed=3, group_columns=())
    out = run.table.F.astype(float)
    for value in (0.0, 12.0, 30.0):
        assert (out == value).mean() == pytest.approx((f == value).mean(), abs=0.03)
    assert (out == np.round(out)).mean() == pytest.approx((f == np.round(f)).mean(), abs=0.03)


def test_atoms_never_take_more_sub_bins_than_there_are():
    """With few sub-bins the atoms (and a grid bin's cuts around its last value and zero) are added in order while
    they fit: a bin always has bin_values_sub_bins sub-bins (more would fail only after the budget was spent)."""
    schema = {"F": {"dtype": "float", "min": -16, "max": 6}, "G": {"dtype": "int", "min": -16, "max": 9999}}
    parameters = {"runs": [{"epsilon": 1.0, "delta": 1e-9, "max_records": 10, "max_records_per_individual": 1}],
                  "schema": schema}
    for k in (2, 4, 8):
        with T.overridden({"bin_values_sub_bins": k}):
            encoder = Encoder.fit(parse_schema(parameters), default_bins=1)
            for name in ("F", "G"):  # a float bin with three atoms; a grid bin with its ends and zero
                edges = sub_edges(encoder.coder(name))
                assert edges.shape == (1, k + 1) and (np.diff(edges, axis=1) > 0).all()


def test_a_grid_nearly_as_fine_as_float64_still_gets_its_sub_bins():
    """A bin of one grid value where float64 cannot cut it into bin_values_sub_bins pieces (a whole number near
    10**15, the first bin of declared edges) gets its pieces above the bin, which hold no value of it: the sub-bin
    query is valid (it raised before) and the release draws that bin's one value."""
    big = 10 ** 15
    schema = {"N": {"dtype": "int", "min": big, "max": big + 100, "bins": [big, big + 50, big + 100]},
              "F": {"dtype": "float", "min": 227.0, "max": 800.0, "precision": 12, "bins": [227.0, 300.0, 800.0]},
              "K": {"dtype": "str", "values": ["a", "b"]}}
    parameters = {"runs": [{"epsilon": 10.0, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": 1}],
                  "schema": schema}
    encoder = Encoder.fit(parse_schema(parameters))
    for name in ("N", "F"):
        coder = encoder.coder(name)
        edges = sub_edges(coder)
        assert edges.shape == (coder.size, T.bin_values_sub_bins + 1) and (np.diff(edges, axis=1) > 0).all()
        assert edges[0, 0] == coder.edges[0] and coder.edges[1] in edges[0]  # the one value's sub-bin, then above
    rng = np.random.default_rng(5)
    private = pd.DataFrame({"N": rng.integers(big, big + 101, 2000), "K": rng.choice(["a", "b"], 2000),
                            "F": np.round(rng.uniform(227.0, 800.0, 2000), 3)})
    (run,) = release(private, parameters, None, "dpsyn", {}, seed=3, group_columns=())
    assert [c.step.split()[0] for c in run.ledger.charges if "inside its bins" in c.step] == ["N", "F"]
    out = run.table.N.astype("int64").to_numpy()
    assert ((out >= big) & (out <= big + 100)).all() and (out == big).any()
    assert run.table.F.astype(float).between(227.0, 800.0).all()
