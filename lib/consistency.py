"""Make overlapping noisy marginals agree, then non-negative (PrivSyn-style post-processing).

Each round: (1) one common total, the inverse-variance weighted mean of the
marginals' totals, spread evenly over each marginal's cells; (2) for every
attribute subset shared by two or more marginals (smallest first), the
inverse-variance weighted mean of their projections onto it, each marginal's
difference spread evenly over the cells that project there; (3) Norm-Sub: the
negative cells set to zero and the positive ones shifted down by one common
amount so the total is kept (this is the Euclidean projection onto the
non-negative vectors with that total, computed exactly).  A few rounds bring the
marginals close; a final step fixes, for every shared subset, the weighted
consensus (made non-negative) and scales each marginal to it by iterative
proportional fitting, which keeps cells non-negative and makes the agreement
exact.  Post-processing: no privacy cost.
"""
from __future__ import annotations

import functools
import itertools

import numba
import numpy as np

from dpsyn.lib.measurement import Target
from dpsyn.lib.tuning import T



def make_consistent(marginals: list[Target], rounds: int | None = None, tolerance: float | None = None,
                    fit_iterations: int | None = None) -> list[np.ndarray]:
    """Consistent, non-negative copies of ``marginals`` (lib/measurement.py Targets: ``query`` the
    marginal's attribute names, ``noisy`` its counts shaped by them, ``sigma`` its noise sd).

    Afterwards every marginal has the same total, no negative cell, and any two agree on
    every attribute subset they share to within ``tolerance`` × total (for shared subsets
    that do not nest inside one another, such as the single columns shared by 2-way
    marginals), unless the final fitting stops at ``fit_iterations`` sweeps first.
    Noise-free, consistent input is returned unchanged.
    """
    rounds = T.consistency_rounds if rounds is None else rounds  # defaults: the tuning table's, read now
    tolerance = T.consistency_tolerance if tolerance is None else tolerance
    fit_iterations = T.consistency_max_fit_iterations if fit_iterations is None else fit_iterations
    attrs = [tuple(t.query) for t in marginals]
    values = [np.array(t.noisy, dtype=np.float64) for t in marginals]
    sigmas = [max(float(t.sigma), 1e-12) for t in marginals]
    subsets = _shared_subsets(attrs)
    members = {s: [i for i, a in enumerate(attrs) if set(s) <= set(a)] for s in subsets}
    total = common_total(values, sigmas)
    for _ in range(rounds):
        values = [v + (total - v.sum()) / v.size for v in values]
        for subset in subsets:
            _agree_on(subset, members[subset], attrs, values, sigmas)
        values = [_project_to_simplex(v, total) for v in values]
    consensus = {s: _project_to_simplex(_consensus(_projections(s, members[s], attrs, values), members[s], values,
                                                   sigmas), total) for s in subsets}
    return [fit_to_margins(v, a, {s: t for s, t in consensus.items() if set(s) <= set(a)}, tolerance * total,
                           fit_iterations) for v, a in zip(values, attrs)]


def _shared_subsets(attrs: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    shared = set()
    for a, b in itertools.combinations(attrs, 2):
        common = tuple(x for x in a if x in b)
        if common:
            shared.add(tuple(sorted(common)))
    return sorted(shared, key=lambda s: (len(s), s))


def common_total(values, sigmas) -> float:
    """Inverse-variance weighted mean of the totals of noisy count vectors (at least 1)."""
    weights = np.array([1.0 / (v.size * s * s) for v, s in zip(values, sigmas)])
    totals = np.array([v.sum() for v in values])
    return max(float(weights @ totals / weights.sum()), 1.0)


@functools.lru_cache(maxsize=65536)
def _layout(attrs: tuple, subset: tuple, ndim: int):
    """Axes to sum out to project onto ``subset``, the transpose putting the result in subset
    order, and the shape that broadcasts a subset-ordered array back over ``attrs``."""
    keep = [attrs.index(x) for x in subset]
    other = tuple(i for i in range(ndim) if i not in keep)
    perm = tuple(np.argsort(np.argsort(keep)))  # subset position -> rank among kept axes
    order = tuple(int(i) for i in np.argsort(keep))
    return other, tuple(int(p) for p in perm), order, keep


def _projection(values: np.ndarray, attrs: tuple[str, ...], subset: tuple[str, ...]) -> np.ndarray:
    other, perm, _, _ = _layout(attrs, subset, values.ndim)
    summed = values.sum(axis=other) if other else values
    return np.transpose(summed, perm)


def _projections(subset, members, attrs, values) -> list[np.ndarray]:
    """The projections onto ``subset`` of the marginals ``members`` (the indices of those over a superset of it)."""
    return [_projection(values[i], attrs[i], subset) for i in members]


def _consensus(projections, members, values, sigmas) -> np.ndarray:
    """Inverse-variance weighted mean of the ``projections`` (``_projections``) of the marginals ``members``."""
    num, den = 0.0, 0.0
    for p, i in zip(projections, members):
        w = p.size / (sigmas[i] * sigmas[i] * values[i].size)
        num, den = num + w * p, den + w
    return num / den


def _broadcast(diff: np.ndarray, attrs: tuple[str, ...], subset: tuple[str, ...], ndim: int) -> np.ndarray:
    """``diff`` (axes in subset order) reshaped to broadcast over a marginal over ``attrs``."""
    _, _, order, keep = _layout(attrs, subset, ndim)
    shape = [1] * ndim
    for axis in keep:
        shape[axis] = diff.shape[subset.index(attrs[axis])]
    return np.transpose(diff, order).reshape(shape)


def _agree_on(subset, members, attrs, values, sigmas) -> None:
    if len(members) < 2:
        return
    projections = _projections(subset, members, attrs, values)
    target = _consensus(projections, members, values, sigmas)
    for i, p in zip(members, projections):
        values[i] += _broadcast((target - p) * (p.size / values[i].size), attrs[i], subset, values[i].ndim)


def fit_to_margins(v: np.ndarray, attrs: tuple, targets: dict, tolerance: float,
                   max_iterations: int | None = None) -> np.ndarray:
    """Iterative proportional fitting of non-negative ``v`` (axes named by ``attrs``) to each
    subset's target projection (``targets``: subset of attrs -> array), until every projection
    is within ``tolerance`` or ``max_iterations`` sweeps are done (``tolerance`` 0: exactly
    ``max_iterations`` sweeps, with no convergence check).

    Input that already fits is returned as it is; otherwise every cell first gets
    consistency_pseudo_share of the mean cell, so that a slice with no mass can take its target's.
    """
    max_iterations = T.consistency_max_fit_iterations if max_iterations is None else max_iterations
    if not targets:  # nothing to fit: as below, input counts as fitting only where a tolerance is asked
        return v if tolerance > 0 else v + T.consistency_pseudo_share * v.sum() / v.size
    # each cell's cell in every target (flat, the target's own axis order), and the targets end to end
    cells = np.empty((len(targets), v.size), dtype=np.int64)
    for row, subset in zip(cells, targets):
        index = np.zeros(v.shape, dtype=np.int64)
        stride = 1
        for name in reversed(subset):
            axis = attrs.index(name)
            index += np.arange(v.shape[axis]).reshape([-1 if a == axis else 1 for a in range(v.ndim)]) * stride
            stride *= v.shape[axis]
        row[:] = index.ravel()
    flat = [np.asarray(t, dtype=np.float64).ravel() for t in targets.values()]
    ends, flat = np.cumsum([0] + [t.size for t in flat]), np.concatenate(flat)
    fitted = np.array(v, dtype=np.float64).ravel()  # a copy: ``v`` is left as it is
    if tolerance > 0 and _worst(fitted, cells, flat, ends) <= tolerance:
        return v
    fitted += T.consistency_pseudo_share * fitted.sum() / fitted.size  # every cell positive: IPF converges
    _ipf(fitted, cells, flat, ends, float(tolerance), int(max_iterations))
    return fitted.reshape(v.shape)


@numba.njit(cache=True)
def _project(v, cells, size):
    """The sums of ``v`` over the cells of one target (``cells``: each of v's cells' cell there)."""
    p = np.zeros(size)
    for c in range(v.size):
        p[cells[c]] += v[c]
    return p


@numba.njit(cache=True)
def _worst(v, cells, targets, ends):
    """The largest distance of a projection of ``v`` from its target."""
    worst = 0.0
    for t in range(cells.shape[0]):
        p = _project(v, cells[t], ends[t + 1] - ends[t])
        worst = max(worst, np.abs(p - targets[ends[t]:ends[t + 1]]).max())
    return worst


@numba.njit(cache=True)
def _ipf(v, cells, targets, ends, tolerance, max_iterations):
    """``fit_to_margins``'s sweeps on flat ``v``, in place: each target in turn scales the cells it sums
    (a cell whose sum is 0 goes to 0)."""
    for _ in range(max_iterations):
        worst = 0.0
        for t in range(cells.shape[0]):
            target = targets[ends[t]:ends[t + 1]]
            p = _project(v, cells[t], target.size)
            if tolerance > 0:
                worst = max(worst, np.abs(p - target).max())
            ratio = np.zeros(target.size)
            for c in range(target.size):
                if p[c] > 0:
                    ratio[c] = target[c] / p[c]
            for c in range(v.size):
                v[c] *= ratio[cells[t, c]]
        if tolerance > 0 and worst <= tolerance:
            break


def _project_to_simplex(v: np.ndarray, total: float) -> np.ndarray:
    flat = v.ravel()
    if (flat >= 0).all() and abs(flat.sum() - total) <= 1e-12 * max(total, 1.0):
        return v
    u = np.sort(flat)[::-1]
    cumulative = np.cumsum(u) - total
    index = np.arange(1, len(u) + 1)
    rho = np.flatnonzero(u - cumulative / index > 0)[-1]
    shift = cumulative[rho] / (rho + 1)
    return np.maximum(v - shift, 0.0)
