"""One run of a release: the private table (bounding, the run's ledger, its own noise), the stages around
the method each inside its plan node, the method, then decoding to the schema's values and the final
check of the edit rules.  What every run of a release shares travels as one ``RunSetup``."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpsyn.budget import METHOD, plan_run
from dpsyn.dataloader.comparisons import settle_comparisons
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.inputs import Prepared, PublicSide
from dpsyn.dataloader.rules import violations
from dpsyn.dataloader.schema import Run
from dpsyn.dataloader.structure import Structure
from dpsyn.lib.records.constraints import Boxes
from dpsyn.lib.records.marginals import cell_index
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.plan import Plan
from dpsyn.lib.privacy.private_table import Measurement, PrivateRecords, PrivateTable, Selection
from dpsyn.lib.privacy.unit import PrivacyUnit
from dpsyn.lib.runtime.threads import one_blas_thread
from dpsyn.method.base import Method, OptionError, RunContext, SynthesisResult
from dpsyn.stages import Env
from dpsyn.stages.pipeline import Pipeline, records_of, stages_of
from dpsyn.stages.reweight import ReweightSpec, reweight_cell_problems, with_bounds

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSetup:
    """What every run of a release shares: the method and its options, the group columns, worker processes,
    the id column and the columns distinct per individual (each run's ``unit`` with its theta), the stages
    around the method (default: the structure's group-level columns and values inside bins, no reweighting)
    and the engine that bounds, holds and counts the records and runs the groups' tasks (default: a
    LocalEngine of ``jobs``)."""

    spec: Method
    options: Any
    group_columns: tuple[str, ...] = ()
    jobs: int = 1
    id_column: str | None = None
    distinct: tuple[str, ...] = ()
    pipeline: Pipeline | None = None
    engine: Any = None

    def unit(self, run: Run) -> PrivacyUnit:
        """The run's privacy unit: its theta, this setup's id column and distinct columns."""
        return PrivacyUnit(run.max_records_per_individual, self.distinct, self.id_column)


@dataclass(frozen=True)
class RunOutput:
    """What one run's synthesis produced: the method's result, the ledger, the measurements, stage times."""

    result: SynthesisResult
    ledger: Ledger
    measurements: tuple[Measurement | Selection, ...]
    timings: dict[str, float]


@dataclass(frozen=True)
class RunRelease:
    """One run's release: its parameters, the synthetic table (schema columns; categorical columns
    as Categoricals of the schema's values, numeric ones as numbers with NA for the null token),
    the ledger, every measurement the method made, seconds per stage and, where rows were linked into
    individuals (stages/individuals.py), each row's individual."""

    run: Run
    table: pd.DataFrame
    ledger: Ledger
    measurements: tuple[Measurement | Selection, ...]
    timings: dict[str, float] = field(default_factory=dict)
    individuals: np.ndarray | None = None

    @property
    def epsilon(self) -> float:
        return self.run.epsilon


def pipeline_for(side: PublicSide, spec: Method, reweighting: ReweightSpec | None, bin_values: bool) -> Pipeline:
    """The stages around the method, reweighting's moment bounds filled from public facts."""
    if reweighting is not None:
        reweighting = with_bounds(reweighting, side.encoder.domain.ranges, side.public.numeric if side.public else None)
    return stages_of(side.encoder, side.structure, spec, reweighting, bin_values, side.schema.individual)


def check_before_measuring(side: PublicSide, setup: RunSetup) -> None:
    """Every refusal that needs only public facts, before the private file is read: each run's privacy unit
    can be enforced (a distinct declaration needs ids where theta > 1); reweighting's marginals fit the cell
    cap; the stages around the method leave it enough of each run's rho.  OptionError lists each problem."""
    pipeline = setup.pipeline
    assert pipeline is not None, "the setup's stages are known before anything is measured"
    problems = setup.unit(max(side.schema.runs, key=lambda r: r.max_records_per_individual)).problems()
    if pipeline.reweighting is not None:
        problems += reweight_cell_problems(pipeline.reweighting, side.encoder.domain)
    problems += pipeline.problems()
    if pipeline.linking is not None and setup.id_column is not None:  # else nothing to check yet (dpsyn plan)
        problems += pipeline.linking.problems(setup.unit(side.schema.runs[0]))
    if problems:
        raise OptionError(problems)


@one_blas_thread
def synthesize_run(side: PublicSide, table: PrivateRecords, run: Run, setup: RunSetup,
                   seeds: list[np.random.SeedSequence], plan: Plan | None = None) -> RunOutput:
    """Build the run's private table (bounding to the setup's privacy unit, a ledger holding ``plan``, its own
    noise generator), then run the stages around the method (stages/): every
    stage's ``before``, the method, every stage's ``after``, each stage and the method inside its own
    plan node (budget.py), so each spends exactly that node's rho.  ``plan``: default,
    ``budget.plan_run`` of the setup's pipeline.  ``seeds``: bounding, noise, synthesis (decoding is the
    fourth, used by the caller)."""
    encoder, structure, engine = side.encoder, side.structure, setup.engine
    pipeline = setup.pipeline if setup.pipeline is not None else stages_of(encoder, structure, setup.spec, None, True)
    plan = plan or plan_run(run, pipeline, setup.spec, setup.options, bool(setup.group_columns))
    ledger, domain = Ledger(run.epsilon, run.delta, plan=plan), encoder.domain
    stages = [s for s in pipeline.stages() if s.active(run.max_records_per_individual)]
    if any(s.reads_individuals for s in stages):
        table = dataclasses.replace(table, by_individual=True)
    start = time.perf_counter()
    private = PrivateTable(table, domain, setup.unit(run), ledger, np.random.default_rng(seeds[1]),
                           np.random.default_rng(seeds[0]), engine)
    bounding = time.perf_counter() - start
    skip = structure.skipped(domain.names)
    known = known_columns(encoder, setup.group_columns, structure.boxes, skip)
    if known:
        log.info("one value in the schema: %s (every record holds it; not measured)", ", ".join(known))
    skip += known
    skipped = set(domain.indices(skip))
    ctx = RunContext(domain, run.epsilon, run.delta, run.max_records, setup.group_columns, setup.jobs,
                     np.random.default_rng(seeds[2]), skip=skip,
                     boxes=Boxes(tuple(b for b in structure.boxes.boxes if not skipped & set(b.columns)),
                                 structure.boxes.witness),
                     tasks=engine.map if engine is not None else None)
    env = Env(encoder, ctx, structure)
    with ctx.timed("measuring"):
        for stage in stages:
            if stage.node is not None:
                with private.spending(stage.node):
                    stage.before(private, env)
    with private.spending(METHOD):
        result = setup.spec.synthesize(private, side.public, ctx, setup.options)
    if known:  # their one code, whatever the method left there
        codes = np.array(result.codes, copy=True)
        codes[:, domain.indices(known)] = 0
        result = dataclasses.replace(result, codes=codes)
    with ctx.timed("structure"):
        records = records_of(result.codes, result.raw, encoder)
    for stage in stages:
        with ctx.timed(stage.timer), (private.spending(stage.node) if stage.node else contextlib.nullcontext()):
            records = stage.after(private, records, env)
    return RunOutput(SynthesisResult(records.codes, records.raw, records.individuals), ledger, private.released,
                     {"bounding": bounding, **ctx.timings})


def known_columns(encoder: Encoder, group_columns: tuple[str, ...], boxes: Boxes,
                  skipped: tuple[str, ...]) -> tuple[str, ...]:
    """The columns whose value the schema alone gives: one category, or a numeric range of one value (not one
    bin of many values); not a group column, read by no edit rule.  No method measures them (no budget: what
    every record holds is public); every released record holds their one value.  None where they would leave
    the method no column of its own (every other column a group column or in ``skipped``, set by the release):
    the method then measures them as any column."""
    domain, ruled = encoder.domain, {c for box in boxes.boxes for c in box.columns}

    def one_value(name: str) -> bool:
        coder = encoder.coder(name)
        return coder.categories is not None or coder.column.low == coder.column.high

    known = tuple(n for n, size in zip(domain.names, domain.sizes)
                  if size == 1 and n not in group_columns and domain.index(n) not in ruled and one_value(n))
    rest = [n for n in domain.names if n not in known and n not in skipped and n not in group_columns]
    return known if rest else ()


def release_run(data: Prepared, run: Run, setup: RunSetup, seeds: list[np.random.SeedSequence],
                plan: Plan) -> RunRelease:
    """One run synthesized (``synthesize_run``), decoded with the fourth seed and checked against the edit
    rules; RuntimeError if a released record breaks one (repair guarantees none)."""
    side = data.side
    out = synthesize_run(side, data.table, run, setup, seeds, plan)
    start = time.perf_counter()
    typed = decode_release(side.encoder, out.result, side.structure, side.schema.rules,
                           np.random.default_rng(seeds[3]))
    broken = {rule: n for rule, n in violations(typed, side.schema.rules,
                                                {c.name: c for c in side.schema.columns}).items() if n}
    if broken:  # repair guarantees none; this is the final check
        raise RuntimeError(f"released records break edit rules: {broken}")
    return RunRelease(run, typed, out.ledger, out.measurements,
                      {**out.timings, "decoding": time.perf_counter() - start}, out.result.individuals)


def decode_release(encoder: Encoder, result: SynthesisResult, structure: Structure, rules,
                   rng: np.random.Generator) -> pd.DataFrame:
    """The typed synthetic table; a group-level column is decoded once per cell of its ``within``
    columns (every row of a cell shares the first row's value); values that break a comparison between two
    columns inside one interval are moved within their bins (dataloader/comparisons.py)."""
    typed = encoder.decode(result.codes, rng, result.raw)
    domain = encoder.domain
    for column, within in structure.group_level:
        cells = cell_index(result.codes[:, domain.indices(within)], domain.shape(within))
        _, first, inverse = np.unique(cells, return_index=True, return_inverse=True)
        typed[column] = typed[column].iloc[first[inverse]].reset_index(drop=True)
    return settle_comparisons(typed, rules, {c.column.name: c for c in encoder.coders})
