"""The one record every estimator takes: what was measured, its noisy answer, its noise, its weight.

Consistency (lib/consistency.py), GUM (lib/gum.py), the maximum-entropy fit (lib/maxent.py), raking
(lib/raking.py), the relaxed projection and the record fit (lib/relaxed.py, lib/record_fit.py) all
take a list of ``Target``: ``query`` is the columns of a marginal (indices, or names for
consistency) or a relaxed query; ``noisy`` its answer (counts shaped by the columns' sizes, or the
query's answer); ``sigma`` its noise sd (0 for an exact or public answer); ``weight`` how much the
estimator weighs it where it weighs targets at all.  Estimators read only these fields, so they are
post-processing of whatever made the answers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Union

import numpy as np

if TYPE_CHECKING:
    from dpsyn.lib.relaxed import RelaxedQuery

TargetQuery = Union[tuple[int, ...], tuple[str, ...], "RelaxedQuery"]
"""What a Target measured: a marginal's columns (indices into the estimator's columns, or names for
consistency) or a relaxed query (lib/relaxed.py)."""


class Target(NamedTuple):
    """One measurement as an estimator takes it (see the module doc)."""

    query: TargetQuery
    noisy: np.ndarray
    sigma: float = 0.0
    weight: float = 1.0
