"""The stages a release runs around its method (the interface: stages/__init__.py), and which of them a run needs.

``stages_of`` reads from public facts alone (the encoder, the record structure, the method, the
reweighting request) which stages measure and what: group-level numeric columns, numeric columns
whose values inside their bins are measured, reweighting.  ``Pipeline.stages`` lists them in the
order their ``after`` steps run: group-level values, the structure, values inside bins,
reweighting, linking rows into individuals.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.individuals import Individual
from dpsyn.dataloader.structure import Structure
from dpsyn.lib.records.marginals import cell_index
from dpsyn.lib.privacy.accounting import gaussian_sigma
from dpsyn.lib.privacy.plan import Node
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.tuning import T
from dpsyn.method.base import Method
from dpsyn.stages import Env, Records, Stage
from dpsyn.stages.bin_values import detail_columns, measure_bin_values
from dpsyn.stages.group_values import measure_group_values, rounds_needed
from dpsyn.stages.individuals import IndividualLinks, Linking
from dpsyn.stages.reweight import ReweightSpec, noise_in_units, reweight_rows
from dpsyn.stages.structure import finish

GROUP_VALUES, BIN_VALUES, REWEIGHTING = "group-level values", "values inside bins", "reweighting"


@dataclass(frozen=True)
class GroupLevel:
    """A group-level numeric column the release measures itself: one value per cell of ``within``,
    found on the grid low + k*step of [low, high]."""

    column: str
    within: tuple[str, ...]
    low: float
    high: float
    step: float


def group_value_share(columns: int) -> float:
    """Each group-level numeric column's share of a run's rho: group_values_share, shrunk so that all of
    them together take at most group_values_cap."""
    return min(T.group_values_share, T.group_values_cap / columns) if columns else 0.0


class GroupValues(Stage):
    """Group-level numeric columns (DENSITY within PUMA): one value per cell of their ``within``
    columns, measured before the method (stages/group_values.py), set in every record after it."""

    node = GROUP_VALUES

    def __init__(self, columns: tuple[GroupLevel, ...]):
        self.columns = columns
        self.values: dict = {}

    def share(self) -> float:
        return group_value_share(len(self.columns)) * len(self.columns)

    def note(self, rho: float, theta: int) -> str:
        return "one value per group cell, by noisy argmax"

    def children(self, rho: float, theta: int) -> tuple[Node, ...]:
        out = []
        for g in self.columns:
            rounds = rounds_needed(g.low, g.high, g.step)
            sigma = gaussian_sigma(theta, rho / len(self.columns) / rounds)
            out.append(Node(g.column, 1 / len(self.columns), f"per {' × '.join(g.within)}: {rounds} round(s) of "
                            f"noisy histograms, noise sd {sigma:.3g} rows per bin"))
        return tuple(out)

    def before(self, private: PrivateTable, env: Env) -> None:
        """Privacy cost: the node's rho, an equal part per column."""
        rho = private.remaining / len(self.columns)
        self.values = {g.column: (g.within, measure_group_values(private, g.column, g.within, g.low, g.high, g.step,
                                                                 rho)) for g in self.columns}

    def after(self, private: PrivateTable, records: Records, env: Env) -> Records:
        domain = env.encoder.domain
        for column, (within, values) in self.values.items():
            cells = cell_index(records.codes[:, domain.indices(within)], domain.shape(within))
            records.raw[column] = values[cells]
            records.codes[:, domain.index(column)] = env.encoder.coder(column).encode(records.raw[column])
        return records


class Finishing(Stage):
    """The structure (stages/structure.py): group-level codes, derived and null-linked columns, edit
    rules; a raw value whose bin this changed is drawn anew in its new bin.  Post-processing."""

    def __init__(self, fixed: tuple[str, ...]):
        self.fixed = fixed  # group-level columns that already hold their measured value

    def after(self, private: PrivateTable, records: Records, env: Env) -> Records:
        s, domain, ctx = env.structure, env.encoder.domain, env.ctx
        codes, rows = finish(records.codes, domain, ctx.group_columns, s, private.released, ctx.rng,
                             fixed=self.fixed)
        raw = {column: values[rows] for column, values in records.raw.items()} if not rows.all() else records.raw
        for column in [c for c in raw if c not in self.fixed]:
            coder, j = env.encoder.coder(column), domain.index(column)
            moved = coder.encode(raw[column]) != codes[:, j]
            if moved.any():
                raw[column] = raw[column].copy()
                raw[column][moved] = coder.decode(codes[moved, j], ctx.rng)
        return Records(codes, raw)


class BinValues(Stage):
    """How rows fall inside the bins of numeric columns without public values, measured before the
    method (stages/bin_values.py); each value is drawn inside its final bin by it after."""

    node = BIN_VALUES

    def __init__(self, columns: tuple[str, ...]):
        self.columns = columns
        self.inside: dict = {}

    def share(self) -> float:
        return T.bin_values_share

    def note(self, rho: float, theta: int) -> str:
        sigma = gaussian_sigma(theta, rho / len(self.columns))
        return (f"{', '.join(self.columns)}: counts in {T.bin_values_sub_bins} sub-bins a bin, noise sd {sigma:.3g} "
                f"rows per sub-bin")

    def before(self, private: PrivateTable, env: Env) -> None:
        """Privacy cost: the node's rho, split evenly over the columns."""
        self.inside = measure_bin_values(private, env.encoder, list(self.columns), private.remaining)

    def after(self, private: PrivateTable, records: Records, env: Env) -> Records:
        for column, inside in self.inside.items():
            if column not in records.raw:
                records.raw[column] = inside.draw(records.codes[:, env.encoder.domain.index(column)], env.ctx.rng)
        return records


class Reweighting(Stage):
    """Resampling the rows toward noisy answers of the measures the user names (stages/reweight.py):
    every numeric value is drawn first, so that the rows kept keep it."""

    node, timer = REWEIGHTING, "reweighting"

    def __init__(self, spec: ReweightSpec):
        self.spec = spec

    def share(self) -> float:
        return self.spec.share

    def note(self, rho: float, theta: int) -> str:
        notes = [f"moments of {line}" for line in noise_in_units(self.spec, rho, theta)]
        notes += [f"marginal {' × '.join(m)}" for m in self.spec.marginals]
        return "; ".join(notes) + " (noise sd of each sum)"

    def after(self, private: PrivateTable, records: Records, env: Env) -> Records:
        """Privacy cost: the node's rho (reweight_rows)."""
        codes, raw, domain = records.codes, records.raw, env.encoder.domain
        for column in domain.ranges:
            if column not in raw:
                raw[column] = env.encoder.coder(column).decode(codes[:, domain.index(column)], env.ctx.rng)
        kept = reweight_rows(private, codes, raw, env.ctx, self.spec).rows
        return Records(codes[kept], {column: values[kept] for column, values in raw.items()})


@dataclass(frozen=True)
class Pipeline:
    """What the stages around the method measure in every run: group-level numeric columns, numeric
    columns whose values inside their bins are measured, the reweighting request (bounds filled) and how
    rows are linked into individuals (where the parameters declare them)."""

    group_level: tuple[GroupLevel, ...] = ()
    detailed: tuple[str, ...] = ()
    reweighting: ReweightSpec | None = None
    linking: Linking | None = None

    def stages(self) -> list[Stage]:
        """Fresh stage objects for one run, in the order their ``after`` steps run."""
        out: list[Stage] = []
        if self.group_level:
            out.append(GroupValues(self.group_level))
        out.append(Finishing(tuple(g.column for g in self.group_level)))
        if self.detailed:
            out.append(BinValues(self.detailed))
        if self.reweighting is not None:
            out.append(Reweighting(self.reweighting))
        if self.linking is not None:
            out.append(IndividualLinks(self.linking))
        return out

    def raw_columns(self, spec: Method, numeric: tuple[str, ...]) -> tuple[str, ...]:
        """Of the ``numeric`` columns, those whose raw private values a run may read (in that order): every
        one for a method that synthesizes raw numbers (``spec.raw_numeric``), else those the group-level
        values, the values inside bins and the reweighting moments measure.  The release holds no other
        column's raw values (the private table refuses a query that reads one)."""
        if spec.raw_numeric:
            return numeric
        read = {g.column for g in self.group_level} | set(self.detailed)
        if self.reweighting is not None:
            read |= {c for columns in self.reweighting.moments for c in columns}
        return tuple(c for c in numeric if c in read)

    def shares(self) -> dict[str, float]:
        """Each measuring stage's share of a run's rho."""
        return {s.node: s.share() for s in self.stages() if s.node is not None}

    def problems(self) -> list[str]:
        """One line when the stages would leave the method less than 1 - budget_max_stage_share of the rho."""
        shares = self.shares()
        if sum(shares.values()) <= T.budget_max_stage_share:
            return []
        return ["the stages around the method would take " + ", ".join(
            f"{name} {share:.0%}" for name, share in shares.items() if share) +
            f" of each run's rho, more than {T.budget_max_stage_share:.0%} together; lower --reweight-share"]


def stages_of(encoder: Encoder, structure: Structure, spec: Method, reweighting: ReweightSpec | None,
              bin_values: bool, individual: Individual | None = None) -> Pipeline:
    """What the stages around ``spec`` measure, from the encoder and the structure (public facts).
    Group-level columns that are categorical or have a null token come from the method's own
    group × column marginals (stages/structure.py) and are not measured here.  ``individual``: the
    parameters' declaration; rows are linked where it has a clock."""
    group_level = []
    for column, within in structure.group_level:
        coder = encoder.coder(column)
        if coder.categories is None and coder.column.null is None:
            low, high = coder.column.bounds
            group_level.append(GroupLevel(column, within, low, high, coder.step or (high - low) / 1e6))
    skip = set(structure.skipped(encoder.domain.names)) | {g.column for g in group_level}
    detailed = detail_columns(encoder, skip) if bin_values and not spec.raw_numeric else []
    linking = Linking.of(individual, encoder) if individual is not None and individual.clock is not None else None
    return Pipeline(tuple(group_level), tuple(detailed), reweighting, linking)


def records_of(codes: np.ndarray, raw: Mapping[str, np.ndarray], encoder: Encoder) -> Records:
    """The method's records as the stages take them: numeric values it synthesized without bins put on
    their column's grid, and their codes made those values' bins."""
    codes, snapped = np.array(codes, dtype=np.int32, copy=True), dict(raw)
    for column in snapped:
        snapped[column] = encoder.coder(column).snap(snapped[column])
        codes[:, encoder.domain.index(column)] = encoder.coder(column).encode(snapped[column])
    return Records(codes, snapped)
