"""What a release says in its log, in plain words: the plan of the data (columns, groups, individuals, the
structure found in public data), the reweighting's clipping bounds, and each run's summary.  Public facts
only: the schema, the public side and the ledger (a private count is logged elsewhere, and only with
--show-private-counts)."""
from __future__ import annotations

import logging

from dpsyn.dataloader.inputs import PublicSide
from dpsyn.lib.privacy.accounting import classic_rho_from_eps_delta
from dpsyn.stages.reweight import ReweightSpec
from dpsyn.stages.run import RunRelease, RunSetup

log = logging.getLogger("dpsyn")


def log_plan(side: PublicSide, setup: RunSetup) -> None:
    """The encoded domain, the groups, how individuals are bounded, the structure's notes and the runs."""
    schema, group_columns, distinct, id_column = side.schema, setup.group_columns, setup.distinct, setup.id_column
    log.info("schema: %d columns; encoded domain: %s", len(schema.columns),
             ", ".join(f"{c.column.name} {c.describe()}" for c in side.encoder.coders))
    log.info("groups: %s", " × ".join(group_columns) if group_columns else "none (one group)")
    if id_column:
        log.info("individuals: rows are grouped by %s; each keeps at most max_records_per_individual rows "
                 "(chosen at random) and the output gets fresh ids", id_column)
    else:
        log.info("individuals: no id column; each individual is taken to contribute at most "
                 "max_records_per_individual rows as the parameters declare, and noise is scaled by it")
    if distinct:
        log.info("individuals: no two rows of one individual share %s (%s); marginals that include %s "
                 "get L2 sensitivity sqrt(theta) instead of theta", " × ".join(distinct),
                 "enforced: one random row per individual per value is kept" if id_column else
                 "as the parameters declare; without an id column this cannot be checked",
                 "it" if len(distinct) == 1 else "all of them")
    for note in side.structure.notes:
        log.info("%s", note)
    log.info("method: %s; runs: %s", setup.spec.name,
             "; ".join(f"eps={r.epsilon:g} delta={r.delta:.3g} theta={r.max_records_per_individual} "
                       f"max_records={r.max_records}" for r in schema.runs))


def log_reweighting(spec: ReweightSpec) -> None:
    """The moment columns' clipping bounds and where they came from (the plan gives their noise)."""
    if spec.sources:
        kept = {c for c, _, _ in spec.bounds}
        dropped = [c for c, _ in spec.sources if c not in kept]
        log.info("reweighting: moment columns clipped per record to %s%s", ", ".join(
            f"{c} [{lo:g}, {hi:g}] ({dict(spec.sources)[c]})" for c, lo, hi in spec.bounds) or "none",
            f"; left out, each of one value: {', '.join(dropped)}" if dropped else "")


def summarise(r: RunRelease, method: str) -> None:
    """One run's budget, spending, rows and seconds per stage."""
    led = r.ledger
    times = ", ".join(f"{k} {v:.2f}s" for k, v in r.timings.items())
    log.info("run eps=%g delta=%.3g theta=%d: rho budget %.5g (the classic conversion would give %.5g), "
             "spent %.5g = eps %.4g; method %s; %d rows; %s",
             r.epsilon, r.run.delta, r.run.max_records_per_individual, led.budget,
             classic_rho_from_eps_delta(r.epsilon, r.run.delta), led.spent, led.epsilon_spent(), method,
             len(r.table), times)
