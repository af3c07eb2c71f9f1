"""Post-processing: resample a method's synthetic rows toward noisy answers of measures the user picks.

After Wang et al., "Post-processing private synthetic data for improving utility on selected
measures" (../shared/papers/post-processing-reweighting-noisy-moments.txt).  The user names
utility measures (``--reweight``):

* ``moments:A,B,...``: first and second moments of numeric columns (scaled to [0, 1] by their
  public range, nulls as 0), from which their means and correlation matrix follow;
  ``moments:*`` takes every numeric column;
* ``marginals:A×B,C,...``: 1- and 2-way marginals of any columns (numeric ones by their bins).

Several specs are joined with ``;`` (or given as a list).  The stage:

1. measures each measure once on the private table with the Gaussian mechanism, the held
   share of the run's budget (``--reweight-share``) split equally between them (sensitivities
   from lib/privacy/queries.py: Moments and Marginal);
2. makes the noisy sums consistent: the answers of the non-negative weighting of the
   synthetic rows nearest to them (lib/tilting.consistent_answers, cvxpy);
3. finds the tilt exp(-λ·(q(x) - a)) of the synthetic rows toward those answers
   (lib/tilting.tilt, tolerance ``gamma``); with group columns, alternates it with
   rescaling each group to its own size (alternating I-projections), so that resampling
   within groups keeps every group's row count;
4. resamples each group's rows in proportion to their weights (systematic resampling).

Only step 1 reads private data; 2-4 are post-processing of its noisy answers and the
synthetic rows.  The log reports the error against the noisy answers before and after.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from lib.marginals import cell_index
from lib.privacy.private_table import PrivateTable
from lib.privacy.queries import Marginal, Moments
from lib.tilting import SUPPORT_CAP, consistent_answers, resample, tilt
from method.base import OptionError, RunContext

log = logging.getLogger("dpsyn")

SHARE = 0.1        # default share of the run's rho (bench/RESULTS.md "Reweighting")
GAMMA = 1e-5       # the paper's tolerance
MAX_CELLS = 1000   # cells of one marginal measure (each a column of the dense query matrix)
GROUP_PASSES = 3   # alternations of tilt and per-group rescaling when there are groups
LOW_EFFECTIVE_SHARE = 0.1  # below this effective sample size (share of rows) the log warns
PRODUCT = re.compile(r"\s*[×*]\s*")


@dataclass(frozen=True)
class ReweightSpec:
    """The measures to reweight toward, the share of the run's rho they get, and the tolerance."""

    moments: tuple[tuple[str, ...], ...] = ()
    marginals: tuple[tuple[str, ...], ...] = ()
    share: float = SHARE
    gamma: float = GAMMA

    def describe(self) -> str:
        parts = [f"moments of {', '.join(m)}" for m in self.moments]
        parts += [f"marginal {' × '.join(m)}" for m in self.marginals]
        return "; ".join(parts)


def parse_reweight(specs: str | Sequence[str], names: Sequence[str], numeric: Sequence[str],
                   share: float = SHARE, gamma: float = GAMMA) -> ReweightSpec:
    """The ReweightSpec of ``specs`` (``kind:columns`` items, ``;``-separated or a list) against the
    schema's column ``names`` and its ``numeric`` ones; OptionError lists every problem, one line each."""
    items = [specs] if isinstance(specs, str) else list(specs)
    items = [part.strip() for item in items for part in str(item).split(";") if part.strip()]
    problems, moments, marginals = [], [], []
    if not items:
        problems.append("--reweight names no measures (give moments:COLS or marginals:A×B,...)")
    if not 0 < share < 1:
        problems.append(f"--reweight-share must be in (0, 1), got {share}")
    if not gamma >= 0:
        problems.append(f"--reweight-gamma must be >= 0, got {gamma}")
    for item in items:
        kind, _, rest = item.partition(":")
        kind = kind.strip().lower()
        columns = [c.strip() for c in rest.split(",") if c.strip()]
        if kind not in ("moments", "marginals"):
            problems.append(f"--reweight {item}: unknown measure {kind!r} (moments:COLS or marginals:A×B,...)")
        elif not columns:
            problems.append(f"--reweight {item}: names no columns")
        elif kind == "moments":
            if columns == ["*"]:
                columns = list(numeric)
                if not columns:
                    problems.append(f"--reweight {item}: the schema has no numeric column")
                    continue
            unknown = [c for c in columns if c not in names]
            plain = [c for c in columns if c in names and c not in numeric]
            if unknown:
                problems.append(f"--reweight {item}: not schema columns: {', '.join(unknown)}")
            if plain:
                problems.append(f"--reweight {item}: moments take numeric columns; {', '.join(plain)} "
                                f"{'is' if len(plain) == 1 else 'are'} categorical (use marginals:{plain[0]})")
            if len(set(columns)) != len(columns):
                problems.append(f"--reweight {item}: a column is named twice")
            moments.append(tuple(columns))
        else:
            for marginal in columns:
                attrs = tuple(a for a in PRODUCT.split(marginal) if a)
                unknown = [a for a in attrs if a not in names]
                if unknown:
                    problems.append(f"--reweight {item}: not schema columns: {', '.join(unknown)}")
                elif not 1 <= len(attrs) <= 2 or len(set(attrs)) != len(attrs):
                    problems.append(f"--reweight {item}: {marginal} is not a 1- or 2-way marginal of distinct columns")
                marginals.append(attrs)
    if problems:
        raise OptionError(problems)
    return ReweightSpec(tuple(moments), tuple(marginals), share, gamma)


def reweight_cell_problems(spec: ReweightSpec, domain) -> list[str]:
    """One line per marginal of ``spec`` with more than MAX_CELLS cells in ``domain`` (public: checked
    before the private file is read)."""
    return [f"--reweight marginals:{'×'.join(attrs)} has {domain.size(attrs)} cells; at most {MAX_CELLS}"
            for attrs in spec.marginals if domain.size(attrs) > MAX_CELLS]


@dataclass(frozen=True)
class Reweighting:
    """The rows to keep (indices into the synthetic rows, with repeats), the mean absolute error of the
    synthetic answers against the noisy ones before and after, and the effective sample size of the
    weights (as a share of the rows)."""

    rows: np.ndarray
    error_before: float
    error_after: float
    effective_share: float

    @property
    def improvement(self) -> float:
        return 1.0 - self.error_after / self.error_before if self.error_before > 0 else 0.0


def _row_queries(ctx: RunContext, spec: ReweightSpec, codes: np.ndarray,
                 values: Mapping[str, np.ndarray]) -> tuple[list, list[np.ndarray]]:
    """The private-table queries of ``spec`` and, for each, its per-row values on the synthetic rows
    (n × width: what one row adds to the query's answer)."""
    domain, queries, rows = ctx.domain, [], []
    for columns in spec.moments:
        query = Moments(columns)
        queries.append(query)
        rows.append(query.row_values(np.column_stack([domain.scale(c, values[c]) for c in columns])))
    for attrs in spec.marginals:
        cells = domain.size(attrs)
        index = cell_index(codes[:, domain.indices(attrs)], domain.shape(attrs))
        onehot = np.zeros((len(codes), cells))
        onehot[np.arange(len(codes)), index] = 1.0
        queries.append(Marginal(attrs))
        rows.append(onehot)
    return queries, rows


def _means(query, noisy: np.ndarray) -> np.ndarray:
    """A measurement's noisy sums as shares of its own noisy count (the first entry of moments, the
    sum of a marginal's cells)."""
    flat = np.asarray(noisy, dtype=np.float64).ravel()
    count = flat[0] if isinstance(query, Moments) else flat.sum()
    return flat / max(count, 1.0)


def reweight_rows(private: PrivateTable, codes: np.ndarray, values: Mapping[str, np.ndarray], ctx: RunContext,
             spec: ReweightSpec) -> Reweighting:
    """Which synthetic rows to keep (see the module doc).  ``codes``: the synthetic rows (domain
    order); ``values``: their raw values of the numeric columns.  Privacy cost: everything that
    remains of the run's budget (the held share), split equally between the measures."""
    queries, rows = _row_queries(ctx, spec, codes, values)
    rho = private.remaining
    measured = [private.measure(q, rho / len(queries), f"reweighting: {q.describe()}") for q in queries]
    if not len(codes):
        return Reweighting(np.zeros(0, dtype=np.int64), 0.0, 0.0, 1.0)
    noisy = np.concatenate([m.noisy.astype(np.float64).ravel() for m in measured])
    sigma = np.concatenate([np.full(m.noisy.size, m.sigma) for m in measured])
    matrix = np.column_stack(rows)
    support = np.unique(matrix, axis=0)
    if len(support) > SUPPORT_CAP:
        support = support[ctx.rng.choice(len(support), SUPPORT_CAP, replace=False)]
    noisy_means = np.concatenate([_means(m.query, m.noisy) for m in measured])
    before = float(np.abs(matrix.mean(axis=0) - noisy_means).mean())
    targets = consistent_answers(support, noisy, sigma)
    identity = np.arange(len(codes))
    if targets is None:
        log.info("reweighting: every noisy answer is at or below 0; the rows are kept as they are")
        return Reweighting(identity, before, before, 1.0)
    varying = matrix.std(axis=0) > 0  # constant columns (the count) carry no tilt
    qbar = matrix[:, varying] - targets[varying]
    groups = cell_index(codes[:, ctx.domain.indices(ctx.group_columns)], ctx.domain.shape(ctx.group_columns)) \
        if ctx.group_columns else np.zeros(len(codes), dtype=np.int64)
    labels, sizes = np.unique(groups, return_inverse=True, return_counts=True)[1:]
    weights = np.full(len(codes), 1.0 / len(codes))
    for _ in range(GROUP_PASSES if len(sizes) > 1 else 1):
        weights = tilt(qbar, weights, spec.gamma).weights
        mass = np.bincount(labels, weights=weights, minlength=len(sizes))
        weights = weights * (sizes / len(codes) / np.maximum(mass, 1e-300))[labels]
    kept = resample(weights, labels, ctx.rng)
    after = float(np.abs(matrix[kept].mean(axis=0) - noisy_means).mean())
    effective = float(1.0 / (len(codes) * np.sum((weights / weights.sum()) ** 2)))
    result = Reweighting(kept, before, after, effective)
    log.info("reweighting (rho %.4g, %s): mean error against the noisy answers %.4g -> %.4g (improvement %.0f%%); "
             "effective sample size %.0f%% of the rows", rho, spec.describe(), before, after,
             100 * result.improvement, 100 * effective)
    if effective < LOW_EFFECTIVE_SHARE:
        log.warning("reweighting leans on few rows (effective sample size %.0f%%): the rows kept repeat a small "
                    "part of the synthetic table, which adds sampling error to every other statistic; a larger "
                    "--reweight-gamma or fewer measures tilts less", 100 * effective)
    return result
