"""Contribution bounding: at most theta rows per individual.

Truncation looks at one individual's rows at a time (a per-individual
transformation), so adding or removing one individual still changes at most
theta of the rows that are measured; noise is scaled by theta accordingly.  With
``keys`` (the codes of the columns a run declares distinct per individual, such as
Sprint 2's YEAR), each individual first keeps one random row per key, also a
per-individual transformation, so no two kept rows of one individual share a key.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def bound_contributions(ids: np.ndarray, theta: int, rng: np.random.Generator,
                        keys: np.ndarray | None = None) -> np.ndarray:
    """Sorted indices of the rows to keep: for each id, at most ``theta`` of its rows, at random;
    with ``keys`` (n × k codes), first at most one random row per (id, key).

    The choice depends only on ``rng``, the id grouping and each row's key, never on other values.
    """
    return keep_rows(ids, theta, rng.random(len(ids)), keys)  # one random priority per row


def keep_rows(ids: np.ndarray, theta: int, priority: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
    """``bound_contributions`` with each row's random ``priority`` given: for each id its ``theta`` rows of
    lowest priority (after one row per (id, key), the lowest).  Which rows an id keeps depends on its
    own rows alone, so any split of the table that keeps each id's rows together keeps the same rows."""
    group = individual_codes(ids)
    rows = np.arange(len(group))
    if keys is not None and len(group):
        keys = np.asarray(keys).reshape(len(group), -1)
        pair = np.unique(np.column_stack([group, keys]), axis=0, return_inverse=True)[1].ravel()
        rows = np.flatnonzero(_first_of_each(pair, priority, 1))
    return np.sort(rows[_first_of_each(group[rows], priority[rows], theta)])


def individual_codes(ids: object) -> np.ndarray:
    """One integer per row, equal for two rows exactly when their ids are equal (the ids' own values: an Arrow
    string array as reading.individual_ids gives, or any array pandas can factorize), never a hash of them, so
    that no two individuals are ever bounded as one (PRIVACY.md, "Neighbouring tables")."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if isinstance(ids, pa.Array):
        codes: np.ndarray = pc.dictionary_encode(ids).indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return codes
    if isinstance(ids, pd.Series) and isinstance(ids.dtype, pd.ArrowDtype | pd.StringDtype):
        return np.asarray(pd.factorize(ids, use_na_sentinel=False)[0])
    return np.asarray(pd.factorize(pd.Series(np.asarray(ids)), use_na_sentinel=False)[0])


def _first_of_each(group: np.ndarray, priority: np.ndarray, limit: int) -> np.ndarray:
    """Boolean mask: for each value of ``group``, its ``limit`` positions of lowest ``priority``."""
    order = np.lexsort((priority, group))
    sorted_group = group[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_group)) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    keep = np.zeros(len(group), dtype=bool)
    keep[order[rank < limit]] = True
    return keep
