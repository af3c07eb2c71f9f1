"""What a synthesis strategy receives for one run, besides the encoded records."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from dataloader.encoding import Encoder
from lib.privacy import Ledger


@dataclass(frozen=True)
class MethodOptions:
    """The user's choices that shape synthesis (not privacy accounting): the strategy, the
    group columns, worker processes, a forced planner regime, the floor and rounding
    multiple of noisy group sizes, and which marginals dpsyn measures ("all" of the regime's
    or "select": 1-way plus 2-way pairs chosen from noisy dependency scores)."""

    method: str
    group_columns: tuple[str, ...]
    jobs: int = 1
    regime: str | None = None
    group_floor: int = 0
    group_round: int = 1
    marginals: str = "all"


@dataclass
class RunContext:
    """One run's settings and budget.

    ``theta`` is the per-individual row bound that every sensitivity is scaled by;
    ``ledger`` holds the run's whole rho budget, and a strategy must charge every
    private measurement to it; ``rng`` is the strategy's own noise generator;
    ``public_codes`` are the encoded public records (-1 where a category is unknown),
    free to use; ``timings`` collects seconds per stage (measuring, sampling) for the summary.
    """

    encoder: Encoder
    options: MethodOptions
    theta: int
    max_records: int
    ledger: Ledger
    rng: np.random.Generator
    public_codes: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def timed(self, stage: str):
        """Add the wall time of the ``with`` block to ``timings[stage]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - start

    def sensitivity_reason(self, query: str) -> str:
        return (f"{query}: adding or removing one individual changes at most theta={self.theta} rows, "
                f"each in one cell, so the L2 change is at most {self.theta}")
