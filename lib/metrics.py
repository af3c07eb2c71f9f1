"""Accuracy metrics on integer-coded tables (evaluation only: reads real data, spends no budget).

Numbers computed here compare a release with the real data, so they are not
differentially private and must not be published as such.
"""
from __future__ import annotations

import itertools

import numpy as np

from lib.marginals import count_marginal

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


def mean_tvd(real: np.ndarray, synth: np.ndarray, sizes: tuple[int, ...], way: int = 2,
             columns: list[int] | None = None) -> float:
    """Mean total variation distance over all ``way``-way marginals of ``columns`` (default all)."""
    columns = list(range(real.shape[1])) if columns is None else columns
    tvds = []
    for cols in itertools.combinations(columns, way):
        shape = tuple(sizes[j] for j in cols)
        pr = count_marginal(real[:, cols], shape) / max(len(real), 1)
        ps = count_marginal(synth[:, cols], shape) / max(len(synth), 1)
        tvds.append(0.5 * np.abs(pr - ps).sum())
    return float(np.mean(tvds))
