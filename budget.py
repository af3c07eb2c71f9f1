"""Each run's budget plan, from public facts alone: what the stages around the method take, and the method the rest.

Before the private file is opened, a release knows the schema (with public ranges), the encoder,
the record structure, the method and its options and the reweighting request.  ``stages_of``
reads from them what the stages around the method will measure; ``plan_run`` turns that into a
run's plan (lib/privacy/plan.py): top-level nodes for group-level values, values inside bins and
reweighting (each its share of the run's rho), and the method's node with the rest, itself split
as far as the method knows in advance (``Method.plan``).  ``main.py plan`` prints these plans;
a release hands each to its run's ledger, which charges every step to its node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dataloader.encoding import Encoder
from dataloader.schema import Run
from dataloader.structure import Structure
from lib.privacy.accounting import gaussian_sigma, rho_from_eps_delta
from lib.privacy.plan import Node, Plan
from lib.tuning import T
from method.base import Method
from method.bin_values import detail_columns
from method.group_values import rounds_needed
from method.reweight import ReweightSpec, noise_in_units

GROUP_VALUES, BIN_VALUES, REWEIGHTING, METHOD = "group-level values", "values inside bins", "reweighting", "method"


@dataclass(frozen=True)
class GroupLevel:
    """A group-level numeric column the release measures itself: one value per cell of ``within``,
    found on the grid low + k*step of [low, high]."""

    column: str
    within: tuple[str, ...]
    low: float
    high: float
    step: float


@dataclass(frozen=True)
class Stages:
    """What the stages around the method measure in every run: group-level numeric columns, numeric
    columns whose values inside their bins are measured, and the reweighting request (bounds filled)."""

    group_level: tuple[GroupLevel, ...] = ()
    detailed: tuple[str, ...] = ()
    reweighting: ReweightSpec | None = None

    def shares(self) -> dict[str, float]:
        """Each stage's share of a run's rho (0 where it measures nothing)."""
        k = len(self.group_level)
        return {GROUP_VALUES: group_value_share(k) * k, BIN_VALUES: T.bin_values_share if self.detailed else 0.0,
                REWEIGHTING: self.reweighting.share if self.reweighting else 0.0}

    def problems(self) -> list[str]:
        """One line when the stages would leave the method less than 1 - budget_max_stage_share of the rho."""
        shares = self.shares()
        if sum(shares.values()) <= T.budget_max_stage_share:
            return []
        return ["the stages around the method would take " + ", ".join(
            f"{name} {share:.0%}" for name, share in shares.items() if share) +
            f" of each run's rho, more than {T.budget_max_stage_share:.0%} together; lower --reweight-share"]


def group_value_share(columns: int) -> float:
    """Each group-level numeric column's share of a run's rho: GROUP_VALUE_SHARE, shrunk so that all of
    them together take at most GROUP_VALUES_CAP."""
    return min(T.group_values_share, T.group_values_cap / columns) if columns else 0.0


def stages_of(encoder: Encoder, structure: Structure, spec: Method, reweighting: ReweightSpec | None,
              bin_values: bool) -> Stages:
    """What the stages around ``spec`` measure, from the encoder and the structure (public facts).
    Group-level columns that are categorical or have a null token come from the method's own
    group × column marginals (method/structure.py) and are not measured here."""
    group_level = []
    for column, within in structure.group_level:
        coder = encoder.coder(column)
        if coder.categories is None and coder.column.null is None:
            low, high = coder.column.low, coder.column.high
            group_level.append(GroupLevel(column, within, low, high, coder.step or (high - low) / 1e6))
    skip = set(structure.skipped(encoder.domain.names)) | {g.column for g in group_level}
    detailed = detail_columns(encoder, skip) if bin_values and not spec.raw_numeric else []
    return Stages(tuple(group_level), tuple(detailed), reweighting)


def plan_run(run: Run, stages: Stages, spec: Method, options, has_groups: bool) -> Plan:
    """The budget plan of ``run``: one node per stage that measures, then the method's node with the
    rest (split further as ``spec.plan`` says).  Public facts only."""
    rho, theta = rho_from_eps_delta(run.epsilon, run.delta), run.max_records_per_individual
    shares, nodes = stages.shares(), []
    if stages.group_level:
        each = group_value_share(len(stages.group_level))
        children = tuple(Node(g.column, 1 / len(stages.group_level), _group_level_note(g, each * rho, theta))
                         for g in stages.group_level)
        nodes.append(Node(GROUP_VALUES, shares[GROUP_VALUES], "one value per group cell, by noisy argmax", children))
    if stages.detailed:
        sigma = gaussian_sigma(theta, shares[BIN_VALUES] * rho / len(stages.detailed))
        nodes.append(Node(BIN_VALUES, shares[BIN_VALUES], f"{', '.join(stages.detailed)}: counts in {T.bin_values_sub_bins} "
                          f"sub-bins a bin, noise sd {sigma:.3g} rows per sub-bin"))
    if stages.reweighting is not None:
        rw = stages.reweighting
        notes = [f"moments of {line}" for line in noise_in_units(rw, shares[REWEIGHTING] * rho, theta)]
        notes += [f"marginal {' × '.join(m)}" for m in rw.marginals]
        nodes.append(Node(REWEIGHTING, shares[REWEIGHTING], "; ".join(notes) + " (noise sd of each sum)"))
    rest = 1.0 - math.fsum(n.share for n in nodes)
    children = spec.plan(options, run.epsilon, theta, has_groups, rest * rho) if spec.plan is not None else ()
    nodes.append(Node(METHOD, rest, f"{spec.name}" + ("" if children else ", split by the method at run time"),
                      children))
    return Plan(run.epsilon, run.delta, theta, rho, tuple(nodes))


def _group_level_note(g: GroupLevel, rho: float, theta: int) -> str:
    rounds = rounds_needed(g.low, g.high, g.step)
    return (f"per {' × '.join(g.within)}: {rounds} round(s) of noisy histograms, noise sd "
            f"{gaussian_sigma(theta, rho / rounds):.3g} rows per bin")
