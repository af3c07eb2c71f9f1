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

import itertools
import math

import numba
import numpy as np

from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.tuning import T


def make_consistent(marginals: list[Target[tuple[str, ...]]], rounds: int | None = None, tolerance: float | None = None,
                    fit_iterations: int | None = None) -> list[np.ndarray]:
    """Consistent, non-negative copies of ``marginals`` (lib/estimation/measurement.py Targets: ``query`` the
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
    total = common_total(values, sigmas)
    # every (shared subset, marginal over a superset of it) pair: the marginal's cells' cells in the subset's
    # projection, and its weight in their inverse-variance weighted mean
    pairs = [(s, i) for s in subsets for i, a in enumerate(attrs) if set(s) <= set(a)]
    shapes: dict[tuple, tuple[int, ...]] = {}  # each subset's projection's shape, from its first marginal
    for s, i in pairs:
        shapes.setdefault(s, tuple(values[i].shape[attrs[i].index(x)] for x in s))
    cells = [math.prod(shapes[s]) for s in subsets]
    flat = np.concatenate([v.ravel() for v in values]) if values else np.zeros(0)
    ends = np.cumsum([0] + [v.size for v in values]).astype(np.int64)
    maps = [_cell_map(attrs[i], values[i].shape, s) for s, i in pairs]
    order = {s: k for k, s in enumerate(subsets)}
    pair_subset = np.array([order[s] for s, _ in pairs], dtype=np.int64)
    pair_member = np.array([i for _, i in pairs], dtype=np.int64)
    weights = np.array([cells[order[s]] / (sigmas[i] * sigmas[i] * values[i].size) for s, i in pairs])
    consensus = _agree(flat, ends, pair_subset, pair_member, np.concatenate(maps) if maps else np.zeros(0, np.int64),
                       np.cumsum([0] + [m.size for m in maps]).astype(np.int64), np.array(cells, dtype=np.int64),
                       weights, float(total), int(rounds))
    starts = np.cumsum([0] + cells)
    targets = {s: consensus[starts[k]:starts[k + 1]].reshape(shapes[s]) for k, s in enumerate(subsets)}
    own: list[dict] = [{} for _ in attrs]  # each marginal's subsets' targets, in subset order (the pairs' order)
    for s, i in pairs:
        own[i][s] = targets[s]
    return [fit_to_margins(flat[ends[i]:ends[i + 1]].reshape(values[i].shape).copy(), a, own[i], tolerance * total,
                           fit_iterations) for i, a in enumerate(attrs)]


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


CELL_MAP_BYTES = 1 << 26  # cell maps kept for reuse (64 MiB); past it the kept ones are dropped
_cell_maps: dict = {}


def _cell_map(attrs: tuple, shape: tuple, subset: tuple) -> np.ndarray:
    """Each cell of a marginal over ``attrs`` (shape ``shape``, flat in C order): its cell in the projection
    onto ``subset`` (flat in C order of the subset's axes in the subset's order).  Kept for reuse (every
    adaptive round asks for the same ones) up to CELL_MAP_BYTES in all; read-only, as it is shared."""
    key = (attrs, shape, subset)
    if key in _cell_maps:
        return _cell_maps[key]
    index = np.zeros(shape, dtype=np.int64)
    stride = 1
    for name in reversed(subset):
        axis = attrs.index(name)
        index += np.arange(shape[axis]).reshape([-1 if a == axis else 1 for a in range(len(shape))]) * stride
        stride *= shape[axis]
    out = index.ravel()
    out.setflags(write=False)
    if sum(m.nbytes for m in _cell_maps.values()) + out.nbytes > CELL_MAP_BYTES:
        _cell_maps.clear()
    _cell_maps[key] = out
    return out


@numba.njit(cache=True)
def _agree(values, ends, pair_subset, pair_member, maps, map_ends, cells, weights, total, rounds):
    """``make_consistent``'s rounds on the marginals end to end in ``values`` (marginal i at ends[i]..ends[i + 1]),
    in place, then the weighted consensus of every subset made non-negative with sum ``total`` (returned, the
    subsets end to end).  Pair q (subset pair_subset[q], marginal pair_member[q]; the pairs grouped by subset)
    maps the marginal's cells to the subset's (maps[map_ends[q]:map_ends[q + 1]]) with weight weights[q]."""
    n_subsets = len(cells)
    first = np.zeros(n_subsets + 1, np.int64)  # pairs of subset k: first[k] .. first[k + 1]
    for q in range(len(pair_subset)):
        first[pair_subset[q] + 1] += 1
    first = np.cumsum(first)
    for _ in range(rounds):
        for i in range(len(ends) - 1):  # (1) one common total
            v = values[ends[i]:ends[i + 1]]
            v += (total - v.sum()) / v.size
        for k in range(n_subsets):  # (2) every shared subset: the weighted mean of the projections
            if first[k + 1] - first[k] < 2:
                continue
            projections = _subset_projections(values, ends, pair_member, maps, map_ends, first[k], first[k + 1],
                                              cells[k])
            target = _weighted_mean(projections, weights[first[k]:first[k + 1]])
            for q in range(first[k], first[k + 1]):
                v = values[ends[pair_member[q]]:ends[pair_member[q] + 1]]
                diff = (target - projections[q - first[k]]) * (cells[k] / v.size)
                cell_map = maps[map_ends[q]:map_ends[q + 1]]
                for c in range(v.size):
                    v[c] += diff[cell_map[c]]
        for i in range(len(ends) - 1):  # (3) non-negative, the total kept
            _to_simplex(values[ends[i]:ends[i + 1]], total)
    out = np.empty(cells.sum())
    at = 0
    for k in range(n_subsets):
        projections = _subset_projections(values, ends, pair_member, maps, map_ends, first[k], first[k + 1], cells[k])
        consensus = _weighted_mean(projections, weights[first[k]:first[k + 1]])
        _to_simplex(consensus, total)
        out[at:at + cells[k]] = consensus
        at += cells[k]
    return out


@numba.njit(cache=True)
def _subset_projections(values, ends, pair_member, maps, map_ends, q0, q1, size):
    """The projections (rows) of the marginals of pairs q0 .. q1 - 1 onto their subset of ``size`` cells."""
    out = np.zeros((q1 - q0, size))
    for q in range(q0, q1):
        v = values[ends[pair_member[q]]:ends[pair_member[q] + 1]]
        cell_map = maps[map_ends[q]:map_ends[q + 1]]
        for c in range(v.size):
            out[q - q0, cell_map[c]] += v[c]
    return out


@numba.njit(cache=True)
def _weighted_mean(rows, weights):
    """The mean of the ``rows``, row r weighted by weights[r]."""
    num = np.zeros(rows.shape[1])
    for r in range(rows.shape[0]):
        num += weights[r] * rows[r]
    return num / weights.sum()


@numba.njit(cache=True)
def _to_simplex(v, total):
    """``v`` (flat) made its Euclidean projection onto the non-negative vectors summing to ``total``, in place:
    the negative cells set to zero and the positive ones shifted down by one common amount."""
    if v.min() >= 0 and abs(v.sum() - total) <= 1e-12 * max(total, 1.0):
        return
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - total
    last = 0
    for j in range(u.size):
        if u[j] - cumulative[j] / (j + 1) > 0:
            last = j
    shift = cumulative[last] / (last + 1)
    for c in range(v.size):
        v[c] = max(v[c] - shift, 0.0)


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
    cells = np.stack([_cell_map(tuple(attrs), v.shape, tuple(subset)) for subset in targets])
    pieces = [np.asarray(t, dtype=np.float64).ravel() for t in targets.values()]
    ends, flat = np.cumsum([0] + [t.size for t in pieces]), np.concatenate(pieces)
    fitted = np.array(v, dtype=np.float64).ravel()  # a copy: ``v`` is left as it is
    if tolerance > 0 and _worst(fitted, cells, flat, ends) <= tolerance:
        return v
    fitted += T.consistency_pseudo_share * fitted.sum() / fitted.size  # every cell positive: IPF converges
    _ipf(fitted, cells, flat, ends, float(tolerance), int(max_iterations))
    return fitted.reshape(v.shape)


@numba.njit(cache=True)
def _project(v, cells, p):
    """``p`` made the sums of ``v`` over the cells of one target (``cells``: each of v's cells' cell there)."""
    p[:] = 0.0
    for c in range(v.size):
        p[cells[c]] += v[c]


@numba.njit(cache=True)
def _worst(v, cells, targets, ends):
    """The largest distance of a projection of ``v`` from its target."""
    worst = 0.0
    for t in range(cells.shape[0]):
        p = np.empty(ends[t + 1] - ends[t])
        _project(v, cells[t], p)
        worst = max(worst, np.abs(p - targets[ends[t]:ends[t + 1]]).max())
    return worst


@numba.njit(cache=True)
def _ipf(v, cells, targets, ends, tolerance, max_iterations):
    """``fit_to_margins``'s sweeps on flat ``v``, in place: each target in turn scales the cells it sums
    (a cell whose sum is 0 goes to 0)."""
    largest = 0
    for t in range(cells.shape[0]):
        largest = max(largest, ends[t + 1] - ends[t])
    p, ratio = np.empty(largest), np.empty(largest)  # one target's projection and scale factors
    for _ in range(max_iterations):
        worst = 0.0
        for t in range(cells.shape[0]):
            target = targets[ends[t]:ends[t + 1]]
            _project(v, cells[t], p[:target.size])
            for c in range(target.size):
                if tolerance > 0:
                    worst = max(worst, abs(p[c] - target[c]))
                ratio[c] = target[c] / p[c] if p[c] > 0 else 0.0
            for c in range(v.size):
                v[c] *= ratio[cells[t, c]]
        if tolerance > 0 and worst <= tolerance:
            break
