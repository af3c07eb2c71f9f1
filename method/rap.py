"""RAP++ (Vietri et al. 2022): relaxed adaptive projection for mixed-type data.

The paper: "Private Synthetic Data for Multitask Learning and Marginal Queries".
Numeric columns are synthesized as raw values, without bins: the method measures interval
counts of numeric columns (cut where the current synthetic values have their quantiles) per
value of a categorical column (mixed marginals), random linear directions over numeric columns
per value of ``--target`` (class-conditional linear thresholds) or over pairs of numeric columns,
and categorical marginals (1-, 2-way, and 3-way with the target), and fits a relaxed table
(lib/estimation/relaxed.py) to them.

Measurements (all through the private table, Gaussian, sensitivity from theta):

1. noisy group counts (rap_group_share of the budget; all of it, and no rounds, where every column is a group
   column) when there are group columns; the shares of steps
   2-4 below are of what steps 1 and 3b leave;
2. every column's 1-way answer (rap_one_way_share, split equally): a categorical column's counts, or a
   numeric column's counts in rap_fine_intervals equal intervals of its public range (at the public file's
   quantiles when one is given), with cuts at both bounds so that a spike there (zero incomes, top
   codes) has a slot of its own, plus nulls; with ``--target``, per target value where the table has
   numeric columns (the rounds then spend mostly on numeric queries, so a classifier needs these pairs
   measured up front), else each column alone and the target's counts (the rounds choose which pairs with
   the target matter);
3. with numeric columns, every pair of categorical columns (other than the target, whose pairs step
   2 holds) of at most ``max_cells`` cells (rap_pair_share, split equally).  Without numeric columns the
   rounds' candidates are categorical marginals alone and the selection finds the pairs that matter;
3b. with group columns, after a first projection, every column's answer per group (rap_group_column_share,
   split equally; a numeric column's interval counts cut at rap_mix_cuts quantiles of the relaxed table's
   values; at most ``max_cells`` cells): the records, not the relaxed table, fit them (a group column
   is fixed, so the fit moves records within their group), and the rounds do not choose them again:
   without them a group's records know only its count (fitted by the projection, they cost its time);
4. after a first projection, every numeric column's interval counts per value of each categorical
   column other than the target, and per code of each later numeric column (its public bins; only
   the records fit those: the relaxed table has no bins), in one rap_mix_share split equally (rap_mix_cuts cuts
   at the relaxed table's quantiles, at most ``max_cells`` slots): the mixed marginals.  Steps 2-4 give
   the records every pair the write-up's two-way regime measures, which ties the features to one
   another and to the target as a classifier needs; the rounds spend the rest on what the fit still
   gets wrong;
5. ``rounds`` rounds on the rest, split equally: each picks ``per_round`` candidates one at a time by
   the exponential mechanism on the L1 distance between the private answer and the relaxed table's
   (minus the noise a measurement would add; rap_select_share of the round, in equal shares), leaving out
   after each pick the categorical marginals nested in or around it, measures them with the rest of
   the round, and projects again.

Numeric columns are held in [0, 1] of the public file's range when one is given (``_Scale``), and
cuts sit half-way between the points of a column's grid (``_Scale.snap``).  The relaxed table
starts from public records when given, else from random categorical logits and
numeric values drawn from their noisy 1-way interval counts, with rows per group in proportion to
the noisy group counts, shrunk toward the product of their totals (method/groups.py
``smoothed_counts``; group columns fixed).  The release draws its records from
the relaxed rows: categorical values from their probabilities, numeric values as fitted; then
moves the records' codes and values toward every noisy answer by discrete coordinate descent
(lib/estimation/record_fit.py, post-processing), which mends what the sigmoids' vanishing gradients left
unfitted (the release rounds values to the column's precision and recomputes their codes); last,
each categorical column that no interval query reads is exchanged among the records that agree on
every column measured with it (lib/records/exchange.py, as method/adaptive.py does), which keeps every
measured marginal's counts and drops associations nothing measured.  Projections after the first start at rap_restart_beta, not at
START_BETA.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpsyn.lib.estimation import record_fit, relaxed
from dpsyn.lib.records.constraints import NO_BOXES
from dpsyn.lib.estimation.consistency import common_total
from dpsyn.lib.records.domain import Domain, scale_to_unit
from dpsyn.lib.records.exchange import exchange_unmeasured
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.privacy.private_table import Measurement, PrivateTable
from dpsyn.lib.privacy.queries import Intervals, Marginal
from dpsyn.lib.runtime.progress import progress
from dpsyn.lib.tuning import T
from dpsyn.method.base import Method, PublicData, RunContext, SynthesisResult, option
from dpsyn.method.groups import group_sizes, smoothed_counts

log = logging.getLogger(__name__)

START_BETA, MAX_BETA = 8.0, 1024.0


@dataclass(frozen=True)
class RapOptions:
    target: str | None = option(None, "rap and superquail: categorical label column; rap adds class-conditional "
                                      "linear threshold queries (random directions over the numeric columns) and "
                                      "3-way marginals with it to the candidates; superquail (required) predicts it")
    rounds: int = option(5, "rap: adaptive rounds (T)", type=int, minimum=1, expert=True)
    per_round: int = option(5, "rap: queries chosen and measured per round (K)", type=int, minimum=1, expert=True)
    rows: int = option(4000, "rap: rows of the relaxed table (n-hat); the release draws its records from them",
                       type=int, minimum=10, expert=True)
    steps: int = option(30, "rap: most Adam steps per inverse temperature of a projection", type=int, minimum=1, expert=True)
    device: str = option("cpu", "rap: where projections run: cpu (numpy) or gpu (cupy; an optional extra, "
                                "requirements-gpu.txt)", choices=relaxed.DEVICES)
    max_cells: int = option(2000, "rap: the largest query (cells × slots) a round may measure, and the largest "
                                  "categorical pair or mixed marginal measured before the rounds", type=int, minimum=1, expert=True)


def check(options: RapOptions, schema) -> list[str]:
    """One line per option that the schema or this machine cannot honour (before any data is read)."""
    problems = []
    if options.target is not None:
        if options.target not in schema.names:
            problems.append(f"--target {options.target}: not a schema column")
        elif schema.column(options.target).values is None:  # a numeric column (categorical ones list values)
            problems.append(f"--target {options.target} must be a categorical column")
    try:
        relaxed.array_module(options.device)
    except relaxed.DeviceUnavailable as exc:
        problems.append(str(exc))
    return problems


@dataclass(frozen=True)
class _Scale:
    """How the relaxed table holds one numeric column: raw = low + x·(high − low) for a relaxed value x,
    with [low, high] the public file's range of the column inside the schema's (else the schema's), so
    that sigmoids resolve the values where they lie (the demo's WGTP runs to 9,999 in the schema and to
    1,054 in the public file; private values beyond the public range count in its end slots and are
    written near its ends); ``step``: the column's grid (None: any float).  Public."""

    low: float
    high: float
    step: float | None

    @classmethod
    def of(cls, domain, column: str, public: PublicData | None) -> "_Scale":
        low, high = domain.ranges[column]
        if public is not None:
            values = np.clip(np.asarray(public.numeric[column], dtype=np.float64), low, high)
            values = values[~np.isnan(values)]
            if len(values) and values.max() > values.min():
                low, high = float(values.min()), float(values.max())
        return cls(float(low), float(high), domain.steps.get(column))

    def relaxed(self, raw: np.ndarray) -> np.ndarray:
        """Raw values (clipped to [low, high]) as relaxed values in [0, 1]; NaN stays NaN."""
        return scale_to_unit(raw, self.low, self.high)

    def raw(self, x: np.ndarray) -> np.ndarray:
        return self.low + np.asarray(x, dtype=np.float64) * (self.high - self.low)

    def snap(self, x: np.ndarray) -> np.ndarray:
        """Cuts (relaxed values) moved half-way up to the next grid point: they answer the same on grid
        values, and a relaxed value in a slot stays in it when the release rounds it to the grid (at a
        cut on a grid point, half of that point's relaxed values would be rounded across it: the demo's
        NOC, cut at 0, 1, 2 and 3 children by public quantiles, lost two thirds of its ones to zeros).
        Only where half a step is at least the sigmoids' width at the last temperature (1 / MAX_BETA),
        so that relaxed values can tell the grid's points apart."""
        x = np.asarray(x, dtype=np.float64)
        width = self.high - self.low
        if self.step is None or width <= 0 or self.step / width < 2 / MAX_BETA:
            return x
        return ((np.floor(self.raw(x) / self.step + 1e-9) + 0.5) * self.step - self.low) / width


@dataclass
class _Layout:
    """Where each domain column sits in the relaxed table: categorical positions (group columns
    first, fixed), numeric positions and their scales.  Columns the release sets later (``ctx.skip``)
    are left out.  The private table's interval queries read numeric columns scaled by the schema's
    range (``Domain.scale``); ``intervals`` and ``relaxed`` translate between that and the relaxed
    table's scales, an affine map per column, so linear queries stay linear and answer the same."""

    domain: Domain
    categorical: list[str]
    numeric: list[str]
    groups: tuple[str, ...]
    scales: list[_Scale]

    @classmethod
    def of(cls, ctx: RunContext, public: PublicData | None) -> "_Layout":
        domain = ctx.domain
        kept = [c for c in domain.names if c not in ctx.skip and c not in ctx.group_columns]
        numeric = [c for c in kept if domain.is_numeric(c)]
        return cls(domain, list(ctx.group_columns) + [c for c in kept if not domain.is_numeric(c)], numeric,
                   tuple(ctx.group_columns), [_Scale.of(domain, c, public) for c in numeric])

    @property
    def nullable(self) -> tuple[bool, ...]:
        """Per numeric column, whether it may be null."""
        return tuple(c in self.domain.nullable for c in self.numeric)

    @property
    def free(self) -> list[str]:
        """The categorical columns the projection fits (not group columns)."""
        return self.categorical[len(self.groups):]

    def affine(self, j: int) -> tuple[float, float]:
        """(offset, factor): the schema-scaled value offset + factor·x of a relaxed value x of numeric column j."""
        low, high = self.domain.ranges[self.numeric[j]]
        width = high - low if high > low else 1.0
        scale = self.scales[j]
        return (scale.low - low) / width, (scale.high - scale.low) / width

    def intervals(self, columns: tuple[int, ...], w, cuts, by: tuple[str, ...] = ()) -> Intervals:
        """The private table's query for interval counts of w·x over relaxed numeric ``columns``
        (positions) cut at ``cuts``; a single column's cuts snapped to its grid (``_Scale.snap``)."""
        w, cuts = np.asarray(w, dtype=np.float64), np.asarray(cuts, dtype=np.float64)
        if len(columns) == 1:
            cuts = self.scales[columns[0]].snap(cuts)
        offset, factor = (np.array(v) for v in zip(*(self.affine(j) for j in columns)))
        direction = w / np.where(factor > 0, factor, 1.0)
        norm = float(np.linalg.norm(direction)) or 1.0
        return Intervals(tuple(self.numeric[j] for j in columns), tuple(float(x) for x in direction / norm),
                         _strict((cuts + float(direction @ offset)) / norm), by)

    def relaxed(self, query) -> relaxed.RelaxedQuery:
        """The relaxed-table form of a Marginal or Intervals query (an interval query's direction of
        unit length, its cuts divided alike, so that sigmoids are equally steep for every query); an
        interval query by a numeric column reads that column's bins (``bins``)."""
        if isinstance(query, Marginal):
            return relaxed.RelaxedQuery(tuple(self.categorical.index(a) for a in query.attrs))
        bins = tuple(self.bins(c) for c in query.by if c in self.numeric)
        if bins:
            if query.by[-len(bins):] != tuple(c for c in query.by if c in self.numeric):
                raise ValueError("numeric by columns must come after the categorical ones")
            query = dataclasses.replace(query, by=query.by[:-len(bins)])
        positions = tuple(self.numeric.index(c) for c in query.columns)
        offset, factor = (np.array(v) for v in zip(*(self.affine(j) for j in positions)))
        direction = np.asarray(query.direction, dtype=np.float64)
        w = direction * factor
        norm = float(np.linalg.norm(w)) or 1.0
        cuts = (np.asarray(query.cuts, dtype=np.float64) - float(direction @ offset)) / norm
        return relaxed.RelaxedQuery(tuple(self.categorical.index(a) for a in query.by), positions,
                                    tuple(float(x) for x in w / norm), tuple(float(c) for c in cuts), bins)

    def bins(self, column: str) -> tuple[int, tuple[float, ...], int]:
        """A numeric column's codes as relaxed.RelaxedQuery.bins reads them: its position, its interior bin
        edges on the relaxed scale (on a grid, moved half-way up to the next grid point, so that rounding
        keeps a value in its bin), and its number of codes."""
        j = self.numeric.index(column)
        scale, edges = self.scales[j], np.asarray(self.domain.edges[column][1:-1], dtype=np.float64)
        if scale.step is not None:
            edges = (np.floor(edges / scale.step + 1e-9) + 0.5) * scale.step
        width = scale.high - scale.low if scale.high > scale.low else 1.0
        return j, tuple(float(x) for x in (edges - scale.low) / width), self.domain.size((column,))


def synthesize(private: PrivateTable, public: PublicData | None, ctx: RunContext,
               options: RapOptions) -> SynthesisResult:
    """Synthetic codes (categorical columns) and raw values (numeric columns) for one run.

    Privacy cost: exactly what remains of the run's budget: group counts, 1-way answers, then per
    round ``per_round`` exponential-mechanism selections and as many Gaussian measurements (module doc).
    """
    xp = relaxed.array_module(options.device)
    layout, domain, rho = _Layout.of(ctx, public), ctx.domain, private.remaining
    if options.target is not None and options.target not in layout.free:
        log.warning("rap: the target %s is a group column or set by the release; no class-conditional queries",
                    options.target)
        options = dataclasses.replace(options, target=None)
    alone = bool(layout.groups) and not (layout.free or layout.numeric)  # every column a group column
    rho_groups = rho if alone else T.rap_group_share * rho if layout.groups else 0.0
    by_group = [c for c in layout.free + layout.numeric
                if domain.size(layout.groups) * _slots(layout, c) <= options.max_cells] if layout.groups else []
    rho_by_group = T.rap_group_column_share * rho if by_group else 0.0
    rest = (rho - rho_groups - rho_by_group) / rho  # the other steps' shares are of what these leave
    rho_one_way = T.rap_one_way_share * rest * rho
    pairs = [Marginal(pair) for pair in itertools.combinations([c for c in layout.free if c != options.target], 2)
             if domain.size(pair) <= options.max_cells] if layout.numeric else []
    rho_pairs = T.rap_pair_share * rest * rho if pairs else 0.0
    mixed = [(column, c) for column in layout.numeric for c in layout.free
             if c != options.target and domain.size((c,)) * (T.rap_mix_cuts + 2) <= options.max_cells]
    mixed += [(a, b) for a, b in itertools.combinations(layout.numeric, 2)
              if b in domain.edges and domain.size((b,)) * (T.rap_mix_cuts + 2) <= options.max_cells]
    rho_mixed = T.rap_mix_share * rest * rho if mixed else 0.0
    rounds = 0 if alone else options.rounds  # alone, the group counts are the table: nothing for a round to choose
    rho_round = (rho - rho_groups - rho_by_group - rho_one_way - rho_pairs - rho_mixed) / max(rounds, 1)
    log.info("rap: %d relaxed rows, %d rounds × %d queries; rho %.4g: %.0f%% group counts, %.0f%% %d columns per "
             "group, %.0f%% 1-way answers, %.0f%% %d categorical pairs, %.0f%% mixed marginals, %.0f%% rounds "
             "(%.0f%% of each on selection)", options.rows, rounds, options.per_round, rho,
             100 * rho_groups / rho, 100 * rho_by_group / rho, len(by_group), 100 * rho_one_way / rho,
             100 * rho_pairs / rho, len(pairs), 100 * rho_mixed / rho, 100 * rounds * rho_round / rho,
             100 * T.rap_select_share)

    with ctx.timed("measuring"):
        counts = private.measure(Marginal(layout.groups), rho_groups, f"group counts ({' × '.join(layout.groups)})") \
            if layout.groups else None
        queries = _first_queries(layout, options.target, public)
        first = [private.measure(q, rho_one_way / len(queries)) for q in queries]
        first += [private.measure(q, rho_pairs / len(pairs)) for q in pairs]
    measured = ([counts] if counts else []) + first  # each counts every row once
    total = common_total([m.noisy for m in measured], [m.sigma for m in measured])
    sizes = group_sizes(smoothed_counts(counts.noisy, counts.sigma, layout.groups).ravel() if counts
                        else np.array([total]), ctx.max_records)
    reference = first[0].sigma if first else 1.0  # weights are relative to the first 1-way answer's variance
    with ctx.timed("projecting"):
        table, members = _start(layout, public, sizes, options.rows, ctx.rng, xp, first)
        fits = [_fit(layout, m, total, reference) for m in first]
        if fits:
            _project(table, fits, options, START_BETA)
    record_fits: list[Target] = []  # fitted by the records alone: step 3b, and step 4's numeric pairs
    if mixed or by_group:
        projected = len(fits)
        with ctx.timed("measuring"):
            # rap_mix_cuts cuts per numeric column at the relaxed table's quantiles (post-processing)
            values = relaxed.to_numpy(table.values).astype(np.float64)
            cuts = [_quantile_cuts(values[:, j], T.rap_mix_cuts) for j in range(len(layout.numeric))]
            for m in _mixed_marginals(private, layout, cuts, mixed, rho_mixed):
                # by a numeric column's bins: only the records can fit it (relaxed.RelaxedQuery.bins)
                (record_fits if layout.relaxed(m.query).bins else fits).append(_fit(layout, m, total, reference))
            record_fits += [_fit(layout, m, total, reference)
                            for m in _by_group(private, layout, cuts, by_group, rho_by_group)]
        if len(fits) > projected:
            with ctx.timed("projecting"):
                _project(table, fits, options)
    chosen_kinds: Counter = Counter()
    with progress(rounds, "rap rounds", "round", log) as bar:
        for t in range(rounds):
            with ctx.timed("measuring"):
                picked = _round(private, _Rounds(layout, table, total, options, set(by_group)), rho_round, ctx.rng, t)
            chosen_kinds.update(_kind(m.query) for m in picked)
            fits += [_fit(layout, m, total, reference) for m in picked]
            with ctx.timed("projecting"):
                stats = _project(table, fits, options)
            log.debug("rap round %d: %s; projection %d steps, loss %.4g", t + 1,
                      "; ".join(m.query.describe() for m in picked), stats["steps"], stats["loss"])
            bar.update()
    log.info("rap: measured %s", ", ".join(f"{n} {kind}" for kind, n in sorted(chosen_kinds.items())) or "nothing")
    with ctx.timed("sampling"):
        return _records(layout, table, members, sizes, ctx.rng, fits + record_fits, ctx.boxes)


def _project(table: relaxed.RelaxedTable, fits: list[Target], options: RapOptions,
             beta: float | None = None) -> dict:
    """relaxed.project from inverse temperature ``beta`` (default rap_restart_beta) to MAX_BETA, numeric values'
    steps as from START_BETA."""
    beta = T.rap_restart_beta if beta is None else beta
    return relaxed.project(table, fits, relaxed.Schedule(beta, MAX_BETA, steps=options.steps, lr=T.rap_logit_rate,
                                                         value_lr=T.rap_value_rate * START_BETA / beta))


def _mixed_marginals(private: PrivateTable, layout: _Layout, cuts: list[tuple[float, ...]],
                     pairs: list[tuple[str, str]], rho: float) -> list[Measurement]:
    """Step 4 of the module doc: for each (numeric column, other column) of ``pairs``, the numeric
    column's interval counts per code of the other (a numeric one's bins), cut at its ``cuts`` (public).
    Privacy cost: ``rho``, in equal shares."""
    return [private.measure(layout.intervals((j,), (1.0,), cuts[j], (c,)), rho / len(pairs))
            for j, c in ((layout.numeric.index(column), c) for column, c in pairs)]


def _by_group(private: PrivateTable, layout: _Layout, cuts: list[tuple[float, ...]], columns: list[str],
              rho: float) -> list[Measurement]:
    """Step 3b of the module doc: each of ``columns`` per group (a categorical column's counts, a numeric
    column's interval counts cut at its ``cuts``, public).  Privacy cost: ``rho``, in equal shares."""
    queries = [Marginal(layout.groups + (c,)) if not layout.domain.is_numeric(c) else
               layout.intervals((layout.numeric.index(c),), (1.0,), cuts[layout.numeric.index(c)], layout.groups)
               for c in columns]
    return [private.measure(q, rho / len(queries)) for q in queries]


def _first_queries(layout: _Layout, target: str | None, public: PublicData | None) -> list:
    """Step 2 of the module doc: every column's 1-way answer, per value of ``target`` where the table has
    numeric columns (the target's own counts then among them), else each alone and the target's counts."""
    by = (target,) if target is not None and layout.numeric else ()
    queries = [_one_way(layout, c, public, by) for c in layout.free + layout.numeric if c != target]
    return queries + [Marginal((target,))] if target is not None and not by else queries


def _slots(layout: _Layout, column: str) -> int:
    """Cells of a column's answer per group in step 3b: its categories, or rap_mix_cuts + 2 interval slots."""
    return T.rap_mix_cuts + 2 if layout.domain.is_numeric(column) else layout.domain.size((column,))


def _one_way(layout: _Layout, column: str, public: PublicData | None, by: tuple[str, ...] = ()):
    """A column's first measurement per cell of ``by`` (the target, whose own counts they then include):
    a categorical column's counts, or a numeric column's interval counts (module doc).  Per target value
    a numeric column's intervals carry twice the noise, but without them nothing but a round's choice
    ties the numeric columns to the target (one run of adult_raw kept age independent of income)."""
    if not layout.domain.is_numeric(column):
        return Marginal((column,) + by)
    j = layout.numeric.index(column)
    cuts = np.linspace(0, 1, T.rap_fine_intervals + 1)
    if public is not None:
        values = layout.scales[j].relaxed(public.numeric[column])
        values = values[~np.isnan(values)]
        if len(np.unique(values)) > T.rap_fine_intervals:
            cuts = np.quantile(values, np.linspace(0, 1, T.rap_fine_intervals + 1))
    cuts[-1] = np.nextafter(1.0, 0.0)  # with the cut at 0: spikes at either bound get slots of their own
    return layout.intervals((j,), (1.0,), np.concatenate([[0.0], cuts]), by)


def _strict(cuts: np.ndarray) -> tuple[float, ...]:
    """Sorted distinct cuts as a tuple of floats (at least one)."""
    cuts = np.unique(np.asarray(cuts, dtype=np.float64))
    return tuple(float(c) for c in cuts) if len(cuts) else (0.5,)


def _fit(layout: _Layout, m: Measurement, total: float, reference_sigma: float) -> Target:
    """A measurement as a target of the projection: fractions of the noisy total, weighted by inverse variance."""
    q = layout.relaxed(m.query)
    return Target(q, np.asarray(m.noisy, dtype=np.float64).reshape(-1, q.slots) / total, weight=(reference_sigma / m.sigma) ** 2)


def _start(layout: _Layout, public: PublicData | None, sizes: np.ndarray, rows: int, rng: np.random.Generator,
           xp, first: Sequence[Measurement] = ()) -> tuple[relaxed.RelaxedTable, list[np.ndarray]]:
    """The relaxed table to start from and each group's rows in it: about ``rows`` rows shared in
    proportion to the group sizes (at least one per non-empty group), started from random public
    records (unknown values uniform) or at random: categorical logits N(0, 1), numeric values drawn from
    their noisy 1-way interval counts in ``first`` (post-processing), uniformly within an interval."""
    domain = layout.domain
    positive = np.flatnonzero(sizes > 0)
    positive = positive if len(positive) else np.arange(sizes.size)
    per_group = np.maximum(1, np.ceil(rows * sizes[positive] / max(sizes.sum(), 1))).astype(np.int64)
    n = int(per_group.sum())
    starts = np.concatenate([[0], np.cumsum(per_group)])
    members = [np.zeros(0, dtype=np.int64)] * sizes.size
    for g, a, b in zip(positive, starts[:-1], starts[1:]):
        members[g] = np.arange(a, b)
    group_codes = np.unravel_index(np.repeat(positive, per_group), domain.shape(layout.groups)) \
        if layout.groups else ()
    picks = rng.integers(0, len(public.codes), n) if public is not None and len(public.codes) else None
    cats: list = []
    for i, column in enumerate(layout.categorical):
        k = domain.sizes[domain.index(column)]
        if i < len(layout.groups):
            cats.append(("frozen", np.eye(k)[group_codes[i]]))
        elif picks is not None and public is not None:
            codes = public.codes[picks, domain.index(column)]
            p = np.full((n, k), 0.1 / k)
            known = codes >= 0
            p[np.flatnonzero(known), codes[known]] += 0.9
            p[~known] = 1.0 / k
            cats.append(p)
        else:  # random logits: identical rows would get identical gradients and never become different
            logits = rng.normal(0, 1, (n, k))
            cats.append(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True))
    values = rng.random((n, len(layout.numeric)))
    nulls = np.full((n, len(layout.numeric)), 0.05)
    if picks is not None and public is not None:
        for j, column in enumerate(layout.numeric):
            v = layout.scales[j].relaxed(public.numeric[column][picks])
            nulls[:, j] = np.where(np.isnan(v), 0.9, 0.05)
            values[:, j] = np.where(np.isnan(v), values[:, j], v)
    else:
        for m in first:
            if isinstance(m.query, Intervals):
                j = layout.numeric.index(m.query.columns[0])
                values[:, j], nulls[:, j] = _draw_values(m, layout.relaxed(m.query).cuts, n, rng)
    return relaxed.new_table(xp, cats, values, nulls, layout.nullable), members


def _draw_values(m: Measurement, cuts: tuple[float, ...], n: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n relaxed values drawn from noisy interval counts of one column (``cuts``: the relaxed table's;
    negative counts as 0), uniformly within their interval ([-m, c_1], ..., [c_k, 1 + m], m = T.relaxed_margin),
    and null probabilities (0.9 for a draw of the null slot)."""
    counts = np.clip(np.asarray(m.noisy, dtype=np.float64).reshape(-1, len(cuts) + 2).sum(axis=0), 0, None)
    slot = rng.choice(len(counts), size=n, p=counts / counts.sum()) if counts.sum() > 0 else \
        rng.integers(0, len(counts) - 1, n)
    edges = np.concatenate([[-T.relaxed_margin], cuts, [1.0 + T.relaxed_margin]])
    low, high = edges[np.minimum(slot, len(edges) - 2)], edges[np.minimum(slot, len(edges) - 2) + 1]
    values = low + rng.random(n) * (high - low)
    return values, np.where(slot == len(counts) - 1, 0.9, 0.05)


def _quantile_cuts(values: np.ndarray, k: int | None = None, low: float = 0.0, high: float = 1.0) -> tuple[float, ...]:
    """About k (default rap_cuts) cuts at quantiles of ``values`` (the relaxed table's: public), inside
    [low, high): never inside the margins where the relaxed values of a spike at a bound wait to be clipped."""
    k = T.rap_cuts if k is None else k
    return _strict(np.clip(np.quantile(values, np.linspace(0, 1, k + 2)[1:-1]), low, np.nextafter(high, low)))


def _projection(layout: _Layout, values: np.ndarray, columns: tuple[int, ...], w: np.ndarray,
                by: tuple[str, ...] = (), low: float | None = None, high: float | None = None) -> Intervals:
    """Interval counts of w·x over relaxed numeric ``columns`` (positions), cut at quantiles of the relaxed
    values' projections clipped to [``low``, ``high``] (default: the range w·x takes over [0, 1]^p)."""
    low = float(w.clip(None, 0).sum()) if low is None else low
    high = float(w.clip(0).sum()) if high is None else high
    return layout.intervals(columns, w, _quantile_cuts(values[:, list(columns)] @ w, low=low, high=high), by)


def _candidates(layout: _Layout, table: relaxed.RelaxedTable, options: RapOptions, rng: np.random.Generator,
                by_group: set[str]) -> list:
    """This round's candidate queries (public: built from the domain, the relaxed table and ``rng``):
    categorical 1- and 2-way marginals (3-way with the target), group × column marginals (but those of
    ``by_group``, which step 3b measured and only the records fit, so that the relaxed table's answers
    to them stay off and would be chosen again and again), interval
    counts of each numeric column alone and per value of each categorical column, along random
    directions over pairs of numeric columns, and (with a target) along random directions over all
    numeric columns per target value; only those of at most ``max_cells`` cells × slots."""
    domain = layout.domain
    values = relaxed.to_numpy(table.values).astype(np.float64)
    free, numeric, target = layout.free, layout.numeric, options.target
    out: list = [Marginal((c,)) for c in free]
    out += [Marginal(pair) for pair in itertools.combinations(free, 2)]
    if target is not None:
        out += [Marginal(pair + (target,)) for pair in itertools.combinations([c for c in free if c != target], 2)]
    if layout.groups:
        out += [Marginal(layout.groups + (c,)) for c in free if c not in by_group]
    for j, column in enumerate(numeric):
        cuts = _quantile_cuts(values[:, j])
        out += [layout.intervals((j,), (1.0,), cuts, by) for by in [()] + [(c,) for c in free]]
        if layout.groups and column not in by_group:
            out.append(layout.intervals((j,), (1.0,), cuts, layout.groups))
    for a, b in itertools.combinations(range(len(numeric)), 2):
        angle = rng.uniform(0, math.pi)
        pair = (math.cos(angle), math.sin(angle))
        # cuts within [0, cos + sin]: for angles past 90° that is narrower than the range w·x takes, and
        # puts the cuts where the values are
        out.append(_projection(layout, values, (a, b), np.array(pair), low=0.0, high=pair[0] + pair[1]))
    if target is not None and numeric:
        for _ in range(T.rap_directions):
            w = rng.normal(size=len(numeric))
            out.append(_projection(layout, values, tuple(range(len(numeric))), w / np.linalg.norm(w), (target,)))
    return [q for q in out if int(np.prod(q.shape(domain))) <= options.max_cells]


@dataclass(frozen=True)
class _Rounds:
    """What a round reads: the layout, the relaxed table (projected between rounds), the noisy total, the
    options and the columns measured by group."""

    layout: _Layout
    table: relaxed.RelaxedTable
    total: float
    options: RapOptions
    by_group: set[str]


def _round(private: PrivateTable, rounds: _Rounds, rho: float, rng: np.random.Generator, t: int) -> list[Measurement]:
    """Round ``t``: choose ``per_round`` candidates one at a time, each by the exponential mechanism on an equal
    share of rap_select_share of ``rho``, among those not nested with a chosen one (``_nested``; all unchosen ones
    when none is left), and measure each with an equal share of the rest.  Privacy cost: ``rho``."""
    layout, table, total, options, by_group = rounds.layout, rounds.table, rounds.total, rounds.options, rounds.by_group
    candidates = _candidates(layout, table, options, rng, by_group)
    if not candidates:
        log.warning("rap round %d: no candidate fits the max_cells option (%d); nothing measured", t + 1, options.max_cells)
        return []
    k = min(options.per_round, len(candidates))
    rho_each = rho * (1 - T.rap_select_share) / k
    references = [total * a.reshape(q.shape(layout.domain)) for q, a in
                  zip(candidates, relaxed.answers(table, [layout.relaxed(q) for q in candidates], MAX_BETA))]
    penalties = [math.sqrt(2 / math.pi) * private.sensitivity(q).l2 / math.sqrt(2 * rho_each) *
                 int(np.prod(q.shape(layout.domain))) for q in candidates]
    picked: list[int] = []
    for j in range(k):
        left = [c for c in range(len(candidates)) if c not in picked]
        apart = [c for c in left if not any(_nested(candidates[c], candidates[i]) for i in picked)]
        left = apart or left
        chosen = private.select([candidates[c] for c in left], [references[c] for c in left], rho * T.rap_select_share / k,
                                penalties=[penalties[c] for c in left],
                                label=f"rap round {t + 1}, query {j + 1} of {k}: 1 of {len(left)} candidates")
        picked.append(left[chosen.chosen[0]])
    return [private.measure(candidates[i], rho_each) for i in picked]


def _nested(a, b) -> bool:
    """Whether categorical marginals ``a`` and ``b`` nest (one's columns among the other's): after one is
    chosen, the other is left out of the round's later choices, whose scores still count the error that the
    first will measure (the rounds had measured marital-status × relationship and marital-status ×
    relationship × income together)."""
    return isinstance(a, Marginal) and isinstance(b, Marginal) and (set(a.attrs) <= set(b.attrs) or
                                                                   set(b.attrs) <= set(a.attrs))


def _kind(query) -> str:
    if isinstance(query, Marginal):
        return f"{len(query.attrs)}-way marginals"
    if len(query.columns) > 1:
        return "linear thresholds" if query.by else "numeric-pair projections"
    return "mixed marginals" if query.by else "numeric 1-way interval counts"


def _records(layout: _Layout, table: relaxed.RelaxedTable, members: list[np.ndarray], sizes: np.ndarray,
             rng: np.random.Generator, fits: list[Target], boxes=NO_BOXES) -> SynthesisResult:
    """Each group's rows of output drawn from its relaxed rows in turn (each draw afresh); codes for the
    categorical columns (0 for those the release sets later) and raw values for the numeric ones, both
    then moved toward the projection's ``fits`` (``_fit_records``), the codes then exchanged
    (``_exchange_unmeasured``)."""
    rows = np.concatenate([m[np.arange(s) % len(m)] for m, s in zip(members, sizes) if s > 0 and len(m)] or
                          [np.zeros(0, dtype=np.int64)])
    cat_codes, values = relaxed.sample(table, rows, rng)
    cat_codes, values = _fit_records(layout, cat_codes, values, fits, rng)
    cat_codes = _exchange_unmeasured(layout, cat_codes, fits, rng, boxes)
    domain = layout.domain
    codes = np.zeros((len(rows), len(domain.names)), dtype=np.int32)
    for column, c in zip(layout.categorical, cat_codes):
        codes[:, domain.index(column)] = c
    raw = {}
    for j, column in enumerate(layout.numeric):
        raw[column] = layout.scales[j].raw(values[:, j])
    return SynthesisResult(codes, raw)


def _exchange_unmeasured(layout: _Layout, cat_codes: list[np.ndarray], fits: list[Target],
                         rng: np.random.Generator, boxes=NO_BOXES) -> list[np.ndarray]:
    """Each free categorical column that no interval query reads, exchanged among the records that agree on
    the group columns, every categorical column measured with it and every column an edit rule reads with
    it (lib/records/exchange.py; post-processing): every measured marginal keeps the records' counts, no record
    enters an edit rule's box, and associations nobody measured go.  A column that a rule reads with a
    numeric column stays."""
    if not cat_codes:
        return cat_codes
    codes = np.column_stack(cat_codes)
    position = {c: i for i, c in enumerate(layout.categorical)}
    stay = {j for f in fits if f.query.columns or f.query.bins for j in f.query.by}
    rules = []
    for box in boxes.boxes:
        ruled = [layout.domain.names[c] for c in box.columns]
        if all(c in position for c in ruled):
            rules.append(tuple(position[c] for c in ruled))
        else:
            stay |= {position[c] for c in ruled if c in position}
    groups = tuple(range(len(layout.groups)))
    movable = [j for j in range(len(groups), len(layout.categorical)) if j not in stay]
    together = [f.query.by for f in fits] + rules + [groups + (j,) for j in movable]
    changed = exchange_unmeasured(codes, movable, together, rng)
    log.info("rap: categorical columns exchanged among records that agree on the columns measured with them "
             "(%d values moved)", changed)
    return list(codes.T)


def _fit_records(layout: _Layout, cat_codes: list[np.ndarray], values: np.ndarray, fits: list[Target],
                 rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """The records' categorical codes (group columns fixed) and numeric values (relaxed scale) moved toward
    ``fits`` (every measurement but the group counts, weighted as the projection weighs them, and those only
    the records fit) by lib/estimation/record_fit.py's coordinate descent (post-processing), a nullable column's values
    to and from null too.  The projection leaves values on the wrong side of far cuts, where the sigmoids'
    gradients vanish: the record fit moves them."""
    sizes = tuple(layout.domain.sizes[layout.domain.index(c)] for c in layout.categorical)
    codes = np.column_stack(cat_codes) if cat_codes else np.zeros((len(values), 0), np.int32)
    how = record_fit.RecordFit(-T.relaxed_margin, 1.0 + T.relaxed_margin, tuple(range(len(layout.groups))),
                               layout.nullable)
    codes, values, before, after = record_fit.fit_records(codes, sizes, values, fits, rng, how)
    if fits:
        log.info("rap: the records fitted to %d noisy answers (weighted squared error %.4g -> %.4g)",
                 len(fits), before, after)
    return list(codes.T), values


METHOD = Method("rap", "RAP++: relaxed adaptive projection; numeric columns as raw values without bins "
                       "(mixed marginals, linear thresholds), CPU or GPU", synthesize, RapOptions, check,
                raw_numeric=True)
