"""Score a synthetic table (or a submission holding one per epsilon) against the real one.

Evaluation reads the real data, so it spends no privacy budget and none of its
numbers are differentially private: every result carries WARNING.

Per epsilon: the Sprint-2 k-marginal score (evaluation/metrics.k_marginal_score on the bins
of evaluation/binning.py, 50 pairs of the sorted non-group columns drawn with
RandomState(123456)); the workload errors (mean and max TVD over all 1-way and 2-way
and N random 3-way marginals of the non-group columns); with numeric columns, the raw-value
errors of evaluation/mixed.py (1,000 random 2-way mixed marginals, and with a target 1,000
class-conditional linear thresholds); and, with a target column, classifier utility
(evaluation/utility.py).  The submission's overall Sprint-2 score is the
mean over its epsilons.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsyn.dataloader.encoding import DEFAULT_BINS
from dpsyn.dataloader.reading import DataError, check_columns, read_csv_text, read_header
from dpsyn.dataloader.schema import Schema
from dpsyn.evaluation.binning import encode_for_evaluation, evaluation_coders
from dpsyn.evaluation.individuals import compare, individuals
from dpsyn.evaluation.metrics import draw_pairs, k_marginal_score, workload_errors, workload_subsets
from dpsyn.evaluation.mixed import MixedWorkload
from dpsyn.evaluation.utility import UtilityTest

log = logging.getLogger(__name__)

WARNING = "evaluation against real data: do not publish these numbers as DP"
EPSILON = "epsilon"


@dataclass(frozen=True)
class EvaluationOptions:
    """Group columns of the Sprint-2 score, the 3-way workload size and seed, bins for numeric
    columns without Sprint-2 or schema bins, and the optional classifier target."""

    group_columns: tuple[str, ...] = ()
    three_way: int = 100
    workload_seed: int = 0
    bins: int = DEFAULT_BINS
    target: str | None = None
    sensitive: str | None = None
    positive: str | None = None
    id_column: str | None = None  # the individuals' ids, where both tables have them


def read_for_evaluation(path: Path, schema: Schema, what: str, id_column: str | None = None) -> pd.DataFrame:
    """A table as text with every schema column (and ``epsilon`` and ``id_column`` when the file has them)."""
    header = read_header(path)
    keep = [c for c in (EPSILON, id_column) if c and c in header and c not in schema.names]
    text = read_csv_text(path, what)
    checked = check_columns(text.drop(columns=keep), schema, f"{what} {Path(path)}", allow_extra=True)
    return pd.concat([checked, text[keep]], axis=1)


def split_by_epsilon(synthetic: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """One table per epsilon of a submission (keyed by its text), or {"all": table} without that column."""
    if EPSILON not in synthetic.columns:
        return {"all": synthetic}
    eps = pd.to_numeric(synthetic[EPSILON], errors="coerce")
    if eps.isna().any():
        raise DataError(f"synthetic file: {int(eps.isna().sum())} row(s) with a non-numeric epsilon")
    return {f"{e:g}": synthetic[eps == e].drop(columns=EPSILON) for e in sorted(eps.unique())}


class Evaluator:
    """Everything that depends only on the real table, built once: the coders, the real codes,
    the Sprint-2 pairs, the workload and (with a target) the real-trained classifier.
    ``evaluate(synthetic)`` scores a table or submission against it (see the module doc)."""

    def __init__(self, schema: Schema, real: pd.DataFrame, options: EvaluationOptions):
        self.options = options
        self.real_rows = len(real)
        self.coders = evaluation_coders(schema, real, options.bins)
        names = [c.column.name for c in self.coders]
        self.sizes = tuple(c.size for c in self.coders)
        self.real_codes, outside = encode_for_evaluation(self.coders, real)
        if outside:
            log.warning("real file: values outside the schema (scored as their own category): %s",
                        ", ".join(f"{c} {n}" for c, n in outside.items()))
        self.group_idx = [names.index(g) for g in options.group_columns]
        self.others = [j for j in range(len(names)) if j not in self.group_idx]
        self.pairs = [(names.index(a), names.index(b)) for a, b in draw_pairs([names[j] for j in self.others])] \
            if len(self.others) > 1 else []
        self.workload = workload_subsets(self.others, options.three_way, options.workload_seed)
        self.utility = UtilityTest(real, schema, options.target, options.sensitive, options.positive) \
            if options.target is not None else None
        self.mixed = MixedWorkload(schema, real, options.group_columns, options.target, options.workload_seed)
        self.names, self.individual = names, schema.individual
        self.real_individuals = individuals(real[options.id_column], real, self.real_codes, names, schema.individual) \
            if options.id_column in real.columns else None

    def encode_runs(self, synthetic: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, np.ndarray, dict]]:
        """Per epsilon of ``synthetic``: its table, its codes and its values outside the schema."""
        return {eps: (table, *encode_for_evaluation(self.coders, table))
                for eps, table in split_by_epsilon(synthetic).items()}

    def evaluate(self, synthetic: pd.DataFrame) -> dict:
        """Every measure for each epsilon of ``synthetic`` against the real table."""
        return self.evaluate_runs(self.encode_runs(synthetic))

    def evaluate_runs(self, runs: dict[str, tuple[pd.DataFrame, np.ndarray, dict]]) -> dict:
        """``evaluate`` on runs already encoded by ``encode_runs``."""
        result: dict[str, Any] = {"warning": WARNING, "real_rows": int(self.real_rows),
                  "group_columns": list(self.options.group_columns), "runs": {}}
        for eps, (table, codes, outside) in runs.items():
            run: dict[str, Any] = {"synthetic_rows": int(len(table))}
            if outside:
                run["values_outside_schema"] = outside
            if self.pairs:
                run["sprint2_score"] = k_marginal_score(self.real_codes, codes, self.sizes, self.group_idx,
                                                        self.pairs)
            run["tvd"] = workload_errors(self.real_codes, codes, self.sizes, self.workload)
            run.update(self.mixed.errors(table))
            if self.utility is not None:
                run["utility"] = self.utility.score(table)
            if self.real_individuals is not None and self.options.id_column in table.columns:
                run["individuals"] = compare(self.real_individuals, individuals(
                    table[self.options.id_column], table, codes, self.names, self.individual))
            result["runs"][eps] = run
        scores = [r["sprint2_score"] for r in result["runs"].values() if "sprint2_score" in r]
        if scores:
            result["sprint2_score_mean"] = float(np.mean(scores))
        return result


def format_table(result: dict) -> str:
    """A plain-text table of ``Evaluator.evaluate``'s result, headed by the warning."""
    lines = [f"WARNING: {result['warning']}",
             f"{'epsilon':>8} {'rows':>9} {'Sprint-2':>9} {'TVD 1-way':>16} {'TVD 2-way':>16} {'TVD 3-way':>16}"
             + ("  accuracy (real-trained / synthetic-trained)" if any("utility" in r for r in result["runs"].values())
                else "")]
    for eps, run in result["runs"].items():
        score = f"{run['sprint2_score']:.1f}" if "sprint2_score" in run else "-"
        tvd = [f"{run['tvd'][k]['mean']:.4f} max {run['tvd'][k]['max']:.3f}" if k in run["tvd"] else "-"
               for k in ("1-way", "2-way", "3-way")]
        line = f"{eps:>8} {run['synthetic_rows']:>9} {score:>9} " + " ".join(f"{t:>16}" for t in tvd)
        if "utility" in run:
            u = run["utility"]
            line += f"  {u['trained_on_real']['accuracy']:.3f} / {u['trained_on_synthetic']['accuracy']:.3f}"
            gap = u["trained_on_synthetic"].get("by_group", {}).get("largest_gap")
            if gap:
                line += f" (largest group gap: accuracy {_num(gap['accuracy'])}, FNR " \
                        f"{_num(gap['false_negative_rate'])}, FPR {_num(gap['false_positive_rate'])})"
        lines.append(line)
        raw = [f"{name.replace('_', ' ')} {run[name]['mean']:.4f} (max {run[name]['max']:.3f})"
               for name in ("mixed_marginals", "linear_thresholds") if name in run]
        if raw:
            lines.append(f"{'':>8} raw-value query error: " + "; ".join(raw))
        if "individuals" in run:
            lines.append(f"{'':>8} individuals: {individuals_line(run['individuals'])}")
    if "sprint2_score_mean" in result:
        lines.append(f"mean Sprint-2 score over epsilons: {result['sprint2_score_mean']:.1f}")
    return "\n".join(lines)


def individuals_line(scores: dict) -> str:
    """The individual scores of one run in words."""
    parts = [f"{scores['individuals']} with {scores['rows_per_individual']:.2f} rows each "
             f"(TVD of rows per individual {scores['rows_per_individual_tvd']:.3f})"]
    if "stable_agree" in scores:
        parts.append(f"stable columns agree in {_share(scores['stable_agree'])}, advancing columns advance in "
                     f"{_share(scores['advance'])} of those with two rows or more")
    if scores.get("transitions_tvd"):
        floors = scores.get("transitions_margins_floor", {})
        parts.append("transition TVD " + ", ".join(
            f"{c} {t:.3f}" + (f" (margins floor {floors[c]:.3f})" if c in floors else "")
            for c, t in scores["transitions_tvd"].items()))
    return "; ".join(parts)


def _share(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x) -> str:
    return "-" if x is None else f"{x:.3f}"
