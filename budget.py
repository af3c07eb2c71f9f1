"""Each run's budget plan, from public facts alone: what the stages around the method take, and the method the rest.

Before the private file is opened, a release knows the schema (with public ranges), the encoder,
the record structure, the method and its options and the reweighting request, and from them which
stages run around the method (stages/pipeline.py ``stages_of``).  ``plan_run`` turns that into a
run's plan (lib/privacy/plan.py): a top-level node for each stage that measures (group-level
values, values inside bins, reweighting; each its share of the run's rho), and the method's node
with the rest, itself split as far as the method knows in advance (``Method.plan``).  ``main.py plan`` prints these plans;
a release hands each to its run's ledger, which charges every step to its node.
"""
from __future__ import annotations

import math

from dpsyn.dataloader.schema import Run
from dpsyn.lib.privacy.accounting import rho_from_eps_delta
from dpsyn.lib.privacy.plan import Node, Plan
from dpsyn.method.base import Method
from dpsyn.stages.pipeline import Pipeline

METHOD = "method"  # the method's node: the rest of the run's rho


def plan_run(run: Run, pipeline: Pipeline, spec: Method, options, has_groups: bool) -> Plan:
    """The budget plan of ``run``: one node per stage that measures (stages/pipeline.py), then the
    method's node with the rest (split further as ``spec.plan`` says).  Public facts only."""
    rho, theta = rho_from_eps_delta(run.epsilon, run.delta), run.max_records_per_individual
    nodes = []
    for stage in pipeline.stages():
        if stage.node is not None and stage.active(theta):
            share = stage.share()
            nodes.append(Node(stage.node, share, stage.note(share * rho, theta), stage.children(share * rho, theta)))
    rest = 1.0 - math.fsum(n.share for n in nodes)
    children = spec.plan(options, run.epsilon, theta, has_groups, rest * rho) if spec.plan is not None else ()
    nodes.append(Node(METHOD, rest, f"{spec.name}" + ("" if children else ", split by the method at run time"),
                      children))
    return Plan(run.epsilon, run.delta, theta, rho, tuple(nodes))
