"""Every estimator takes the one measurement record (lib/estimation/measurement.py Target) and, on a tiny domain with
noise-free measurements, gives what a brute-force computation over the whole domain gives."""
import itertools

import cvxpy as cp
import numpy as np

from dpsyn.lib.estimation import relaxed
from dpsyn.lib.estimation.consistency import make_consistent
from dpsyn.lib.estimation.gum import GumOptions, gum
from dpsyn.lib.records.marginals import count_marginal
from dpsyn.lib.estimation.maxent import fit, junction_tree
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.estimation.raking import rake

SIZES = (2, 3, 2)
RNG = np.random.default_rng(11)
TRUTH = RNG.dirichlet(np.ones(int(np.prod(SIZES)))).reshape(SIZES)  # a joint distribution on 12 cells


def marginal(joint: np.ndarray, cols) -> np.ndarray:
    return joint.sum(axis=tuple(i for i in range(joint.ndim) if i not in cols))


def brute_force_max_entropy(targets: list[tuple[tuple[int, ...], np.ndarray]]) -> np.ndarray:
    """The largest-entropy distribution on the whole domain with the targets' marginals: iterative
    proportional fitting on the full joint table from the uniform one, to convergence."""
    joint = np.full(SIZES, 1.0 / np.prod(SIZES))
    for _ in range(5000):
        for cols, table in targets:
            current = marginal(joint, cols)
            shape = [SIZES[i] if i in cols else 1 for i in range(len(SIZES))]
            joint = joint * np.divide(table, current, out=np.zeros_like(table), where=current > 0).reshape(shape)
    return joint


def test_consistency_returns_noise_free_marginals_of_one_table_unchanged():
    names = ("A", "B", "C")
    sets = [(0, 1), (1, 2), (0,), (2,)]
    targets = [Target(tuple(names[i] for i in s), 1000 * marginal(TRUTH, s), 1.0) for s in sets]
    for t, out in zip(targets, make_consistent(targets)):
        np.testing.assert_allclose(out, t.noisy, atol=1e-6)


def test_consistency_of_inconsistent_marginals_agrees_with_the_weighted_mean_where_they_overlap():
    """Two 1-way answers of one column, sds 1 and 2: the brute-force best common answer is their
    inverse-variance mean, and both come out as it."""
    a, b = np.array([30.0, 70.0]), np.array([50.0, 50.0])
    out = make_consistent([Target(("A",), a, 1.0), Target(("A",), b, 2.0)])
    mean = (a / 1 + b / 4) / (1 / 1 + 1 / 4)
    for v in out:
        np.testing.assert_allclose(v, mean, atol=1e-6)


def test_gum_reaches_exact_integer_targets_from_any_start():
    n = 600
    counts = np.round(n * marginal(TRUTH, (0, 1)))
    counts[0, 0] += n - counts.sum()
    start = np.column_stack([np.random.default_rng(2).integers(0, s, n) for s in SIZES]).astype(np.int32)
    out = gum(start, SIZES, [Target((0, 1), counts)], np.random.default_rng(3), GumOptions(iterations=40))
    assert np.abs(count_marginal(out[:, [0, 1]], SIZES[:2]) - counts).max() <= 1


def test_the_maximum_entropy_fit_matches_the_brute_force_maximum_entropy_distribution():
    sets = [(0, 1), (1, 2)]
    targets = [(s, marginal(TRUTH, s)) for s in sets]
    tree = junction_tree(sets, range(len(SIZES)), SIZES)
    beliefs, settled = fit(tree, [Target(s, t) for s, t in targets], iterations=5000, tolerance=1e-14)
    expected = brute_force_max_entropy(targets)
    assert settled
    for clique, belief in zip(tree.cliques, beliefs):
        np.testing.assert_allclose(belief, marginal(expected, clique), atol=1e-6)


def test_raking_gives_the_brute_force_minimum_divergence_weights():
    """Raking's fixed point is the weighting closest to uniform (KL) with the 1-way targets: solved
    here directly with cvxpy over every record's weight."""
    records = np.array(list(itertools.product(range(2), range(3)))).repeat([3, 1, 2, 2, 1, 3], axis=0)
    targets = [Target((0,), np.array([0.3, 0.7])), Target((1,), np.array([0.5, 0.2, 0.3]))]
    weights = rake(records, targets, passes=2000)
    w = cp.Variable(len(records), nonneg=True)
    constraints = [cp.sum(w) == 1] + [
        cp.hstack([cp.sum(w[records[:, j] == v]) for v in range(len(t.noisy))]) == t.noisy / t.noisy.sum()
        for (j,), t in ((t.query, t) for t in targets)]
    cp.Problem(cp.Minimize(cp.sum(cp.rel_entr(w, np.full(len(records), 1 / len(records))))), constraints).solve()
    np.testing.assert_allclose(weights, w.value, atol=1e-5)


def test_the_relaxed_projection_reaches_noise_free_marginals():
    """A relaxed table of 400 rows projected onto the exact 2-way marginal of A, B and 1-way of C: its
    answers, summed by brute force over its rows' probabilities, are the truth's."""
    rng = np.random.default_rng(5)
    n = 400
    table = relaxed.new_table(np, [rng.dirichlet(np.ones(s), n) for s in SIZES], np.zeros((n, 0)),
                              np.zeros((n, 0)), ())
    queries = [relaxed.RelaxedQuery((0, 1)), relaxed.RelaxedQuery((2,))]
    truth = [marginal(TRUTH, (0, 1)).reshape(-1, 1), marginal(TRUTH, (2,)).reshape(-1, 1)]
    relaxed.project(table, [Target(q, t) for q, t in zip(queries, truth)], relaxed.Schedule(steps=300))
    probs = [np.asarray(p, dtype=np.float64) for p in table.probabilities()]
    pair = np.einsum("ni,nj->ij", probs[0], probs[1]) / n  # brute force: the mean over rows of their products
    np.testing.assert_allclose(pair, truth[0].reshape(SIZES[:2]), atol=0.01)
    np.testing.assert_allclose(probs[2].mean(axis=0), truth[1].ravel(), atol=0.01)
