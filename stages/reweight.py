"""Post-processing: resample a method's synthetic rows toward noisy answers of measures the user picks.

After Wang et al., "Post-processing private synthetic data for improving utility on selected
measures" (Wang, Sudalairaj, Henning, Greenewald and Srivastava).  The user names
utility measures (``--reweight``):

* ``moments:A,B,...``: first and second moments of numeric columns, from which their means and
  correlation matrix follow.  Each column is clipped per record to bounds and scaled by them to
  [0, 1] (nulls as 0): declared ones (``moments:age[17,90],hours[1,99]``), else the public file's
  1st and 99th percentiles, else the column's range.  Tighter bounds mean less noise in the
  column's units; values beyond them count as the bound.  ``moments:*`` takes every numeric column;
* ``marginals:A×B,C,...``: 1- and 2-way marginals of any columns (numeric ones by their bins).

Several specs are joined with ``;`` (or given as a list).  The stage:

1. measures each measure once on the private table with the Gaussian mechanism, the held
   share of the run's budget (``--reweight-share``) split equally between them (sensitivities
   from lib/privacy/queries.py: Moments and Marginal);
2. estimates the true answers from two sources, each weighted by what is known of its error:
   the noisy answers (their noise sd, public) and the synthetic rows' own answers (their distance
   from the truth, estimated per measure from how far they are from the noisy answers beyond the
   noise: empirical Bayes), as a constrained fit over distributions on the synthetic rows
   (lib/estimation/tilting.denoised_answers, cvxpy).  An answer within noise of the synthetic one is left
   where the synthetic rows have it;
3. finds the tilt exp(-λ·(q(x) - a)) of the synthetic rows toward those estimates, each answer
   with a tolerance of reweight_band of its estimate's sd (lib/estimation/tilting.tilt); with group columns,
   alternates it with rescaling each group to its own size (alternating I-projections), so that
   resampling within groups keeps every group's row count; stops the tilt part of the way where
   the weights' effective sample size would fall below ``floor`` of the rows;
4. resamples each group's rows in proportion to their weights (systematic resampling).

Only step 1 reads private data; 2-4 are post-processing of its noisy answers and the
synthetic rows.  The log gives the noise's expected error beside the distance the tilt closes,
so a change is never reported as a gain against the noise alone.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from dpsyn.lib.records.domain import scale_to_unit
from dpsyn.lib.records.marginals import cell_index
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import Marginal, Moments
from dpsyn.lib.estimation.tilting import denoised_answers, effective_share, prior_sd, resample, tempered, tilt
from dpsyn.lib.tuning import T
from dpsyn.method.base import OptionError, RunContext

log = logging.getLogger("dpsyn")

PRODUCT = re.compile(r"\s*[×*]\s*")
COLUMN = re.compile(r"\s*([^,\[\]]+?)\s*(?:\[([^\]]*)\])?\s*(?:,|$)")


@dataclass(frozen=True)
class ReweightSpec:
    """The measures to reweight toward, the share of the run's rho they get, the effective-sample floor,
    and the moment columns' clipping bounds (declared ones from the spec; ``with_bounds`` fills the rest)."""

    moments: tuple[tuple[str, ...], ...] = ()
    marginals: tuple[tuple[str, ...], ...] = ()
    share: float = field(default_factory=lambda: T.reweight_share)
    floor: float = field(default_factory=lambda: T.reweight_floor)
    bounds: tuple[tuple[str, float, float], ...] = ()  # (column, low, high)
    sources: tuple[tuple[str, str], ...] = ()  # (column, where its bounds came from), after with_bounds

    def bound(self, column: str) -> tuple[float, float]:
        return next((lo, hi) for c, lo, hi in self.bounds if c == column)

    def describe(self) -> str:
        parts = [f"moments of {', '.join(m)}" for m in self.moments]
        parts += [f"marginal {' × '.join(m)}" for m in self.marginals]
        return "; ".join(parts)


def _moment_columns(item: str, rest: str, problems: list[str]) -> list[tuple[str, float | None, float | None]]:
    """(column, low, high) of each ``NAME`` or ``NAME[low,high]`` in ``rest``; problems for bad bounds."""
    out: list[tuple[str, float | None, float | None]] = []
    position = 0
    rest = rest.strip()
    while position < len(rest):
        match = COLUMN.match(rest, position)
        if not match or match.end() == position:
            problems.append(f"--reweight {item}: cannot read the columns (NAME or NAME[low,high], comma-separated)")
            return out
        position = match.end()
        name, bounds = match.group(1).strip(), match.group(2)
        if bounds is None:
            out.append((name, None, None))
            continue
        low: float | None
        high: float | None
        try:
            low, high = (float(v) for v in bounds.split(","))
        except ValueError:
            problems.append(f"--reweight {item}: {name}[{bounds}] needs two numbers, [low,high]")
            low = high = None
        if low is not None and high is not None and not (math.isfinite(low) and math.isfinite(high) and low < high):
            problems.append(f"--reweight {item}: {name}[{bounds}]: bounds must be finite with low < high")
            low = high = None
        out.append((name, low, high))
    return out


def parse_reweight(specs: str | Sequence[str], names: Sequence[str], numeric: Sequence[str],
                   share: float | None = None, floor: float | None = None) -> ReweightSpec:
    """The ReweightSpec of ``specs`` (``kind:columns`` items, ``;``-separated or a list) against the
    schema's column ``names`` and its ``numeric`` ones; OptionError lists every problem, one line each."""
    share = T.reweight_share if share is None else share
    floor = T.reweight_floor if floor is None else floor
    items = [specs] if isinstance(specs, str) else list(specs)
    items = [part.strip() for item in items for part in str(item).split(";") if part.strip()]
    problems: list[str] = []
    moments: list[tuple[str, ...]] = []
    marginals: list[tuple[str, ...]] = []
    declared: dict[str, tuple[float, float]] = {}
    if not items:
        problems.append("--reweight names no measures (give moments:COLS or marginals:A×B,...)")
    if not 0 < share < 1:
        problems.append(f"--reweight-share must be in (0, 1), got {share}")
    if not 0 <= floor < 1:
        problems.append(f"the reweighting floor must be in [0, 1), got {floor}")
    for item in items:
        kind, _, rest = item.partition(":")
        kind = kind.strip().lower()
        if kind == "moments":
            entries = [(c, None, None) for c in numeric] if rest.strip() == "*" else _moment_columns(item, rest,
                                                                                                  problems)
            columns = [c for c, _, _ in entries]
            if not columns:
                problems.append(f"--reweight {item}: " + ("the schema has no numeric column" if rest.strip() == "*"
                                                          else "names no columns"))
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
            for c, low, high in entries:
                if low is not None and high is not None:  # both given, or neither
                    if declared.get(c, (low, high)) != (low, high):
                        problems.append(f"--reweight: {c} is given two different bounds")
                    declared[c] = (low, high)
            moments.append(tuple(columns))
        elif kind == "marginals":
            columns = [c.strip() for c in rest.split(",") if c.strip()]
            if not columns:
                problems.append(f"--reweight {item}: names no columns")
            for marginal in columns:
                attrs = tuple(a for a in PRODUCT.split(marginal) if a)
                unknown = [a for a in attrs if a not in names]
                if unknown:
                    problems.append(f"--reweight {item}: not schema columns: {', '.join(unknown)}")
                elif not 1 <= len(attrs) <= 2 or len(set(attrs)) != len(attrs):
                    problems.append(f"--reweight {item}: {marginal} is not a 1- or 2-way marginal of distinct columns")
                marginals.append(attrs)
        else:
            problems.append(f"--reweight {item}: unknown measure {kind!r} (moments:COLS or marginals:A×B,...)")
    if problems:
        raise OptionError(problems)
    return ReweightSpec(tuple(moments), tuple(marginals), share, floor,
                        tuple((c, lo, hi) for c, (lo, hi) in declared.items()))


def with_bounds(spec: ReweightSpec, ranges: Mapping[str, tuple[float, float]],
                public: Mapping[str, np.ndarray] | None) -> ReweightSpec:
    """``spec`` with clipping bounds for every moment column: declared ones as given, else the public
    values' reweight_quantiles (when they are apart), else the column's range.  A column whose range is one value
    has no moments to reweight (every row holds it): it leaves its measures (``sources`` says so), and a measure
    left without columns goes.  Public facts only."""
    declared = {c: (lo, hi) for c, lo, hi in spec.bounds}
    bounds: list[tuple[str, float, float]] = []
    sources: list[tuple[str, str]] = []
    for column in dict.fromkeys(c for m in spec.moments for c in m):
        if column in declared:
            bounds.append((column, *declared[column]))
            sources.append((column, "declared"))
            continue
        values = None if public is None else np.asarray(public[column], dtype=np.float64)
        values = None if values is None else values[~np.isnan(values)]
        if values is not None and len(values):
            low, high = (float(q) for q in np.quantile(values, T.reweight_quantiles))
            if low < high:
                bounds.append((column, low, high))
                sources.append((column, f"public {T.reweight_quantiles[0]:.0%}-{T.reweight_quantiles[1]:.0%} quantiles"))
                continue
        low, high = ranges[column]
        if low >= high:
            sources.append((column, "one value: left out"))
            continue
        bounds.append((column, float(low), float(high)))
        sources.append((column, "its range"))
    kept = {c for c, _, _ in bounds}
    moments = tuple(m for m in (tuple(c for c in measure if c in kept) for measure in spec.moments) if m)
    return replace(spec, moments=moments, bounds=tuple(bounds), sources=tuple(sources))


def noise_in_units(spec: ReweightSpec, rho: float, theta: int) -> list[str]:
    """Per moment measure, the noise sd of each column's sum in the column's own units, as the plan
    knows it before any data is read (``rho``: the reweighting share of a run)."""
    from dpsyn.lib.privacy.accounting import gaussian_sigma
    measures = len(spec.moments) + len(spec.marginals)
    out = []
    for columns in spec.moments:
        k = Moments(columns).width()
        sigma = gaussian_sigma(theta * math.sqrt(k), rho / measures)
        out.append(", ".join(f"{c} [{lo:g}, {hi:g}] ±{sigma * (hi - lo):.3g}" for c in columns
                             for lo, hi in [spec.bound(c)]))
    return out


def reweight_cell_problems(spec: ReweightSpec, domain) -> list[str]:
    """One line per marginal of ``spec`` with more than reweight_max_cells cells in ``domain``, and one where no
    measure is left (every moment column of one value, ``with_bounds``) (public: checked before the private file
    is read)."""
    problems = [f"--reweight marginals:{'×'.join(attrs)} has {domain.size(attrs)} cells; at most "
                f"{T.reweight_max_cells}" for attrs in spec.marginals if domain.size(attrs) > T.reweight_max_cells]
    if not spec.moments and not spec.marginals:
        problems.append("--reweight: every moment column holds one value (its range is a single number): nothing "
                        "to reweight toward")
    return problems


@dataclass(frozen=True)
class Resampling:
    """The rows to keep (indices into the synthetic rows, with repeats) and what the stage did, all as
    mean absolute differences over the answers (in [0, 1] units: shares of rows, scaled moments): the
    noise's expected error, the gap between the synthetic and the noisy answers, how far the
    estimates sit from the synthetic answers, how far the kept rows moved them; the weights'
    effective sample size (share of rows) and how much of the tilt was kept (1: all of it)."""

    rows: np.ndarray
    noise_error: float = 0.0
    gap: float = 0.0
    to_estimate: float = 0.0
    moved: float = 0.0
    effective_share: float = 1.0
    kept_tilt: float = 1.0


def _row_queries(ctx: RunContext, spec: ReweightSpec, codes: np.ndarray,
                 values: Mapping[str, np.ndarray]) -> tuple[list, list[np.ndarray]]:
    """The private-table queries of ``spec`` and, for each, its per-row values on the synthetic rows
    (n × width: what one row adds to the query's answer)."""
    domain, rows = ctx.domain, []
    queries: list[Moments | Marginal] = []
    for columns in spec.moments:
        bounds = tuple(spec.bound(c) for c in columns)
        query = Moments(columns, bounds=bounds)
        queries.append(query)
        rows.append(query.row_values(np.column_stack([scale_to_unit(values[c], lo, hi) for c, (lo, hi) in
                                                      zip(columns, bounds)])))
    for attrs in spec.marginals:
        cells = domain.size(attrs)
        index = cell_index(codes[:, domain.indices(attrs)], domain.shape(attrs))
        onehot = np.zeros((len(codes), cells))
        onehot[np.arange(len(codes)), index] = 1.0
        queries.append(Marginal(attrs))
        rows.append(onehot)
    return queries, rows


def _as_means(query, noisy: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """A measurement's noisy sums and their noise sd as shares of its own noisy count (the first entry
    of moments, the sum of a marginal's cells)."""
    flat = np.asarray(noisy, dtype=np.float64).ravel()
    count = max(flat[0] if isinstance(query, Moments) else flat.sum(), 1.0)
    return flat / count, np.full(flat.size, sigma / count)


def reweight_rows(private: PrivateTable, codes: np.ndarray, values: Mapping[str, np.ndarray], ctx: RunContext,
                  spec: ReweightSpec) -> Resampling:
    """Which synthetic rows to keep (see the module doc).  ``codes``: the synthetic rows (domain
    order); ``values``: their raw values of the numeric columns; ``spec`` with its bounds filled
    (``with_bounds``).  Privacy cost: everything that remains of the run's budget (the held
    share), split equally between the measures; the rest is post-processing."""
    queries, rows = _row_queries(ctx, spec, codes, values)
    rho = private.remaining
    measured = [private.measure(q, rho / len(queries), f"reweighting: {q.describe()}") for q in queries]
    if not len(codes):
        return Resampling(np.zeros(0, dtype=np.int64))
    blocks = [(block, *_as_means(m.query, m.noisy, m.sigma)) for m, block in zip(measured, rows)]
    groups = cell_index(codes[:, ctx.domain.indices(ctx.group_columns)], ctx.domain.shape(ctx.group_columns)) \
        if ctx.group_columns else np.zeros(len(codes), dtype=np.int64)
    weights, result = fitted_weights(blocks, groups, spec.floor, ctx.rng)
    kept = resample(weights, groups, ctx.rng)
    matrix = np.column_stack(rows)
    varying = matrix.std(axis=0) > 0
    moved = float(np.abs(matrix[kept].mean(axis=0) - matrix.mean(axis=0))[varying].mean()) if varying.any() else 0.0
    result = replace(result, rows=kept, moved=moved)
    _log(spec, rho, result)
    return result


def fitted_weights(blocks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], groups: np.ndarray, floor: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, Resampling]:
    """Weights of the synthetic rows (summing to 1) and what they did, from one block per measure:
    (n × w values each row adds, the noisy answers as shares of the noisy count, their noise sd),
    ``groups`` one label per row (each group keeps its total weight), ``floor`` the least effective
    sample size.  Steps 2-3 of the module doc; post-processing of public arrays only (``rng``
    subsamples a support larger than ``T.tilting_support_cap`` distinct rows)."""
    matrix = np.column_stack([b[0] for b in blocks])
    n = len(matrix)
    synthetic = matrix.mean(axis=0)
    noisy = np.concatenate([b[1] for b in blocks])
    noise_sd = np.concatenate([b[2] for b in blocks])
    priors = []
    for block, a, sd in blocks:
        varies = block.std(axis=0) > 0  # the count and constant columns carry no tilt and no evidence
        priors.append(np.full(a.size, prior_sd(a[varies], sd[varies], block.mean(axis=0)[varies])))
    prior = np.concatenate(priors)
    varying = matrix.std(axis=0) > 0
    uniform = np.full(n, 1.0 / n)
    if not varying.any():
        return uniform, Resampling(np.arange(n))
    noise_error = float(math.sqrt(2 / math.pi) * noise_sd[varying].mean())
    gap = float(np.abs(noisy - synthetic)[varying].mean())
    if not prior[varying].any():  # the synthetic answers are within noise of every noisy one: nothing to chase
        return uniform, Resampling(np.arange(n), noise_error, gap)
    support = np.unique(matrix, axis=0)
    if len(support) > T.tilting_support_cap:
        support = support[rng.choice(len(support), T.tilting_support_cap, replace=False)]
    estimates, estimate_sd = denoised_answers(support, noisy, noise_sd, synthetic, prior)
    qbar = matrix[:, varying] - estimates[varying]
    tolerance = T.reweight_band * estimate_sd[varying]
    labels, sizes = np.unique(groups, return_inverse=True, return_counts=True)[1:]
    weights = uniform
    for _ in range(T.reweight_group_passes if len(sizes) > 1 else 1):
        weights = tilt(qbar, weights, tolerance).weights
        mass = np.bincount(labels, weights=weights, minlength=len(sizes))
        weights = weights * (sizes / n / np.maximum(mass, 1e-300))[labels]
    weights, kept_tilt = tempered(weights / weights.sum(), floor)
    to_estimate = float(np.abs(estimates - synthetic)[varying].mean())
    return weights, Resampling(np.arange(n), noise_error, gap, to_estimate, 0.0, effective_share(weights), kept_tilt)


def _log(spec: ReweightSpec, rho: float, r: Resampling) -> None:
    log.info("reweighting (rho %.4g, %s): the noisy answers' expected error is %.3g and they sit %.3g from the "
             "synthetic answers; the estimates combining both sit %.3g from them, and the rows kept moved the "
             "synthetic answers by %.3g (mean absolute differences in shares of rows and scaled moments); "
             "effective sample size %.0f%% of the rows%s", rho, spec.describe(), r.noise_error, r.gap, r.to_estimate,
             r.moved, 100 * r.effective_share,
             f"; the tilt stopped at {r.kept_tilt:.0%} of the way to keep {spec.floor:.0%}" if r.kept_tilt < 1 else "")
    if r.noise_error >= r.gap:
        log.warning("reweighting: the noisy answers are noisier (expected error %.3g) than their distance from the "
                    "synthetic data (%.3g), so they say little the synthetic data does not; the rows are left "
                    "nearly as they are. A larger reweighting share (reweight_share) or fewer measures would make them count",
                    r.noise_error, r.gap)
