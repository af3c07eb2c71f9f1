"""The one record every estimator takes: what was measured, its noisy answer, its noise, its weight.

The estimators of this package, consistency (consistency.py), GUM (gum.py), the maximum-entropy fit
(maxent.py), raking (raking.py), the relaxed projection and the record fit (relaxed.py, record_fit.py), all
take a list of ``Target``: ``query`` is the columns of a marginal (indices, or names for
consistency) or a relaxed query; ``noisy`` its answer (counts shaped by the columns' sizes, or the
query's answer); ``sigma`` its noise sd (0 for an exact or public answer); ``weight`` how much the
estimator weighs it where it weighs targets at all.  Estimators read only these fields, so they are
post-processing of whatever made the answers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar, Union

import numpy as np

if TYPE_CHECKING:
    from dpsyn.lib.estimation.relaxed import RelaxedQuery

TargetQuery = Union[tuple[int, ...], tuple[str, ...], "RelaxedQuery"]
"""What a Target measured: a marginal's columns (indices into the estimator's columns, or names for
consistency) or a relaxed query (lib/estimation/relaxed.py)."""


Q = TypeVar("Q", bound=TargetQuery)  # the kind of query


class Target(NamedTuple, Generic[Q]):
    """One measurement as an estimator takes it (see the module doc); ``Target[RelaxedQuery]`` for the relaxed
    projection's, ``MarginalTarget`` for a marginal's."""

    query: Q
    noisy: np.ndarray
    sigma: float = 0.0
    weight: float = 1.0


MarginalTarget = Target[tuple[int, ...]]
"""A marginal's measurement, its columns as indices into the estimator's columns."""
