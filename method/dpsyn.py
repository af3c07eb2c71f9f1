"""DPSyn (NIST Sprint-2 write-up): planned noisy marginals, consistency, GUM, per-group synthesis.

Measurements (every one Gaussian with L2 sensitivity theta, charged to the ledger):
a noisy total when the planner needs one, noisy group counts, and the regime's
marginals of the non-group columns (none, all 1-way, or all 2-way).  In the
"public" regime the targets are the public file's 2-way marginals (free); in the
"one-way" regime the public 2-way marginals (when given) are kept as weak targets,
made consistent with the noisy 1-way marginals.  With ``--marginals select`` the
one-way and two-way regimes instead measure all 1-way marginals plus the 2-way pairs
chosen from noisy dependency scores (method/selection.py).  Everything after measuring is
post-processing: consistency, a base synthetic set built by GUM (initialised from
public records when given), then per-group records drawn from the base and
GUM-updated toward the same targets (method/groups.py).
"""
from __future__ import annotations

import itertools
import logging

import numpy as np

from lib.consistency import make_consistent
from lib.gum import gum
from lib.marginals import clip_and_normalise, count_marginal
from lib.mechanisms import gaussian_measure
from method.context import RunContext
from method.groups import group_sizes, synthesize_groups
from method.planner import ONE_WAY, PUBLIC, SELECT, TWO_WAY, make_plan, needs_total, total_share
from method.selection import SCORE_SHARE, allocate, greedy_pairs, noisy_scores

log = logging.getLogger(__name__)

BASE_RECORDS = 20_000
PUBLIC_SIGMA = 1e6  # weight of public marginals in consistency: far below any noisy measurement
GROUP_MARGINAL_SHARE = 0.5  # two-way regime with groups: share of the marginal budget on group × column


def synthesize(codes: np.ndarray, ctx: RunContext) -> np.ndarray:
    """Synthetic codes for one run.  Privacy cost: exactly ``ctx.ledger.budget`` (see module doc)."""
    names, sizes = ctx.encoder.names, ctx.encoder.sizes
    group_idx = [names.index(g) for g in ctx.options.group_columns]
    other_idx = [j for j in range(len(names)) if j not in group_idx]
    rho, eps = ctx.ledger.budget, ctx.ledger.epsilon
    has_public = ctx.public_codes is not None

    with ctx.timed("measuring"):
        noisy_total, targets = None, []
        if needs_total(eps, ctx.theta, bool(group_idx), ctx.options.regime):
            share = total_share(eps, ctx.theta)
            total = gaussian_measure(np.array([len(codes)]), (), ctx.theta, share * rho, ctx.rng, ctx.ledger,
                                     "noisy total", ctx.sensitivity_reason("number of rows"))
            noisy_total = total.total
            targets.append(((), total.noisy.reshape(()), total.sigma))  # weighed in the common total
        plan = make_plan(eps, ctx.theta, noisy_total, bool(group_idx), has_public, ctx.options.regime)
        log.info("dpsyn eps=%g: %s", eps, plan.describe(rho))
        if group_idx:
            gsizes = tuple(sizes[j] for j in group_idx)
            label = " × ".join(ctx.options.group_columns)
            groups = gaussian_measure(count_marginal(codes[:, group_idx], gsizes), ctx.options.group_columns, ctx.theta,
                                      plan.group_share * rho, ctx.rng, ctx.ledger, f"group counts ({label})",
                                      ctx.sensitivity_reason(f"counts per {label}"))
            targets.append((tuple(group_idx), groups.noisy, groups.sigma))
        targets += _targets(codes, ctx, group_idx, other_idx, plan, rho)

    with ctx.timed("consistency"):
        consistent = make_consistent([(tuple(names[j] for j in cols), values, sigma)
                                      for cols, values, sigma in targets])
        by_cols = {cols: values for (cols, _, _), values in zip(targets, consistent)}
        total = consistent[0].sum()

    with ctx.timed("sampling"):
        counts = by_cols[tuple(group_idx)].ravel() if group_idx else np.array([total])
        per_group = group_sizes(counts, ctx.max_records, ctx.options.group_floor, ctx.options.group_round)
        global_targets = [(c, v) for c, v in by_cols.items() if c and not set(c) & set(group_idx)]
        per_group_1way = {c[-1]: v.reshape(-1, sizes[c[-1]]) for c, v in by_cols.items()
                          if group_idx and len(c) == len(group_idx) + 1 and list(c[:-1]) == group_idx}
        base = _base_records(ctx, other_idx, global_targets, int(min(BASE_RECORDS, max(total, 1000))))
        return synthesize_groups(base, per_group, group_idx, global_targets, per_group_1way, ctx)


def _targets(codes, ctx: RunContext, group_idx, other_idx, plan, rho) -> list[tuple]:
    """(column indices, values, noise sd) of every marginal the synthesis should match.

    In the two-way regime with groups, GROUP_MARGINAL_SHARE of the marginal budget goes
    to (group columns × column) marginals, so that groups can differ from each other.
    """
    sizes = ctx.encoder.sizes
    public = []
    if ctx.public_codes is not None and plan.regime in (PUBLIC, ONE_WAY):
        for a, b in itertools.combinations(other_idx, 2):
            rows = ctx.public_codes[:, [a, b]]
            rows = rows[(rows >= 0).all(axis=1)]
            public.append(((a, b), count_marginal(rows, (sizes[a], sizes[b])).astype(np.float64), PUBLIC_SIGMA))
    if plan.marginal_share == 0:
        return public
    share = plan.marginal_share * rho
    measured = []
    if plan.regime == TWO_WAY and group_idx:
        per_group = [tuple(group_idx) + (j,) for j in other_idx]
        measured = _measure(codes, ctx, per_group, [GROUP_MARGINAL_SHARE * share / len(per_group)] * len(per_group))
        share *= 1 - GROUP_MARGINAL_SHARE
    if ctx.options.marginals == SELECT and plan.regime != PUBLIC and len(other_idx) > 1:
        queries, rhos = _select(codes, ctx, other_idx, share)
    else:
        queries = list(itertools.combinations(other_idx, 2)) if plan.regime == TWO_WAY else [(j,) for j in other_idx]
        rhos = [share / len(queries)] * len(queries)
    measured += _measure(codes, ctx, queries, rhos)
    if public:  # public marginals rescaled to the noisy total, as weak targets
        scale = max(measured[-1][1].sum(), 1.0)
        public = [(cols, v * scale / max(v.sum(), 1.0), s) for cols, v, s in public]
    return measured + public


def _select(codes, ctx: RunContext, other_idx, share: float) -> tuple[list, list[float]]:
    """All 1-way marginals plus the 2-way marginals chosen from noisy dependency scores
    (method/selection.py), with rho per marginal ∝ cells^(2/3).  Spends exactly ``share``."""
    names, sizes = ctx.encoder.names, ctx.encoder.sizes
    pairs = list(itertools.combinations(other_idx, 2))
    score_rho = SCORE_SHARE * share
    scores = noisy_scores(codes, ctx, pairs, score_rho)
    chosen = greedy_pairs(scores, pairs, sizes, other_idx, ctx.theta, share - score_rho)
    log.info("dpsyn: marginal selection kept %d of %d pairs: %s", len(chosen), len(pairs),
             ", ".join(f"{names[a]} × {names[b]}" for a, b in chosen) or "none")
    queries = [(j,) for j in other_idx] + chosen
    return queries, allocate(queries, sizes, share - score_rho)


def _measure(codes, ctx: RunContext, queries, rhos: list[float]) -> list:
    """Gaussian measurement of each marginal in ``queries``; ``rhos`` gives each one's rho."""
    names, sizes = ctx.encoder.names, ctx.encoder.sizes
    measured = []
    for cols, each in zip(queries, rhos):
        label = " × ".join(names[j] for j in cols)
        m = gaussian_measure(count_marginal(codes[:, list(cols)], tuple(sizes[j] for j in cols)),
                             tuple(names[j] for j in cols), ctx.theta, each, ctx.rng, ctx.ledger,
                             f"{len(cols)}-way marginal {label}", ctx.sensitivity_reason(f"marginal of {label}"))
        measured.append((cols, m.noisy, m.sigma))
    sigmas = [s for _, _, s in measured]
    log.info("dpsyn: %d marginals over %s measured, rho %.3g in all (noise sd %.3g to %.3g per cell)",
             len(measured), ", ".join(names[j] for j in queries[0]) + ("..." if len(queries) > 1 else ""),
             sum(rhos), min(sigmas), max(sigmas))
    return measured


def _base_records(ctx: RunContext, other_idx, targets, n: int) -> np.ndarray:
    """n records over all columns whose non-group columns follow ``targets`` (GUM).

    Start: random public records when given, else independent draws from the targets'
    1-way projections.  Group columns are left 0 (set per group later).
    """
    sizes = ctx.encoder.sizes
    records = np.zeros((n, len(sizes)), dtype=np.int32)
    if ctx.public_codes is not None:
        records[:, other_idx] = ctx.public_codes[ctx.rng.integers(0, len(ctx.public_codes), n)][:, other_idx]
        records[records < 0] = 0
    else:
        for j in other_idx:
            cols, values = next((c, v) for c, v in targets if j in c)
            axis = tuple(i for i, c in enumerate(cols) if c != j)
            records[:, j] = ctx.rng.choice(sizes[j], size=n, p=clip_and_normalise(values.sum(axis=axis)))
    return gum(records, sizes, targets, ctx.rng)
