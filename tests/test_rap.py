"""RAP++ (method/rap.py, lib/estimation/relaxed.py): relaxed queries, gradients, accounting, schema-valid output."""
import itertools
import json

import numpy as np
import pandas as pd
import pytest

from dpsyn.api import release
from dpsyn.lib.estimation import relaxed
from dpsyn.lib.records.constraints import Box, Boxes
from dpsyn.lib.records.domain import Domain
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.private_table import PrivateRecords, PrivateTable
from dpsyn.lib.privacy.queries import Intervals
from dpsyn.lib.privacy.unit import PrivacyUnit
from dpsyn.main import main
from dpsyn.method import rap

N = 400


def tiny_table(n: int = 9, seed: int = 0, dtype=np.float64, xp=np) -> relaxed.RelaxedTable:
    rng = np.random.default_rng(seed)
    cats = [rng.dirichlet(np.ones(3), n), ("frozen", np.eye(2)[rng.integers(0, 2, n)]), rng.dirichlet(np.ones(4), n)]
    return relaxed.new_table(xp, cats, rng.random((n, 2)), rng.random((n, 2)) * 0.3, (True, False), dtype)


def gpu_or_skip():
    """cupy where a GPU can be used; the test is skipped elsewhere (CI has none)."""
    try:
        return relaxed.array_module("gpu")
    except relaxed.DeviceUnavailable as exc:
        pytest.skip(str(exc))


QUERIES = [relaxed.RelaxedQuery((0,)), relaxed.RelaxedQuery((0, 2)), relaxed.RelaxedQuery((0, 1, 2)),
           relaxed.RelaxedQuery((), (0,), (1.0,), (0.2, 0.5, 0.7)),
           relaxed.RelaxedQuery((2,), (0, 1), (0.6, -0.8), (-0.3, 0.0, 0.2)),
           relaxed.RelaxedQuery((1, 0), (1,), (1.0,), (0.5,))]


def test_gradients_match_finite_differences():
    table = tiny_table()
    rng = np.random.default_rng(1)
    fits = [Target(q, rng.random(a.shape) * 0.3, weight=rng.random() + 0.5)
            for q, a in zip(QUERIES, relaxed.answers(table, QUERIES, 5.0))]
    _, grads = relaxed.loss_and_grads(table, fits, 5.0)
    params = {"cat0": table.logits[0], "cat2": table.logits[2], "values": table.values, "nulls": table.null_logits}
    assert set(grads) == set(params)  # the frozen column has no gradient
    for name, p in params.items():
        for idx in [(0, 0), (4, 1), (8, p.shape[1] - 1)]:
            old, h = p[idx], 1e-6
            p[idx] = old + h
            up, _ = relaxed.loss_and_grads(table, fits, 5.0)
            p[idx] = old - h
            down, _ = relaxed.loss_and_grads(table, fits, 5.0)
            p[idx] = old
            assert grads[name][idx] == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-9), (name, idx)


def test_queries_sharing_cuts_answer_and_differentiate_as_if_alone():
    """Interval queries with the same columns, direction and cuts share their memberships (per value of
    different columns, and a repeat with the same ``by``): answers, loss and gradients are those of each
    query on its own, summed."""
    table = tiny_table()
    cuts = (0.2, 0.5, 0.7)
    queries = [relaxed.RelaxedQuery(by, (0, 1), (0.6, -0.8), cuts) for by in [(), (0,), (2,), (0,), (1, 2)]]
    rng = np.random.default_rng(5)
    fits = [Target(q, rng.random(a.shape) * 0.3, weight=rng.random() + 0.5)
            for q, a in zip(queries, relaxed.answers(table, queries, 5.0))]
    together = relaxed.answers(table, queries, 5.0)
    loss, grads = relaxed.loss_and_grads(table, fits, 5.0)
    alone = [relaxed.loss_and_grads(table, [f], 5.0) for f in fits]
    for q, a in zip(queries, together):
        np.testing.assert_allclose(a, relaxed.answers(table, [q], 5.0)[0], rtol=1e-12)
    assert loss == pytest.approx(sum(x[0] for x in alone), rel=1e-12)
    for name, g in grads.items():
        np.testing.assert_allclose(g, sum(x[1][name] for x in alone if name in x[1]), rtol=1e-9, atol=1e-15)


def test_sigmoid_queries_converge_to_the_hard_thresholds():
    """On a table of one-hot rows with no nulls, relaxed interval counts approach the exact counts
    (the private table's Intervals answer) as the inverse temperature grows."""
    rng = np.random.default_rng(2)
    n = 300
    x = rng.random((n, 2))
    codes = rng.integers(0, 3, n)
    domain = Domain(("A", "X", "Y"), (3, 4, 4), {"X": (0.0, 1.0), "Y": (0.0, 1.0)})
    private = PrivateTable(PrivateRecords(np.column_stack([codes, np.zeros(n), np.zeros(n)]).astype(np.int32),
                                          {"X": x[:, 0], "Y": x[:, 1]}), domain, PrivacyUnit(1), Ledger(1.0, 1e-6), rng)
    exact = private._answer(Intervals(("X", "Y"), (0.6, 0.8), (0.3, 0.7, 1.1), ("A",))) / n
    table = relaxed.new_table(np, [np.eye(3)[codes]], x, np.zeros((n, 2)), (False, False), np.float64)
    query = relaxed.RelaxedQuery((0,), (0, 1), (0.6, 0.8), (0.3, 0.7, 1.1))
    errors = [np.abs(relaxed.answers(table, [query], beta)[0] - exact).sum() for beta in (4, 32, 256, 1e5)]
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-5  # null probabilities start at 1e-6


def test_relaxed_scales_answer_as_the_private_table_on_written_values():
    """rap holds a numeric column on the public file's range and the private table reads it on the
    schema's: translated interval queries answer alike on relaxed values and on the raw values they
    stand for (one column, or a direction over two); an integer column's cuts sit half-way between its
    grid points, so that the values the release writes (rounded) answer alike too, also just beside a
    cut asked for on a grid point."""
    from dpsyn.method import rap
    from dpsyn.method.base import PublicData, RunContext

    rng = np.random.default_rng(4)
    domain = Domain(("W", "Z"), (5, 5), {"W": (0.0, 9999.0), "Z": (0.0, 10.0)}, steps={"W": 1.0})
    public = PublicData(np.zeros((50, 2), dtype=np.int32),
                        {"W": rng.integers(0, 300, 50).astype(float), "Z": rng.random(50) * 10})
    ctx = RunContext(domain, 1.0, 1e-6, 10, (), 1, rng)
    layout = rap._Layout.of(ctx, public)
    w_scale = layout.scales[0]
    assert (w_scale.low, w_scale.high, w_scale.step) == (public.numeric["W"].min(), public.numeric["W"].max(), 1.0)
    n = 400
    x = rng.random((n, 2))
    on_grid = w_scale.relaxed(np.array([0.0, 30.0, 100.0]))
    x[:40, 0] = on_grid[1] + rng.uniform(-0.4, 0.6, 40) / (w_scale.high - w_scale.low)  # 29.6-30.6
    table = relaxed.new_table(np, [], x, np.zeros((n, 2)), (False, False), np.float64)
    raw = {"W": w_scale.raw(x[:, 0]), "Z": layout.scales[1].raw(x[:, 1])}
    for values, query in [(raw, layout.intervals((0,), (1.0,), (0.2, 0.5, 0.7))),
                          (raw, layout.intervals((0, 1), np.array([0.6, -0.8]), (-0.3, 0.0, 0.2))),
                          (dict(raw, W=np.round(raw["W"])), layout.intervals((0,), (1.0,), on_grid))]:
        private = PrivateTable(PrivateRecords(np.zeros((n, 2), dtype=np.int32), values), domain, PrivacyUnit(1),
                               Ledger(1.0, 1e-6), rng)
        exact = private._answer(query)[0] / n
        np.testing.assert_allclose(relaxed.answers(table, [layout.relaxed(query)], 1e7)[0][0], exact, atol=1e-9)
    assert layout.intervals((0,), (1.0,), on_grid[1:2]).cuts[0] * 9999 == pytest.approx(30.5)  # x <= 30


def test_numeric_bins_as_the_record_fit_reads_them_are_the_private_codes_of_written_values():
    """A query by a numeric column's bins (rap's numeric pairs, fitted by the records): the layout's
    relaxed edges put each relaxed value in the bin whose code the encoder gives the value the release
    writes (rounded to the grid), also just beside an edge on a grid point."""
    from dpsyn.dataloader.encoding import ColumnCoder
    from dpsyn.dataloader.schema import NUMERIC, Column
    from dpsyn.method import rap
    from dpsyn.method.base import PublicData, RunContext

    rng = np.random.default_rng(6)
    edges = (0.0, 29.0, 30.0, 100.0, 9999.0)
    domain = Domain(("W", "Z"), (4, 4), {"W": (0.0, 9999.0), "Z": (0.0, 10.0)}, steps={"W": 1.0},
                    edges={"W": edges, "Z": (0.0, 2.5, 5.0, 7.5, 10.0)})
    public = PublicData(np.zeros((50, 2), dtype=np.int32),
                        {"W": rng.integers(0, 300, 50).astype(float), "Z": rng.random(50) * 10})
    layout = rap._Layout.of(RunContext(domain, 1.0, 1e-6, 10, (), 1, rng), public)
    n = 400
    x = rng.random((n, 2))
    x[:40, 0] = layout.scales[0].relaxed(np.array([30.0]))[0] + rng.uniform(-0.6, 0.6, 40) / layout.scales[0].high
    written = np.round(layout.scales[0].raw(x[:, 0]))
    coder = ColumnCoder(Column("W", NUMERIC, "int", low=0.0, high=9999.0, integral=True), 4, np.asarray(edges))
    codes = np.column_stack([coder.encode(written), np.zeros(n, dtype=np.int32)])
    private = PrivateTable(PrivateRecords(codes, {"W": written, "Z": layout.scales[1].raw(x[:, 1])}), domain,
                           PrivacyUnit(1), Ledger(1.0, 1e-6), rng)
    query = layout.intervals((1,), (1.0,), (0.3, 0.6), ("W",))
    q = layout.relaxed(query)
    assert q.by == () and q.columns == (1,) and q.bins[0][0] == 0 and q.bins[0][2] == 4
    cell = np.searchsorted(np.asarray(q.bins[0][1]), x[:, 0], side="left")
    slot = np.searchsorted(np.asarray(q.cuts), x[:, 1], side="left")
    counts = np.zeros((4, q.slots))
    np.add.at(counts, (cell, slot), 1)
    np.testing.assert_array_equal(counts, private._answer(query))
    with pytest.raises(ValueError, match="record_fit"):
        relaxed.project(relaxed.new_table(np, [], x, np.zeros((n, 2)), (False, False), np.float64),
                        [Target(q, counts / n, weight=1.0)])


def test_projection_fits_noise_free_answers():
    table = tiny_table(60, seed=3)
    goal = tiny_table(60, seed=4)
    goal.frozen = table.frozen  # the group column is fixed: the same in both
    fits = [Target(q, a, weight=1.0) for q, a in zip(QUERIES, relaxed.answers(goal, QUERIES, 64.0))]
    before, _ = relaxed.loss_and_grads(table, fits, 64.0)
    stats = relaxed.project(table, fits, relaxed.Schedule(8.0, 64.0, steps=150, lr=0.05))
    assert stats["loss"] < 0.05 * before


def test_single_and_double_precision_projections_agree():
    """The same code path in float32 (the default, as on a GPU) and float64: answers within 1e-3 after a projection
    (the tolerance test_gpu_and_cpu_projections_agree holds a GPU to)."""
    out = []
    for dtype in (np.float32, np.float64):
        table, goal = tiny_table(60, seed=3, dtype=dtype), tiny_table(60, seed=4)
        goal.frozen = {i: p.astype(dtype) for i, p in table.frozen.items()}
        fits = [Target(q, a, weight=1.0) for q, a in zip(QUERIES, relaxed.answers(goal, QUERIES, 64.0))]
        relaxed.project(table, fits, relaxed.Schedule(8.0, 64.0, steps=50))
        out.append(np.concatenate([a.ravel() for a in relaxed.answers(table, QUERIES, 64.0)]))
    assert np.abs(out[0] - out[1]).max() < 1e-3


def test_gpu_and_cpu_projections_agree():
    """Where a GPU is present: the same float32 projection on cupy and on numpy gives answers within 1e-3."""
    cupy = gpu_or_skip()
    out = []
    for xp in (np, cupy):
        table, goal = tiny_table(60, seed=3, dtype=np.float32, xp=xp), tiny_table(60, seed=4)
        goal.frozen = {i: relaxed.to_numpy(p).astype(np.float32) for i, p in table.frozen.items()}
        fits = [Target(q, a, weight=1.0) for q, a in zip(QUERIES, relaxed.answers(goal, QUERIES, 64.0))]
        relaxed.project(table, fits, relaxed.Schedule(8.0, 64.0, steps=50))
        out.append(np.concatenate([relaxed.to_numpy(a).ravel() for a in relaxed.answers(table, QUERIES, 64.0)]))
    assert np.abs(out[0] - out[1]).max() < 1e-3


def data(seed: int = 0) -> tuple[pd.DataFrame, dict]:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, N)
    income = np.where(rng.random(N) < 0.2, np.nan, np.round(rng.gamma(2, 20000, N) * (age / 40), 2))
    frame = pd.DataFrame({"AGE": age, "INCOME": income, "HOURS": np.round(rng.uniform(0, 60, N), 1),
                          "SEX": rng.choice(["F", "M"], N), "JOB": rng.choice(["a", "b", "c"], N),
                          "LABEL": np.where(age + rng.normal(0, 10, N) > 45, "yes", "no")})
    frame["INCOME"] = frame["INCOME"].clip(upper=300000).map(lambda v: "N" if np.isnan(v) else f"{v:.2f}")
    params = {"runs": [{"epsilon": 1.0, "delta": 1e-6, "max_records": 1000, "max_records_per_individual": 1},
                       {"epsilon": 3.0, "delta": 1e-6, "max_records": 1000, "max_records_per_individual": 2}],
              "schema": {"AGE": {"dtype": "int", "min": 18, "max": 79},
                         "INCOME": {"dtype": "float", "min": 0, "max": 300000, "null": "N", "precision": 2},
                         "HOURS": {"dtype": "float", "min": 0, "max": 60, "precision": 1},
                         "SEX": {"dtype": "str", "values": ["F", "M"]},
                         "JOB": {"dtype": "str", "values": ["a", "b", "c"]},
                         "LABEL": {"dtype": "str", "values": ["no", "yes"]}}}
    return frame, params


OPTIONS = {"target": "LABEL", "rounds": 3, "per_round": 2, "rows": 150, "steps": 5}


@pytest.fixture(scope="module")
def runs():
    frame, params = data()
    return release(frame, params, None, "rap", OPTIONS, seed=5, group_columns=())


def test_every_round_is_charged_and_the_ledger_sums_to_the_budget(runs):
    for r in runs:
        steps = [c.step for c in r.ledger.charges]
        assert sum(c.rho for c in r.ledger.charges) == pytest.approx(r.ledger.budget, rel=1e-9)
        assert len([s for s in steps if s.startswith("rap round")]) == OPTIONS["rounds"] * OPTIONS["per_round"]
        # 1-way answers by LABEL, the one categorical pair (SEX × JOB), 3 numeric × 2 categorical mixed
        # marginals, the 3 numeric pairs (one column's intervals by the other's bins), the rounds
        assert len(steps) == 5 + 1 + 6 + 3 + OPTIONS["rounds"] * 2 * OPTIONS["per_round"]
        assert steps[:6] == ["2-way marginal SEX × LABEL", "2-way marginal JOB × LABEL"] + [
            f"interval counts of {c} (34 intervals + null) by LABEL" for c in ("AGE", "INCOME", "HOURS")] + [
            "2-way marginal SEX × JOB"]
        assert [(s.split()[3], s.split()[-1]) for s in steps[6:15]] == [
            (c, by) for c in ("AGE", "INCOME", "HOURS") for by in ("SEX", "JOB")] + [
            ("AGE", "INCOME"), ("AGE", "HOURS"), ("INCOME", "HOURS")]


def test_output_stays_inside_the_schema(runs):
    for r in runs:
        assert_inside_schema(r)


def test_a_gpu_release_is_charged_as_on_the_cpu_and_stays_inside_the_schema(runs):
    """Where a GPU is present: a release projected on it spends the same budget in as many steps as on the CPU
    (which marginals the rounds pick may differ: the float arithmetic does) and writes schema-valid records."""
    gpu_or_skip()
    frame, params = data()
    on_gpu = release(frame, params, None, "rap", {**OPTIONS, "device": "gpu"}, seed=5, group_columns=())
    for cpu, gpu in zip(runs, on_gpu):
        assert len(gpu.ledger.charges) == len(cpu.ledger.charges)
        assert sum(c.rho for c in gpu.ledger.charges) == pytest.approx(cpu.ledger.budget, rel=1e-9)
        assert_inside_schema(gpu)


def assert_inside_schema(r) -> None:
    """Schema-valid records: the columns, ranges, precision and nulls the schema gives, raw values."""
    t = r.table
    assert len(t) > 0 and list(t.columns) == ["AGE", "INCOME", "HOURS", "SEX", "JOB", "LABEL"]
    age = t["AGE"].astype(float)
    assert age.between(18, 79).all() and (age == age.round()).all()
    income = t["INCOME"].astype(float)
    assert income.isna().any() and income.dropna().between(0, 300000).all()
    assert np.allclose(income.dropna(), income.dropna().round(2))
    hours = t["HOURS"].astype(float)
    assert hours.notna().all() and hours.between(0, 60).all() and np.allclose(hours, hours.round(1))
    assert set(t["SEX"].astype(str)) <= {"F", "M"} and set(t["LABEL"].astype(str)) <= {"no", "yes"}
    assert len(np.unique(hours)) > 50  # raw values, not a few bins


def test_seeded_runs_repeat_exactly(runs):
    frame, params = data()
    again = release(frame, params, None, "rap", OPTIONS, seed=5, group_columns=())
    for a, b in zip(runs, again):
        pd.testing.assert_frame_equal(a.table, b.table)


def test_without_numeric_columns_each_column_is_measured_alone_before_the_rounds():
    frame, params = data()
    categorical = ["SEX", "JOB", "LABEL"]
    params = dict(params, runs=params["runs"][:1], schema={c: params["schema"][c] for c in categorical})
    (run,) = release(frame[categorical], params, None, "rap", OPTIONS, seed=2, group_columns=())
    steps = [c.step for c in run.ledger.charges]
    assert steps[:3] == ["1-way marginal SEX", "1-way marginal JOB", "1-way marginal LABEL"]
    assert steps[3].startswith("rap round 1")
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)


def test_a_round_never_measures_two_marginals_that_nest():
    """Four categorical columns, 3 picks a round: after each pick the marginals nested in or around it leave
    the round's candidates, so no two of a round's measurements nest (some always remain here), and the
    ledger still sums to the budget, one selection per pick."""
    rng = np.random.default_rng(3)
    columns = ["A", "B", "C", "D"]
    frame = pd.DataFrame({c: rng.choice(["x", "y", "z"], N) for c in columns})
    params = {"runs": [{"epsilon": 1.0, "delta": 1e-6, "max_records": 1000, "max_records_per_individual": 1}],
              "schema": {c: {"dtype": "str", "values": ["x", "y", "z"]} for c in columns}}
    (run,) = release(frame, params, None, "rap", {"rounds": 2, "per_round": 3, "rows": 100, "steps": 5}, seed=4,
                     group_columns=())
    steps = [c.step for c in run.ledger.charges]
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)
    assert [s.split(":")[0] for s in steps[4:7]] == [f"rap round 1, query {j} of 3" for j in (1, 2, 3)]
    for start in (7, 13):
        measured = [set(s.split(" marginal ")[1].split(" × ")) for s in steps[start:start + 3]]
        assert not any(a <= b or b <= a for a, b in itertools.combinations(measured, 2)), steps[start:start + 3]


def test_the_exchange_keeps_measured_marginals_and_drops_unmeasured_associations():
    layout = rap._Layout(None, ["G", "A", "B", "C"], [], ("G",), [])
    rng = np.random.default_rng(0)
    g, a = rng.integers(0, 2, 4000), rng.integers(0, 3, 4000)
    codes = [g, a, (a + (rng.random(4000) < 0.1)) % 3, a.copy()]  # B and C copy A; only A × B is measured
    fits = [Target(relaxed.RelaxedQuery(by), np.zeros(1), weight=1.0) for by in [(1, 2), (3,), (0, 3)]]
    out = rap._exchange_unmeasured(layout, [c.copy() for c in codes], fits, np.random.default_rng(1))
    counts = lambda cs, cols: np.unique(np.column_stack([cs[j] for j in cols]), axis=0, return_counts=True)[1]
    for cols in [(1, 2), (0, 3), (0,)]:
        assert np.array_equal(counts(out, cols), counts(codes, cols))
    assert np.mean(out[1] == out[3]) < 0.5 and np.mean(out[1] == out[2]) > 0.85  # A × C was never measured


def test_the_exchange_moves_no_record_into_an_edit_rule_box():
    domain = Domain(("G", "A", "B", "C"), (2, 3, 3, 3), {})
    layout = rap._Layout(domain, list(domain.names), [], ("G",), [])
    rng = np.random.default_rng(0)
    g, a = rng.integers(0, 2, 4000), rng.integers(0, 3, 4000)
    codes = [g, a, rng.integers(0, 3, 4000), a.copy()]
    box = Box((1, 3), (np.array([True, False, False]), np.array([False, True, True])), 3, "A = 0 => C = 0")
    assert not box.contains(np.column_stack(codes)).any()
    fits = [Target(relaxed.RelaxedQuery(by), np.zeros(1), weight=1.0) for by in [(1, 2), (3,)]]
    out = rap._exchange_unmeasured(layout, [c.copy() for c in codes], fits, np.random.default_rng(1), Boxes((box,)))
    assert not box.contains(np.column_stack(out)).any()


def test_groups_get_their_noisy_sizes():
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    (run,) = release(frame, params, None, "rap", OPTIONS, seed=1, group_columns=("SEX",))
    assert run.ledger.charges[0].step.startswith("group counts")
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)
    assert set(run.table["SEX"].astype(str)) == {"F", "M"}


def test_each_column_is_measured_per_group_and_the_records_follow():
    frame, params = data()
    rng = np.random.default_rng(3)
    female = np.where(frame["JOB"] == "a", 0.9, np.where(frame["JOB"] == "b", 0.1, 0.5))
    frame["SEX"] = np.where(rng.random(N) < female, "F", "M")
    params = dict(params, runs=[dict(params["runs"][0], epsilon=20.0)])
    (run,) = release(frame, params, None, "rap", OPTIONS, seed=4, group_columns=("JOB",))
    steps = [c.step for c in run.ledger.charges]
    # group counts, 1-way answers by LABEL, the pair SEX × LABEL, mixed marginals by SEX and the 3 numeric
    # pairs, then each column per group; the rounds choose none of those again (only the records fit them,
    # so the relaxed table stays off)
    assert steps[11:16] == ["2-way marginal JOB × SEX", "2-way marginal JOB × LABEL"] + [
        f"interval counts of {c} (9 intervals + null) by JOB" for c in ("AGE", "INCOME", "HOURS")]
    assert steps[16].startswith("rap round 1") and not [s for s in steps[16:] if "JOB" in s]
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)
    share = run.table.assign(F=run.table["SEX"].astype(str) == "F").groupby(run.table["JOB"].astype(str))["F"].mean()
    assert share["a"] > 0.75 and share["b"] < 0.25


@pytest.mark.parametrize("extra, message", [
    (["--device", "gpu"], "--device gpu"),
    (["--target", "AGE"], "--target AGE must be a categorical column"),
    (["--target", "NOPE"], "--target NOPE: not a schema column"),
])
def test_bad_rap_options_are_one_line_and_write_nothing(tmp_path, capsys, extra, message):
    frame, params = data()
    (tmp_path / "p.json").write_text(json.dumps(params))
    frame.to_csv(tmp_path / "private.csv", index=False)
    out = tmp_path / "out.csv"
    if extra[:2] == ["--device", "gpu"]:
        try:
            relaxed.array_module("gpu")
            pytest.skip("a GPU is present")
        except relaxed.DeviceUnavailable:
            pass
    code = main(["--params", str(tmp_path / "p.json"), "--private", str(tmp_path / "private.csv"),
                 "--output", str(out), "--method", "rap"] + extra)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "private.csv"]
