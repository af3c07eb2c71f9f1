"""Release stages: what runs around a method, behind one small interface.

A release runs, for each run, ``before`` of every stage (measurements the method's records will
need afterwards), then the method, then ``after`` of every stage in order, each taking the records
(codes and the raw values of numeric columns drawn so far) and returning them changed.  A stage
that measures owns a node of the run's budget plan (budget.py): ``node``, its ``share`` of the run's
rho and a ``note`` for the plan; the release runs its ``before`` and ``after`` inside that node,
so it spends exactly the node's rho and cannot reach another's.  A stage that only post-processes
has no node.  The stages (stages/pipeline.py): group-level values, values inside bins, the
structure (derived columns, edit rules), reweighting; decoding to the schema's values follows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dpsyn.lib.privacy.plan import Node
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.method.base import RunContext

if TYPE_CHECKING:
    from dpsyn.dataloader.encoding import Encoder
    from dpsyn.dataloader.structure import Structure


@dataclass
class Records:
    """Synthetic records between stages: codes (n × d, domain order), the raw values of the numeric
    columns drawn so far (the rest are drawn inside their bins at decoding) and, once a stage has linked
    them, each row's individual."""

    codes: np.ndarray
    raw: dict[str, np.ndarray] = field(default_factory=dict)
    individuals: np.ndarray | None = None  # each row's synthetic individual, once rows are linked


@dataclass(frozen=True)
class Env:
    """What every stage may read besides the records: the encoder (its domain and coders), the run's
    context (domain, group columns, the synthesis generator) and the record structure.  Public."""

    encoder: Encoder
    ctx: RunContext
    structure: Structure


class Stage:
    """One stage around the method.  Privacy: ``before`` and ``after`` may measure only through
    ``private`` and only inside the stage's own plan node (the release enforces it); a stage without a
    node measures nothing."""

    node: str | None = None
    timer: str = "structure"  # the timing bucket of ``after``
    reads_individuals = False  # whether ``before`` measures over an individual's rows (the table then holds them)

    def active(self, theta: int) -> bool:
        """Whether the stage runs (and has its plan node) in a run whose individuals have ``theta`` rows at most."""
        return True

    def share(self) -> float:
        """This stage's share of a run's rho (0: it measures nothing)."""
        return 0.0

    def note(self, rho: float, theta: int) -> str:
        """What it measures and how noisy, for the plan (``rho``: its node's rho)."""
        return ""

    def children(self, rho: float, theta: int) -> tuple[Node, ...]:
        """Its node's children in the plan, where it splits its rho in advance."""
        return ()

    def before(self, private: PrivateTable, env: Env) -> None:
        """Measure, before the method runs, what ``after`` needs."""

    def after(self, private: PrivateTable, records: Records, env: Env) -> Records:
        """The records after this stage."""
        return records
