"""A maximum-entropy estimate from noisy marginals, on a junction tree, and records drawn from it.

Post-processing only: fits and samples from marginals already released, never private data.  This
is the estimation step of private-pgm (McKenna et al. 2019): a graphical model over the junction
tree of the measured column sets, its log-potentials moved by mirror descent from the uniform
distribution toward the targets (squared error, each target weighted), accelerated by Nesterov's
momentum with restarts (O'Donoghue and Candès 2015).  Where the targets admit a distribution, it
converges to the one of largest entropy among those that have them: it adds no association the
measurements do not show.  Stopped early, it stays short of noisy targets, nearer the uniform
(tuning entry adaptive_max_entropy_tolerance).

* :func:`junction_tree` triangulates the column sets' graph (greedy, least clique cells first) and
  joins the maximal cliques into a tree; its ``cells`` say what the beliefs take in memory.
* :func:`calibrate` gives every clique's marginal of the model (message passing up and down the tree).
* :func:`fit` returns the calibrated beliefs of the fitted model (one probability table a clique).
* :func:`draw` draws records from them, clique by clique from the root, each clique's new columns
  given its separator by a systematic draw (lib/estimation/raking.py: every clique's table met to within a
  record a cell), as private-pgm's ``synthetic_data`` does; columns set beforehand
  (the group of each record, say) are kept, and the rest drawn given them.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dpsyn.lib.estimation.measurement import MarginalTarget
from dpsyn.lib.estimation.raking import systematic_draw


@dataclass(frozen=True)
class JunctionTree:
    """``cliques[i]``: sorted columns; ``parent[i]``: the clique i hangs from (-1: the root, clique 0);
    ``order``: every clique after its parent; ``separators[i]``: sorted columns clique i shares with its
    parent."""

    cliques: tuple[tuple[int, ...], ...]
    parent: tuple[int, ...]
    order: tuple[int, ...]
    separators: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]

    @cached_property
    def children(self) -> dict[int, list[int]]:
        """The cliques hanging from each clique, in ``order``."""
        out: dict[int, list[int]] = {i: [] for i in range(len(self.cliques))}
        for i in self.order[1:]:
            out[self.parent[i]].append(i)
        return out

    @property
    def cells(self) -> int:
        """Cells of every clique's table together."""
        return sum(math.prod(self.sizes[c] for c in clique) for clique in self.cliques)

    def host(self, columns) -> int:
        """The smallest clique holding every one of ``columns``."""
        want = set(columns)
        fits = [i for i, c in enumerate(self.cliques) if want <= set(c)]
        return min(fits, key=lambda i: math.prod(self.sizes[c] for c in self.cliques[i]))


def maximal_cliques(column_sets, columns, sizes) -> list[tuple[int, ...]]:
    """The maximal cliques of the graph joining the columns of each of ``column_sets`` (over ``columns``),
    triangulated by eliminating at each step the column whose clique has fewest cells.  A column in no set is
    a clique of its own."""
    adjacent: dict[int, set[int]] = {c: set() for c in columns}
    for cols in column_sets:
        for a, b in itertools.combinations(set(cols), 2):
            adjacent[a].add(b)
            adjacent[b].add(a)
    left, found = set(columns), []

    def cells(c):  # of the clique eliminating c now would make
        return math.prod(sizes[u] for u in adjacent[c] & left) * sizes[c]

    cost = {c: cells(c) for c in left}
    while left:
        _, v = min((cost[c], c) for c in left)  # fewest cells, then the lowest column
        around = adjacent[v] & left
        found.append(tuple(sorted(around | {v})))
        for a, b in itertools.combinations(around, 2):
            adjacent[a].add(b)
            adjacent[b].add(a)
        left.remove(v)
        for c in around:  # only v's neighbours lose v or gain fill: every other cost stands
            cost[c] = cells(c)
    # an elimination order's clique of v holds v and no column eliminated before it, so it can sit only inside
    # a clique found earlier, and never equals one
    sets = [frozenset(c) for c in found]
    return [c for i, c in enumerate(found) if not any(sets[i] < sets[j] for j in range(i))]


def tree_cells(column_sets, columns, sizes) -> int:
    """The cells the junction tree of ``junction_tree(column_sets, columns, sizes)`` takes (its cliques')."""
    return sum(math.prod(int(sizes[u]) for u in c) for c in maximal_cliques(column_sets, columns, sizes))


def junction_tree(column_sets, columns, sizes, root=()) -> JunctionTree:
    """A junction tree over ``columns`` whose cliques hold every set of ``column_sets``: the maximal cliques
    of ``maximal_cliques`` joined by a maximum-weight spanning tree (weight: columns shared).  The root is the
    largest clique holding every column of ``root`` (one of ``column_sets`` must)."""
    sizes = tuple(int(s) for s in sizes)
    cliques = maximal_cliques(column_sets, columns, sizes)
    cliques.sort(key=lambda c: (not set(root) <= set(c), -math.prod(sizes[u] for u in c)))
    parent, order, joined = [-1] * len(cliques), [0], {0}
    while len(joined) < len(cliques):  # Prim: the heaviest edge from the tree to a clique outside it
        _, _, child, into = max((len(set(cliques[i]) & set(cliques[j])), -j, j, i) for i in joined
                                for j in range(len(cliques)) if j not in joined)
        parent[child] = into
        order.append(child)
        joined.add(child)
    separators = tuple(tuple(sorted(set(c) & set(cliques[p]))) if p >= 0 else () for c, p in zip(cliques, parent))
    return JunctionTree(tuple(cliques), tuple(parent), tuple(order), separators, sizes)


def _shape(tree: JunctionTree, cols) -> tuple[int, ...]:
    return tuple(tree.sizes[c] for c in cols)


def _marginal(belief: np.ndarray, clique, cols) -> np.ndarray:
    """``belief`` over ``clique`` summed onto ``cols`` (sorted, within the clique)."""
    drop = tuple(i for i, c in enumerate(clique) if c not in cols)
    return belief.sum(axis=drop) if drop else belief


def _spread(table: np.ndarray, cols, clique) -> np.ndarray:
    """``table`` over ``cols`` (sorted, within the clique) shaped to broadcast over ``clique``."""
    return table.reshape(tuple(table.shape[cols.index(c)] if c in cols else 1 for c in clique))


def calibrate(tree: JunctionTree, potentials: list[np.ndarray]) -> list[np.ndarray]:
    """Every clique's marginal (a probability table) of the distribution proportional to the product of the
    cliques' ``potentials`` (log scale): messages passed up the tree to the root and back down."""
    children = tree.children
    up: dict[int, np.ndarray] = {}
    for i in reversed(tree.order[1:]):
        inside = potentials[i] + sum((_spread(up[c], tree.separators[c], tree.cliques[i]) for c in children[i]),
                                     np.zeros(()))
        up[i] = _log_marginal(inside, tree.cliques[i], tree.separators[i])
    beliefs: list[np.ndarray] = [np.zeros(())] * len(tree.cliques)  # each set in the pass down
    down: dict[int, np.ndarray] = {}
    for i in tree.order:
        clique = tree.cliques[i]
        log_belief = potentials[i] + sum((_spread(up[c], tree.separators[c], clique) for c in children[i]),
                                         np.zeros(()))
        if tree.parent[i] >= 0:
            log_belief = log_belief + _spread(down[i], tree.separators[i], clique)
        for c in children[i]:
            down[c] = _log_marginal(log_belief - _spread(up[c], tree.separators[c], clique), clique,
                                    tree.separators[c])
        belief = np.exp(log_belief - log_belief.max())
        beliefs[i] = belief / belief.sum()
    return beliefs


def _log_marginal(log_table: np.ndarray, clique, cols) -> np.ndarray:
    """log of the sum of exp(``log_table``) over ``clique``'s columns outside ``cols``."""
    drop = tuple(i for i, c in enumerate(clique) if c not in cols)
    if not drop:
        return log_table
    top = log_table.max(axis=drop, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(log_table - top).sum(axis=drop)) + top.squeeze(axis=drop)


def fit(tree: JunctionTree, targets: list[MarginalTarget], iterations: int = 1000,
        tolerance: float = 1e-7) -> tuple[list[np.ndarray], bool]:
    """Calibrated beliefs (a probability table per clique, axes in its column order) of the model fitted to
    the targets, and whether the fit settled (False: ``iterations`` ran out).  ``targets`` are
    lib/estimation/measurement.py Targets: ``query`` the columns, ``noisy`` a table shaped by them in that order (its
    total need not be 1), ``weight``; the loss is the sum
    over targets of weight times the squared distance between the distribution's marginal and the target's
    proportions.  Mirror descent on the cliques' log-potentials from the uniform distribution
    (private-pgm's estimator, with an Armijo line search: each step a quarter longer than the last, halved until
    it gains enough), each step taken from the last iterate pushed on along the last move (Nesterov's momentum,
    k / (k + 3) after k steps since the last restart) and the momentum dropped (a restart) whenever a step
    would raise the loss or gains under ``tolerance`` of the start loss, until a step from the iterate itself
    (no momentum) gains under that or ``iterations`` steps are done.  Run to convergence, targets that some
    distribution has are met, by the one of largest entropy; where noise leaves no distribution with every
    target's marginal (a cycle of pairs), the loss is least, each target missed the less the larger its
    weight."""
    parts = []
    for t in targets:
        key = tuple(sorted(t.query))
        table = np.asarray(t.noisy, dtype=np.float64).transpose([list(t.query).index(c) for c in key])
        parts.append((tree.host(key), key, table / max(table.sum(), 1e-300), float(t.weight)))
    top = max(w for *_, w in parts)
    parts = [(h, k, t, w / top) for h, k, t, w in parts]

    def loss_and_gradient(beliefs):
        loss, gradient = 0.0, [np.zeros(b.shape) for b in beliefs]
        for host, key, table, weight in parts:
            diff = _marginal(beliefs[host], tree.cliques[host], key) - table
            loss += weight * float((diff * diff).sum())
            gradient[host] = gradient[host] + _spread(2 * weight * diff, key, tree.cliques[host])
        return loss, gradient

    here = _Point.at(tree, [np.zeros(_shape(tree, c)) for c in tree.cliques], loss_and_gradient)
    start, step, previous, since_restart = here.loss, 1.0, here.potentials, 0
    for _ in range(iterations):
        beta = since_restart / (since_restart + 3)
        ahead = here if beta == 0 else _Point.at(
            tree, [p + beta * (p - q) for p, q in zip(here.potentials, previous)], loss_and_gradient)
        moved, tried = _descend(tree, ahead, step, loss_and_gradient)
        step = step if moved is None else tried  # a momentum point no step leaves keeps the last step size
        if moved is None or moved.loss > here.loss:
            if beta == 0:
                return here.beliefs, True  # no step from the iterate lowers the loss
            previous, since_restart = here.potentials, 0  # the momentum overshot: restart from the iterate
            continue
        improved = here.loss - moved.loss
        previous, here, since_restart = here.potentials, moved, since_restart + 1
        if improved <= tolerance * start:
            if beta == 0:
                return here.beliefs, True  # a plain step gains too little: settled
            previous, since_restart = here.potentials, 0  # a pushed step may gain little short of the end
    return here.beliefs, False


@dataclass(frozen=True)
class _Point:
    """Log-potentials with their calibrated beliefs, the loss there and its gradient (per clique)."""

    potentials: list
    beliefs: list
    loss: float
    gradient: list

    @classmethod
    def at(cls, tree: JunctionTree, potentials: list, loss_and_gradient) -> "_Point":
        beliefs = calibrate(tree, potentials)
        return cls(potentials, beliefs, *loss_and_gradient(beliefs))


def _descend(tree: JunctionTree, point: _Point, step: float, loss_and_gradient) -> tuple[_Point | None, float]:
    """One mirror-descent step from ``point`` and the step size it took: the last size a quarter larger, halved
    until the loss falls by at least half the step's first-order gain (Armijo); None where 30 halvings find
    no such step."""
    step *= 1.25
    for _ in range(30):
        trial = _Point.at(tree, [p - step * g for p, g in zip(point.potentials, point.gradient)], loss_and_gradient)
        gain = sum(float((g * (b - t)).sum()) for g, b, t in zip(point.gradient, point.beliefs, trial.beliefs))
        if point.loss - trial.loss >= 0.5 * gain:
            return trial, step
        step /= 2
    return None, step


def draw(tree: JunctionTree, beliefs: list[np.ndarray], records: np.ndarray, rng: np.random.Generator,
         given: tuple[int, ...] = ()) -> np.ndarray:
    """``records`` with every column of the tree but ``given`` (sorted columns of the root clique, already
    set) drawn from the calibrated ``beliefs``, clique by clique from the root: each clique's columns outside
    its separator (for the root, ``given``), among the records of each separator value, in rounded
    proportions of the clique's table given that value (its columns' own marginal where the table gives
    the value nothing).  Without ``given`` the root clique's cells come in rounded proportions of its table."""
    n = len(records)
    for i in tree.order:
        clique, sep = tree.cliques[i], given if tree.parent[i] < 0 else tree.separators[i]
        new = tuple(c for c in clique if c not in sep)
        if not new:
            continue
        table = beliefs[i].transpose([clique.index(c) for c in sep + new])
        table = table.reshape(math.prod(_shape(tree, sep)), math.prod(_shape(tree, new)))
        fallback = table.sum(axis=0)
        index = np.ravel_multi_index(tuple(records[:, c] for c in sep), _shape(tree, sep)) if sep else np.zeros(n, int)
        rows = np.argsort(index, kind="stable")
        values, starts = np.unique(index[rows], return_index=True)
        out = np.empty(n, dtype=np.int64)
        for value, block in zip(values, np.split(rows, starts[1:])):
            weights = table[value] if table[value].sum() > 0 else fallback
            out[block] = rng.permutation(systematic_draw(weights, len(block), rng))
        records[:, list(new)] = np.stack(np.unravel_index(out, _shape(tree, new)), axis=1)
    return records
