"""DPSyn (NIST Sprint-2 write-up): planned noisy marginals, consistency, GUM, per-group synthesis.

Measurements (every one through the private table: Gaussian, sensitivity from theta,
charged to the ledger): a noisy total when the planner needs one, noisy group counts,
and the regime's marginals of the non-group columns (none, all 1-way, or all 2-way).
In the "public" regime the targets are the public file's 2-way marginals (free); in the
"one-way" regime the public 2-way marginals (when given) are kept as weak targets,
made consistent with the noisy 1-way marginals.  With ``--marginals select`` the
one-way and two-way regimes instead measure all 1-way marginals plus the 2-way pairs
chosen from noisy dependency scores (method/selection.py).  Everything after measuring is
post-processing: the noisy group counts pulled toward the product of their one-way totals
(empirical Bayes, method/groups.py ``smoothed_counts``), consistency, a base synthetic set
built by GUM (initialised from public records when given), then per-group records drawn
from the base and GUM-updated toward the same targets (method/groups.py).  Under the
``auto`` planner a group is fitted only to targets of its own (group × column
marginals): refitting a group of a few dozen rows to the global targets the base already
follows distorts it (the base's pairs break).  There,
from public records, a group's rows are whole base records drawn with weights raked to its
own marginals (no GUM moves, which make records the base never held); from independent draws,
GUM rewrites only the columns of the group's targets.  In the two-way regime without public
records and with few groups (dpsyn_joint_groups), the group columns are columns of the base, and a share
of the marginals' budget goes to adaptive rounds (method/adaptive.py) after the pairs (dpsyn_triple_share).
"""
from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass

import numpy as np

from dpsyn.lib.estimation.consistency import common_total, make_consistent
from dpsyn.lib.estimation.gum import gum
from dpsyn.lib.records.marginals import count_marginal
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.privacy.plan import Node
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import DependencyScores, Marginal
from dpsyn.lib.estimation.smoothing import denoise
from dpsyn.lib.tuning import T
from dpsyn.method.base import Method, PublicData, RunContext, SynthesisResult, option, spread
from dpsyn.method.dependent_pairs import measure_dependent_pairs
from dpsyn.method.group_columns import measure_group_columns
from dpsyn.method.groups import (GUM_MOVES, OWN_RAKE, OWN_REWRITE, RAKE, REWRITE, GroupFit, GroupTargets, assigned_rows, base_size, group_sizes, own_pools, smoothed_counts, start_records, synthesize_groups)
from dpsyn.method.adaptive import RoundsSpec, measure_adaptively
from dpsyn.method.planner import (ADAPTIVE, ALL, AUTO, MARGINAL_CHOICES, ONE_WAY, PLANNERS, PUBLIC, REGIMES, SELECT,
                                  TWO_WAY, TableShape, make_plan, needs_total, total_share)
from dpsyn.method.selection import allocate, greedy_pairs

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class DpsynOptions:
    regime: str | None = option(None, "force the planner's regime (for experiments); default: chosen from the "
                                      "budget", choices=REGIMES, expert=True)
    marginals: str = option(ALL, "one-way and two-way regimes: measure the regime's marginals (all 1-way or all "
                                 "2-way), or 'select': all 1-way plus the 2-way pairs chosen from noisy dependency "
                                 "scores (PrivSyn), budget per marginal ∝ cells^(2/3); the scores are charged",
                            choices=MARGINAL_CHOICES, expert=True)
    group_floor: int = option(0, "raise every positive noisy group size to at least this many rows", type=int,
                              minimum=0, expert=True)
    planner: str = option(AUTO, "auto: the write-up's regimes, except that the public regime is chosen where the "
                                "adaptive rounds' selection could not tell marginals apart, and that where it would "
                                "measure 1-way or 2-way marginals, the adaptive rounds are used unless measuring "
                                "every pair (and every group × column marginal) is cheap and the table has groups or "
                                "a public file, and "
                                "groups are refitted only to marginals of their own; write-up: the write-up's "
                                "regimes and per-group refits only",
                          choices=PLANNERS, expert=True)
    max_cells: int = option(20_000, "adaptive regime: the largest marginal (in cells) a round may measure",
                            type=int, minimum=1, expert=True)
    group_round: int = option(1, "round noisy group sizes to a multiple of this (the write-up's K); where groups "
                                 "share the global targets (public and one-way regimes) groups of equal size then "
                                 "share one synthesized set of records, which saves time", type=int, minimum=1, expert=True)


def synthesize(private: PrivateTable, public: PublicData | None, ctx: RunContext,
               options: DpsynOptions) -> SynthesisResult:
    """Synthetic codes for one run.  Privacy cost: exactly what remains of the run's budget (all
    of it unless the release measured group-level columns first; see module doc)."""
    domain = ctx.domain
    group_idx, other_idx = _columns(ctx)
    rho, eps, theta = private.remaining, ctx.epsilon, private.theta
    public_codes = public.codes if public is not None else None

    with ctx.timed("measuring"):
        noisy_total, targets = None, list[Target]()
        if needs_total(eps, theta, bool(group_idx), options.regime):
            share = total_share(eps, theta, bool(group_idx), rho if options.planner == AUTO else None)
            counted = private.measure(Marginal(()), share * rho, "noisy total")
            noisy_total = counted.total
            targets.append(Target((), counted.noisy.reshape(()), counted.sigma))  # weighed in the common total
        pair_cells = tuple(domain.sizes[a] * domain.sizes[b] for a, b in itertools.combinations(other_idx, 2))
        group_cells = tuple(domain.size(ctx.group_columns) * domain.sizes[j] for j in other_idx) if group_idx else ()
        shape = TableShape(bool(group_idx), public_codes is not None, len(other_idx), pair_cells, group_cells,
                           domain.size(ctx.group_columns) if group_idx else 1,
                           sum(domain.sizes[j] > 1 for j in other_idx), len(group_idx))
        plan = make_plan(eps, theta, noisy_total, shape, options.regime, rho if options.planner == AUTO else None)
        log.info("dpsyn eps=%g: %s", eps, plan.describe(rho))
        base: np.ndarray | None = None
        if plan.rounds is not None:  # the adaptive regime
            spec = RoundsSpec(plan.group_share * rho, options.max_cells, earlier=tuple(targets), rounds=plan.rounds,
                              per_row=plan.base_per_row)
            model = measure_adaptively(private, public_codes, ctx, group_idx, other_idx, spec)
            by_cols, total, base = model.domain_marginals(), model.total, model.domain_records()
        else:
            if group_idx:
                label = " × ".join(ctx.group_columns)
                groups = private.measure(Marginal(ctx.group_columns), plan.group_share * rho,
                                         f"group counts ({label})")
                counts = smoothed_counts(groups.noisy, groups.sigma, ctx.group_columns)
                targets.append(Target(tuple(group_idx), counts, groups.sigma))
            # the joint base's rounds get dpsyn_triple_share of the marginals' rho: what _targets leaves
            targets += _targets(private, public_codes, ctx, options, plan,
                                rho * (1 - T.dpsyn_triple_share) if plan.joint_rounds else rho, targets)
            if plan.joint:  # the group columns in the base, with everything measured so far, then the rounds
                log.info("dpsyn: few groups: the group columns are fitted in the base with the other columns, %s"
                         "and each group is drawn from its own records",
                         "rounds measure what it gets most wrong, " if plan.joint_rounds else "")
                spec = RoundsSpec(0.0, options.max_cells, earlier=tuple(targets), per_row=plan.base_per_row,
                                  picks=T.dpsyn_triple_picks, count=T.dpsyn_triple_rounds)
                model = measure_adaptively(private, None, ctx, [], other_idx + group_idx, spec)
                by_cols, total, base = model.domain_marginals(), model.total, model.domain_records()

    if base is None:
        with ctx.timed("consistency"):
            consistent = make_consistent([Target(tuple(domain.names[j] for j in t.query), t.noisy, t.sigma)
                                          for t in targets])
            by_cols = {t.query: values for t, values in zip(targets, consistent)}
            total = consistent[0].sum()

    with ctx.timed("sampling"):
        sizes = domain.sizes
        counts = by_cols[tuple(group_idx)].ravel() if group_idx else np.array([total])
        per_group = group_sizes(counts, ctx.max_records, options.group_floor, options.group_round)
        if plan.regime == ADAPTIVE and model.fitted is not None:
            return SynthesisResult(model.draw_groups(per_group, ctx.rng))
        global_targets = _global_targets(by_cols, group_idx, other_idx)
        if plan.regime == ADAPTIVE:  # group × column or, where measured, column by some group columns
            per_group_1way = model.per_group_marginals()
        else:
            per_group_1way = {c[-1]: v.reshape(-1, sizes[c[-1]]) for c, v in by_cols.items()
                              if group_idx and len(c) == len(group_idx) + 1 and list(c[:-1]) == group_idx}
        if plan.joint:  # each group drawn from its own base records
            assert base is not None, "the joint base is fitted first"
            codes = synthesize_groups(base, per_group, group_idx, GroupTargets(global_targets, per_group_1way),
                                      sizes, ctx.rng, GroupFit(OWN_RAKE, ctx.jobs, boxes=ctx.boxes,
                                                               pieces=own_pools(base, per_group, group_idx, sizes),
                                                               run=ctx.run_tasks))
            return SynthesisResult(codes)
        if base is None:
            n = base_size(total, per_row=plan.base_per_row)
            start = start_records(public_codes, other_idx, global_targets, n, sizes, ctx.rng)
            base = gum(start, sizes, global_targets, ctx.rng, boxes=ctx.boxes)
        own_only = plan.regime == ADAPTIVE or (options.planner == AUTO and bool(group_idx))
        fit = GUM_MOVES if not own_only else RAKE if public_codes is not None else REWRITE
        pieces = None
        # each group rewrites the base records assigned to it; not in the public regime, whose few noisy per-group
        # columns then tie the group to the other columns wrongly
        if (fit == REWRITE and plan.regime != PUBLIC and per_group_1way
                and len(base) * len(per_group) <= T.groups_assign_cells):
            log.info("dpsyn: each base record is assigned to one group as the groups' 1-way marginals say, and "
                     "each group's records are rewritten toward its own 1-way marginals")
            fit, pieces = OWN_REWRITE, assigned_rows(base, per_group, per_group_1way, ctx.rng)
        codes = synthesize_groups(base, per_group, group_idx, GroupTargets(global_targets, per_group_1way), sizes,
                                  ctx.rng, GroupFit(fit, ctx.jobs, reuse_equal_sizes=options.group_round > 1,
                                                    boxes=ctx.boxes, own_targets_only=own_only, pieces=pieces,
                                                    run=ctx.run_tasks))
    return SynthesisResult(codes)


def _global_targets(by_cols: dict, group_idx, other_idx) -> list[Target]:
    """The consistent marginals without group columns, plus the 1-way projection of every
    other column that none of them covers (one measured only per group, as group × column),
    so that every column has a target to fit each group's own margins to."""
    targets = [Target(c, v) for c, v in by_cols.items() if c and not set(c) & set(group_idx)]
    covered = {j for t in targets for j in t.query}
    for j in other_idx:
        if j not in covered:
            cols, values = next((c, v) for c, v in by_cols.items() if j in c)
            targets.append(Target((j,), values.sum(axis=tuple(i for i, c in enumerate(cols) if c != j))))
    return targets


def _columns(ctx: RunContext) -> tuple[list[int], list[int]]:
    """(the group columns' indices, the indices of the other columns the method synthesizes: not skipped)."""
    domain = ctx.domain
    group_idx = domain.indices(ctx.group_columns)
    return group_idx, [j for j in range(len(domain.names)) if j not in group_idx and domain.names[j] not in ctx.skip]


def _targets(private: PrivateTable, public_codes, ctx: RunContext, options: DpsynOptions, plan, rho,
             noisy: list[Target]) -> list[Target]:
    """Every marginal the synthesis should match (a Target: column indices, values, noise sd), after the
    ``noisy`` ones already measured (total, group counts).

    In the two-way regime with groups, dpsyn_group_marginal_share of the marginal budget goes
    to (group columns × column) marginals, so that groups can differ from each other (all
    of it when there is no pair of other columns to measure), each with rho ∝ its cells^(2/3),
    the split that minimises their summed expected L1 noise (method/selection.py ``allocate``;
    the pairs keep an even split).  Where the plan has a group-column share
    (public regime, groups, no public file), the columns that differ most between groups are then
    measured per group (method/group_columns.py), and where it has a pair share, the pairs of columns that
    depart most from independence (method/dependent_pairs.py).  Public marginals are scaled
    to the noisy total (the inverse-variance weighted mean of every noisy measurement's
    total) in every regime: consistency spreads any gap in totals evenly over the cells,
    which would flatten their shape.
    """
    sizes = ctx.domain.sizes
    group_idx, other_idx = _columns(ctx)
    pairs: list[tuple[int, ...]] = list(itertools.combinations(other_idx, 2))
    public = []
    if public_codes is not None and plan.regime in (PUBLIC, ONE_WAY):
        for cols in pairs or [(j,) for j in other_idx]:
            rows = public_codes[:, list(cols)]
            rows = rows[(rows >= 0).all(axis=1)]
            shape = tuple(sizes[j] for j in cols)
            public.append(Target(cols, count_marginal(rows, shape).astype(np.float64), T.dpsyn_public_sigma))
    share = plan.marginal_share * rho
    measured = []
    if share > 0 and plan.regime == TWO_WAY and group_idx:
        per_group = [tuple(group_idx) + (j,) for j in other_idx]
        per_group_share = T.dpsyn_group_marginal_share * share if pairs else share
        measured = _measure(private, ctx, per_group, allocate(per_group, sizes, per_group_share))
        share = share * (1 - T.dpsyn_group_marginal_share) if pairs else 0.0
    if share > 0:
        if options.marginals == SELECT and plan.regime != PUBLIC and len(other_idx) > 1:
            queries, rhos = _select(private, ctx, other_idx, share)
        else:
            queries = pairs if plan.regime == TWO_WAY and pairs else [(j,) for j in other_idx]
            rhos = [share / len(queries)] * len(queries)
        measured += _measure(private, ctx, queries, rhos)
    if public_codes is None:
        measured = _denoised(ctx, measured)
    one_ways = {t.query[0]: t for t in measured if len(t.query) == 1}
    if plan.group_column_share > 0:
        counts = next(t.noisy for t in noisy if t.query == tuple(group_idx))
        measured += measure_group_columns(private, ctx, group_idx, counts, one_ways, plan.group_column_share * rho)
    if plan.pair_share > 0:
        total = common_total([t.noisy for t in noisy + measured], [t.sigma for t in noisy + measured])
        measured += measure_dependent_pairs(private, ctx, one_ways, total, plan.pair_share * rho)
    if public:  # weak targets, rescaled to the noisy total
        scale = common_total([t.noisy for t in noisy + measured], [t.sigma for t in noisy + measured])
        public = [Target(t.query, t.noisy * scale / max(t.noisy.sum(), 1.0), t.sigma) for t in public]
    return measured + public


def _denoised(ctx: RunContext, measured: list[Target]) -> list[Target]:
    """``measured`` with each noisy 1-way marginal smoothed along its ordered codes or shrunk toward flat where
    Stein's risk estimate says that pays (lib/estimation/smoothing.py ``denoise``; at a tiny budget, noise that swamps a
    column's shape).  Post-processing: no privacy cost."""
    names, out, done = ctx.domain.names, [], []
    for cols, values, sigma, _ in measured:
        if len(cols) == 1:
            values, how = denoise(values, sigma, ctx.domain.ordered.get(names[cols[0]], 0))
            if how:
                done.append(f"{names[cols[0]]} ({how})")
        out.append(Target(cols, values, sigma))
    if done:
        log.info("dpsyn: noisy 1-way marginals smoothed or shrunk toward flat (post-processing): %s", ", ".join(done))
    return out


def _select(private: PrivateTable, ctx: RunContext, other_idx, share: float) -> tuple[list, list[float]]:
    """All 1-way marginals plus the 2-way marginals chosen from noisy dependency scores
    (method/selection.py), with rho per marginal ∝ cells^(2/3).  Spends exactly ``share``."""
    names, sizes = ctx.domain.names, ctx.domain.sizes
    pairs = list(itertools.combinations(other_idx, 2))
    score_rho = T.selection_score_share * share
    scores = private.measure(DependencyScores(tuple((names[a], names[b]) for a, b in pairs)), score_rho,
                             f"dependency scores ({len(pairs)} pairs of {len(names)} columns)").noisy
    chosen = greedy_pairs(scores, pairs, sizes, other_idx, private.theta, share - score_rho)
    log.info("dpsyn: marginal selection kept %d of %d pairs: %s", len(chosen), len(pairs),
             ", ".join(f"{names[a]} × {names[b]}" for a, b in chosen) or "none")
    queries: list[tuple[int, ...]] = [(j,) for j in other_idx]
    queries += chosen
    return queries, allocate(queries, sizes, share - score_rho)


def _measure(private: PrivateTable, ctx: RunContext, queries, rhos: list[float]) -> list:
    """Gaussian measurement of each marginal in ``queries`` (column indices); ``rhos`` gives each one's rho."""
    names = ctx.domain.names
    measured = []
    for cols, each in zip(queries, rhos):
        m = private.measure(Marginal(tuple(names[j] for j in cols)), each)
        measured.append(Target(cols, m.noisy, m.sigma))
    sigmas = [t.sigma for t in measured]
    log.info("dpsyn: %d marginals over %s measured, rho %.3g in all (noise sd %s rows per cell)",
             len(measured), ", ".join(names[j] for j in queries[0]) + ("..." if len(queries) > 1 else ""),
             sum(rhos), spread(sigmas))
    return measured


def plan(options: DpsynOptions, epsilon: float, theta: int, has_groups: bool, rho: float) -> tuple[Node, ...]:
    """dpsyn's budget nodes known before any data is read: the noisy total where the planner needs one
    (its share from epsilon, theta, the method's rho and whether there are groups: planner.total_share), and the rest, which the planner splits at run time from
    that total (method/planner.py)."""
    if not needs_total(epsilon, theta, has_groups, options.regime):
        return (Node("marginals", 1.0, "regime and split chosen by the planner at run time"),)
    share = total_share(epsilon, theta, has_groups, rho if options.planner == AUTO else None)
    sigma = theta / math.sqrt(2 * share * rho)
    return (Node("noisy total", share, f"the number of rows, noise sd {sigma:.3g} rows"),
            Node("marginals", 1.0 - share, "regime and split chosen by the planner at run time from the noisy total"))


METHOD = Method("dpsyn", "planned noisy marginals, consistency and GUM, per group (the DPSyn Sprint-2 write-up)",
                synthesize, DpsynOptions, plan=plan)
