"""The maximum-entropy estimate on a junction tree (lib/estimation/maxent.py): tree, calibration, fit and draw."""
import numpy as np

import dpsyn.lib.estimation.maxent as maxent
from dpsyn.lib.estimation.maxent import calibrate, draw, fit, junction_tree, tree_cells
from dpsyn.lib.estimation.measurement import Target

SIZES = (3, 4, 2, 5, 3, 2)
SETS = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4), (4, 5), (1, 5)]  # two cycles: the graph needs fill-in


def _marginal(joint: np.ndarray, cols) -> np.ndarray:
    return joint.sum(axis=tuple(i for i in range(joint.ndim) if i not in cols))


def test_the_tree_holds_every_set_and_keeps_the_running_intersection_property():
    tree = junction_tree(SETS, range(len(SIZES)), SIZES)
    assert all(any(set(s) <= set(c) for c in tree.cliques) for s in SETS)
    assert sorted(tree.order) == list(range(len(tree.cliques))) and tree.parent[tree.order[0]] == -1
    for column in range(len(SIZES)):  # the cliques holding a column are connected in the tree
        holding = {i for i, c in enumerate(tree.cliques) if column in c}
        tops = [i for i in holding if tree.parent[i] not in holding]
        assert len(tops) == 1


def test_the_root_holds_the_columns_asked_for():
    tree = junction_tree(SETS, range(len(SIZES)), SIZES, root=(4, 5))
    assert {4, 5} <= set(tree.cliques[tree.order[0]])


def test_calibration_gives_the_marginals_of_the_product_of_potentials():
    rng = np.random.default_rng(1)
    tree = junction_tree(SETS, range(len(SIZES)), SIZES)
    potentials = [rng.normal(size=[SIZES[c] for c in clique]) for clique in tree.cliques]
    log_joint = np.zeros(SIZES)
    for clique, p in zip(tree.cliques, potentials):
        log_joint = log_joint + p.reshape([SIZES[c] if c in clique else 1 for c in range(len(SIZES))])
    joint = np.exp(log_joint - log_joint.max())
    joint /= joint.sum()
    for clique, belief in zip(tree.cliques, calibrate(tree, potentials)):
        np.testing.assert_allclose(belief, _marginal(joint, clique), atol=1e-12)


def test_the_fit_meets_marginals_that_some_distribution_has():
    rng = np.random.default_rng(2)
    truth = rng.dirichlet(np.full(int(np.prod(SIZES)), 0.5)).reshape(SIZES)
    targets = [Target(s, 1000 * _marginal(truth, s)) for s in SETS]
    tree = junction_tree(SETS, range(len(SIZES)), SIZES)
    beliefs, _ = fit(tree, targets, iterations=3000, tolerance=1e-12)
    for cols, table, *_ in targets:
        host = tree.host(cols)
        got = _marginal(beliefs[host], [tree.cliques[host].index(c) for c in cols])
        assert 0.5 * np.abs(got - table / 1000).sum() < 2e-3


def test_the_fit_of_a_cycle_of_pairs_is_the_maximum_entropy_distribution_with_them():
    """Brute force on a tiny domain: iterative proportional fitting of the whole joint from the uniform to the
    three pairs of a cycle converges to the distribution of largest entropy with those pairs; the fit (one
    clique over the three columns) settles on it within 100 steps (plain mirror descent, without the momentum,
    settles at about step 101 with private-pgm's doubling line search, 126 with this one)."""
    sizes, pairs = (3, 4, 2), [(0, 1), (1, 2), (0, 2)]
    truth = np.random.default_rng(4).dirichlet(np.full(24, 0.7)).reshape(sizes)
    brute = np.full(sizes, 1 / 24)
    for _ in range(5000):
        for pair in pairs:
            ratio = _marginal(truth, pair) / _marginal(brute, pair)
            brute = brute * np.expand_dims(ratio, [i for i in range(3) if i not in pair])
    tree = junction_tree(pairs, range(3), sizes)
    beliefs, settled = fit(tree, [Target(p, 500 * _marginal(truth, p)) for p in pairs], iterations=100,
                           tolerance=1e-14)
    assert settled and len(tree.cliques) == 1
    np.testing.assert_allclose(beliefs[0], brute, atol=1e-6)


def test_with_one_way_targets_alone_the_fit_is_their_product():
    rng = np.random.default_rng(3)
    ones = [rng.dirichlet(np.ones(s)) for s in SIZES[:3]]
    tree = junction_tree([(0, 1, 2)], range(3), SIZES[:3])  # one clique over all three columns
    beliefs, settled = fit(tree, [Target((j,), p) for j, p in enumerate(ones)], tolerance=1e-12)
    product = ones[0][:, None, None] * ones[1][None, :, None] * ones[2][None, None, :]
    assert settled
    np.testing.assert_allclose(beliefs[0], product, atol=1e-6)


def test_a_target_over_columns_out_of_order_is_read_in_its_own_order():
    table = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # column 1 (2 codes) by column 0 (3 codes)
    tree = junction_tree([(1, 0)], (0, 1), (3, 2))
    beliefs, _ = fit(tree, [Target((1, 0), table)], iterations=3000, tolerance=1e-14)
    np.testing.assert_allclose(beliefs[0], table.T / table.sum(), atol=1e-6)


def test_the_draw_meets_the_root_clique_to_a_record_a_cell_and_keeps_given_columns():
    rng = np.random.default_rng(5)
    truth = rng.dirichlet(np.ones(int(np.prod(SIZES)))).reshape(SIZES)
    targets = [Target(s, _marginal(truth, s)) for s in SETS]
    tree = junction_tree(SETS, range(len(SIZES)), SIZES)
    beliefs, _ = fit(tree, targets)
    n = 5000
    records = draw(tree, beliefs, np.zeros((n, len(SIZES) + 1), dtype=np.int32), rng)
    root = tree.cliques[tree.order[0]]
    counts = np.zeros([SIZES[c] for c in root])
    np.add.at(counts, tuple(records[:, c] for c in root), 1)
    assert np.all(np.abs(counts - n * beliefs[tree.order[0]]) < 1)
    assert np.all(records[:, -1] == 0)  # a column outside the tree stays 0
    for cols, table, *_ in targets:  # every measured pair within sampling error of its target
        got = np.zeros(table.shape)
        np.add.at(got, tuple(records[:, c] for c in cols), 1)
        assert 0.5 * np.abs(got / n - table).sum() < 0.03

    tree = junction_tree(SETS, range(len(SIZES)), SIZES, root=(4, 5))
    beliefs, _ = fit(tree, targets)
    given = np.zeros((n, len(SIZES)), dtype=np.int32)
    given[:, 4] = np.repeat([0, 1, 2], [1000, 1500, 2500])
    given[:, 5] = 1
    out = draw(tree, beliefs, given.copy(), rng, given=(4, 5))
    assert np.array_equal(out[:, [4, 5]], given[:, [4, 5]])
    assert all(out[:, c].max() < SIZES[c] for c in range(4))


def test_tree_cells_are_the_junction_trees_cells():
    sizes = (3, 4, 5, 2, 6)
    for sets in ([(0, 1), (1, 2), (2, 3)], [(0, 1), (1, 2), (2, 0), (3, 4)], [(0, 1, 2), (2, 3), (3, 4), (4, 0)], []):
        assert tree_cells(sets, range(5), sizes) == junction_tree(sets, range(5), sizes).cells


def test_a_momentum_point_no_step_leaves_does_not_shrink_the_next_step(monkeypatch):
    """Where every trial step from a momentum point fails (its loss not a number, as an overflowed push would
    give), the fit restarts from the iterate with the step size it had, and still reaches the targets."""
    sizes, pairs = (3, 4, 2), [(0, 1), (1, 2), (0, 2)]
    truth = np.random.default_rng(4).dirichlet(np.full(24, 0.7)).reshape(sizes)
    tree = junction_tree(pairs, range(3), sizes)
    targets = [Target(p, 500 * _marginal(truth, p)) for p in pairs]
    descend, calls = maxent._descend, []

    def failing_once(tree, point, step, loss_and_gradient):
        calls.append(step)
        if len(calls) == 2:  # the first step from a momentum point
            return descend(tree, point, step, lambda b: (float("nan"), loss_and_gradient(b)[1]))
        return descend(tree, point, step, loss_and_gradient)

    monkeypatch.setattr(maxent, "_descend", failing_once)
    beliefs, settled = fit(tree, targets, iterations=300, tolerance=1e-12)
    assert settled and len(calls) > 10 and calls[2] == calls[1]
    for pair in pairs:
        got = _marginal(beliefs[0], pair)
        assert 0.5 * np.abs(got - _marginal(truth, pair)).sum() < 1e-4


def test_a_fit_reports_settled_only_after_a_plain_step_gains_too_little(monkeypatch):
    """A step from a momentum point may gain little short of the end; the fit restarts there and stops only
    when a step from the iterate itself gains under the tolerance (noisy cycles of pairs, 20 seeds)."""
    descend, calls = maxent._descend, []

    def watched(tree, point, step, loss_and_gradient):
        moved, tried = descend(tree, point, step, loss_and_gradient)
        calls.append((point, moved))
        return moved, tried

    monkeypatch.setattr(maxent, "_descend", watched)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        sizes, pairs = tuple(int(s) for s in rng.integers(2, 5, 3)), [(0, 1), (1, 2), (0, 2)]
        truth = rng.dirichlet(np.full(int(np.prod(sizes)), 0.7)).reshape(sizes)
        targets = [Target(p, np.maximum(200 * _marginal(truth, p) + rng.normal(0, 3, _marginal(truth, p).shape), 0))
                   for p in pairs]
        calls.clear()
        _, settled = fit(junction_tree(pairs, range(3), sizes), targets)
        iterates = [calls[0][0]] + [moved for _, moved in calls[:-1]]  # every point a step returned; no momentum point
        assert settled and calls[-1][1] is not None and any(calls[-1][0] is i for i in iterates)
