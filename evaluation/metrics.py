"""Accuracy metrics on integer-coded tables (evaluation only: reads real data, spends no budget).

Numbers computed here compare a release with the real data, so they are not
differentially private and must not be published as such.
"""
from __future__ import annotations

import itertools

import numpy as np

from dpsyn.lib.records.marginals import count_marginal

BIAS_THRESHOLD = 250
SPRINT2_PAIRS = 50
SPRINT2_SEED = 123456


def draw_pairs(columns: list[str], n_pairs: int = SPRINT2_PAIRS, seed: int = SPRINT2_SEED) -> list[tuple[str, str]]:
    """Sprint 2's pair draw: ``RandomState(seed).choice(sorted columns, 2, replace=False)`` n_pairs times."""
    rs = np.random.RandomState(seed)
    cols = sorted(columns)
    return [tuple(rs.choice(cols, size=2, replace=False)) for _ in range(n_pairs)]


def k_marginal_score(real: np.ndarray, synth: np.ndarray, sizes: tuple[int, ...], group_idx: list[int],
                     pairs: list[tuple[int, int]]) -> float:
    """Sprint-2 style score in [0, 1000] of two coded tables (n × d), groups = joint ``group_idx`` codes.

    Per group present in either table: mean over ``pairs`` of the L1 distance between the
    normalised pair histograms (2.0 if one side has no rows; 2.0 if the row counts differ
    by BIAS_THRESHOLD or more); score = 1000 * (2 - mean over groups) / 2.
    """
    group_shape = tuple(sizes[j] for j in group_idx)
    gr = np.ravel_multi_index(real[:, group_idx].T, group_shape) if group_idx else np.zeros(len(real), int)
    gs = np.ravel_multi_index(synth[:, group_idx].T, group_shape) if group_idx else np.zeros(len(synth), int)
    n_groups = int(np.prod(group_shape)) if group_idx else 1
    rows_r = np.bincount(gr, minlength=n_groups)
    rows_s = np.bincount(gs, minlength=n_groups)
    present = np.flatnonzero((rows_r > 0) | (rows_s > 0))
    dist = np.zeros(n_groups)
    for a, b in pairs:
        shape = (n_groups, sizes[a], sizes[b])
        hr = count_marginal(np.column_stack([gr, real[:, a], real[:, b]]), shape).reshape(n_groups, -1)
        hs = count_marginal(np.column_stack([gs, synth[:, a], synth[:, b]]), shape).reshape(n_groups, -1)
        pr = hr / np.maximum(rows_r, 1)[:, None]
        ps = hs / np.maximum(rows_s, 1)[:, None]
        dist += np.abs(pr - ps).sum(axis=1)
    dist /= len(pairs)
    dist[(rows_r == 0) | (rows_s == 0) | (np.abs(rows_r - rows_s) >= BIAS_THRESHOLD)] = 2.0
    return float(1000 * (2 - dist[present].mean()) / 2)


def marginal_tvd(real: np.ndarray, synth: np.ndarray, sizes: tuple[int, ...], cols: tuple[int, ...]) -> float:
    """Total variation distance (0 identical, 1 disjoint) between the normalised marginals over ``cols``;
    1.0 when exactly one table is empty."""
    shape = tuple(sizes[j] for j in cols)
    if len(real) == 0 or len(synth) == 0:
        return 0.0 if len(real) == len(synth) else 1.0
    pr = count_marginal(real[:, list(cols)], shape) / len(real)
    ps = count_marginal(synth[:, list(cols)], shape) / len(synth)
    return float(0.5 * np.abs(pr - ps).sum())


def mean_tvd(real: np.ndarray, synth: np.ndarray, sizes: tuple[int, ...], way: int = 2,
             columns: list[int] | None = None) -> float:
    """Mean total variation distance over all ``way``-way marginals of ``columns`` (default all)."""
    columns = list(range(real.shape[1])) if columns is None else columns
    return float(np.mean([marginal_tvd(real, synth, sizes, cols) for cols in itertools.combinations(columns, way)]))


def workload_subsets(columns: list[int], three_way: int, seed: int) -> dict[str, list[tuple[int, ...]]]:
    """The workload: all 1-way and 2-way subsets of ``columns`` and ``three_way`` distinct 3-way
    subsets drawn with ``RandomState(seed)`` (all of them when there are fewer)."""
    triples: list[tuple[int, ...]] = list(itertools.combinations(columns, 3))
    if len(triples) > three_way:
        picked = np.random.RandomState(seed).choice(len(triples), size=three_way, replace=False)
        triples = [triples[i] for i in sorted(picked)]
    return {"1-way": [(j,) for j in columns], "2-way": list(itertools.combinations(columns, 2)),
            "3-way": triples}


def workload_errors(real: np.ndarray, synth: np.ndarray, sizes: tuple[int, ...],
                    workload: dict[str, list[tuple[int, ...]]]) -> dict[str, dict[str, float]]:
    """Per workload part: mean and max TVD and the number of marginals (parts with none are left out)."""
    out = {}
    for name, subsets in workload.items():
        if subsets:
            tvds = [marginal_tvd(real, synth, sizes, cols) for cols in subsets]
            out[name] = {"mean": float(np.mean(tvds)), "max": float(np.max(tvds)), "marginals": len(tvds)}
    return out
