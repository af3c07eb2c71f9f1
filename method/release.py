"""One release: every run of the parameters file with one strategy, written atomically.

Randomness: the release's SeedSequence is split into one child per run, and each
run's child into three (bounding, the strategy's noise, decoding), so a run's
output does not depend on the other runs or on how many worker processes a
strategy uses.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from dataloader.bounding import bound_contributions
from dataloader.encoding import Encoder
from dataloader.io import StagedFiles, SubmissionWriter
from dataloader.schema import Run, Schema
from lib.privacy import Ledger, classic_rho_from_eps_delta
from method import METHODS
from method.context import MethodOptions, RunContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrivateData:
    """Encoded private records (n × d codes), the individual id of each row (or None), and the
    encoded public records (or None; -1 where a category is unknown)."""

    codes: np.ndarray
    ids: np.ndarray | None
    public_codes: np.ndarray | None = None


@dataclass(frozen=True)
class RunResult:
    codes: np.ndarray
    ledger: Ledger
    timings: dict[str, float]


def ledger_path(output: Path, epsilon: float) -> Path:
    """Where the ledger of the run with ``epsilon`` goes, beside the submission."""
    return output.with_name(f"{output.stem}.ledger.eps{epsilon:g}.json")


def synthesize_run(data: PrivateData, encoder: Encoder, run: Run, options: MethodOptions,
                   seeds: list[np.random.SeedSequence]) -> RunResult:
    """Bound contributions, then let the method spend exactly this run's budget; returns codes."""
    bound_seed, noise_seed = seeds[0], seeds[1]
    start = time.perf_counter()
    codes = data.codes
    if data.ids is not None:
        codes = codes[bound_contributions(data.ids, run.max_records_per_individual,
                                          np.random.default_rng(bound_seed))]
    bounding = time.perf_counter() - start
    ctx = RunContext(encoder, options, run.max_records_per_individual, run.max_records,
                     Ledger(run.epsilon, run.delta), np.random.default_rng(noise_seed), data.public_codes)
    synthetic = METHODS[options.method](codes, ctx)
    return RunResult(synthetic, ctx.ledger, {"bounding": bounding, **ctx.timings})


def release(schema: Schema, encoder: Encoder, data: PrivateData, options: MethodOptions,
            seed_seq: np.random.SeedSequence, output: Path, id_column: str | None) -> list[Path]:
    """Synthesize every run and write the submission CSV plus one ledger JSON per run.

    Either every file appears or none does.  Privacy cost: each run spends at most
    its own (epsilon, delta) budget, as its ledger records.
    """
    runs = list(schema.runs)
    seeds = [s.spawn(3) for s in seed_seq.spawn(len(runs))]
    results = []
    with logging_redirect_tqdm(), tqdm(total=len(runs), desc="runs", unit="run", leave=False,
                                       disable=not log.isEnabledFor(logging.INFO)) as bar:
        for run, s in zip(runs, seeds):
            results.append(synthesize_run(data, encoder, run, options, s))
            bar.update()

    with StagedFiles() as staged:
        writer = SubmissionWriter(staged.path(output), schema, id_column)
        try:
            for run, result, s in zip(runs, results, seeds):
                start = time.perf_counter()
                typed = encoder.decode(result.codes, np.random.default_rng(s[2]))
                writer.write(run.epsilon, typed)
                staged.path(ledger_path(output, run.epsilon)).write_text(result.ledger.to_json() + "\n")
                result.timings["decoding+writing"] = time.perf_counter() - start
                _summarise(run, options.method, result)
        finally:
            writer.close()
        return staged.commit()


def _summarise(run: Run, method: str, result: RunResult) -> None:
    led = result.ledger.to_dict()
    times = ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items())
    log.info("run eps=%g delta=%.3g theta=%d: rho budget %.5g (the classic conversion would give %.5g), "
             "spent %.5g = eps %.4g; method %s; %d rows written; %s",
             run.epsilon, run.delta, run.max_records_per_individual, led["rho_budget"],
             classic_rho_from_eps_delta(run.epsilon, run.delta), led["rho_spent"], led["epsilon_spent"],
             method, len(result.codes), times)
