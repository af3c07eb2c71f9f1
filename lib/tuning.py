"""Every tuned value of a release in one table: its name, its value and what it means, one line each.

Where each value came from (the bench command and the figures that chose it) is docs/tuning.md; the
code that uses a value says what it does and why.  Code reads the values as ``T.name`` when it runs,
so ``main.py --set NAME=VALUE`` (for experiments and benchmarks; a release needs none) changes one for
that run, and ``main.py plan --tuning`` lists them.  Privacy does not depend on any of them: each
only moves shares of a budget that the ledger enforces, or changes post-processing.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

TABLE: tuple[tuple[str, Any, str], ...] = (
    # budget.py
    ("budget_max_stage_share", 0.75, "the most of a run's rho the stages around the method may take together"),
    # dataloader/draft.py
    ("draft_max_codes", 25,
     "schema draft: whole-number public columns with at most this many values become categorical codes"),
    # dataloader/structure.py
    ("structure_min_support", 20,
     "public rows a structural finding (derived or null-linked column) needs on each side"),
    ("structure_chance", 1e-9, "the largest chance that a structural finding holds between unrelated columns"),
    # lib/estimation/consistency.py
    ("consistency_rounds", 10, "rounds of the weighted-average and non-negativity steps before the exact fit"),
    ("consistency_tolerance", 1e-12, "the exact fit stops when the marginals agree to this share of the total"),
    ("consistency_max_fit_iterations", 2000, "the most sweeps of proportional fitting in the exact fit"),
    ("consistency_pseudo_share", 1e-3,
     "pseudo-count, as a share of the total, that keeps an all-zero marginal fittable"),
    # lib/records/constraints.py
    ("constraints_repair_passes", 8, "passes of the edit-rule repair over the synthetic records"),
    # lib/estimation/record_fit.py
    ("record_fit_null_tries", 2, "tries for a null value in the record fit (fewer than for a value)"),
    # lib/estimation/relaxed.py
    ("relaxed_margin", 0.01,
     "how far outside [0, 1] a relaxed numeric value may lie, so spikes at a bound stay on one side of a cut"),
    # lib/estimation/smoothing.py
    ("smoothing_bandwidths", (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0),
     "kernel sds, in codes, that the smoothing of an ordered 1-way marginal chooses among"),
    ("smoothing_risk_share", 0.5,
     "smooth or shrink a noisy marginal only where the risk estimate is at most this share of its error"),
    # lib/estimation/tilting.py
    ("tilting_support_cap", 4000, "distinct synthetic rows the reweighting's denoising fit works on at most"),
    ("tilting_iterations", 50, "proximal Newton steps of the tilt at most"),
    ("tilting_pin", 1e-3, "an estimate with sd 0 weighs as if its sd were this share of its noise sd"),
    # method/adaptive.py
    ("adaptive_select_share", 0.1, "share of each adaptive round's rho spent choosing its marginal (AIM's split)"),
    ("adaptive_rounds_per_column", 6, "the first round's rho is the budget over this many rounds per column"),
    ("adaptive_few_rounds_per_column", 4, "the same where every pair would be cheap to measure"),
    ("adaptive_many_rounds_per_column", 10, "the same where pairs are noisy and there are no public records"),
    ("adaptive_max_entropy_cells", 500_000,
     "largest junction tree (cells) for the maximum-entropy estimate; rounds that draw from it stay within it"),
    ("adaptive_max_entropy_tolerance", 1e-7,
     "the maximum-entropy fit stops when a step lowers the loss by less than this share"),
    ("adaptive_max_entropy_steps", 1000, "the most mirror-descent steps of the maximum-entropy fit"),
    ("adaptive_round_tolerance", 1e-6, "consistency within rounds: agreement to this share of the total"),
    ("adaptive_round_fit_iterations", 50, "consistency within rounds: at most this many fitting sweeps"),
    # stages/bin_values.py
    ("bin_values_sub_bins", 20, "sub-bins per bin for the values inside bins"),
    ("bin_values_share", 0.03, "share of a run's rho on values inside bins, split evenly over the columns"),
    ("bin_values_noise_margin", 2.0, "a bin keeps its detail only where its counts vary this much beyond noise"),
    # stages/individuals.py
    ("individuals_share", 0.05, "share of a run's rho on linking rows into individuals, where the parameters ask"),
    ("individuals_spans_share", 0.25,
     "linking: share of that on individuals by the clock values of their rows; the rest on transitions"),
    ("individuals_pattern_cells", 512,
     "linking: individuals are counted by the set of clock values of their rows where there are at most this many "
     "such sets, else by first clock value and rows (gaps not seen)"),
    ("individuals_stays_codes", 48,
     "linking: a followed column with more codes has only whether it stays measured, not its whole transitions"),
    ("individuals_piece", 400,
     "linking: rows per side of one assignment (larger blocks are cut into pieces of rows alike in followed columns)"),
    ("individuals_steer", 4.0,
     "linking: how hard a position's later home assignments make up for followed-column changes made too often or "
     "too seldom before"),
    # method/dependent_pairs.py
    ("dependent_pairs_pairs", 3, "pairs of columns that depart most from independence, measured in the public regime"),
    ("dependent_pairs_select_share", 0.5, "share of that step's rho spent choosing the pairs"),
    # method/dpsyn.py
    ("dpsyn_public_sigma", 1e6,
     "noise sd given to public marginals in consistency (far below any noisy measurement's weight)"),
    ("dpsyn_joint_groups", 100, "two-way regime without public records: at most this many groups share one base"),
    ("dpsyn_joint_base_per_row", 8, "base records per row for that shared base"),
    ("dpsyn_triple_share", 0.2, "two-way regime: share of the marginals' rho on adaptive rounds of 3-way marginals"),
    ("dpsyn_triple_rounds", 8, "rounds of those 3-way marginals"),
    ("dpsyn_triple_picks", 8, "3-way marginals measured per round"),
    ("dpsyn_triple_work", 2e9, "3-way rounds only where candidates times base records stay within this"),
    ("dpsyn_group_marginal_share", 0.5,
     "two-way regime with groups: share of the marginal rho on group × column marginals"),
    # method/group_columns.py
    ("group_columns_group_columns", 5,
     "columns measured per group in the public regime (those that differ most between groups)"),
    # stages/group_values.py
    ("group_values_bins", 1000, "bins per cell and round when finding a group-level value"),
    ("group_values_share", 0.05, "share of a run's rho per group-level numeric column"),
    ("group_values_cap", 0.2, "share of a run's rho for all group-level numeric columns together"),
    # method/groups.py
    ("groups_rake_pool", 40, "base records per row a group rakes over at most"),
    ("groups_rake_passes", 10, "sweeps of raking over a group's 1-way marginals"),
    ("groups_base_records", 100_000, "records in the base set that groups draw from"),
    ("groups_rich_base_per_row", 4, "base records per row where groups are raked from public records on a rich budget"),
    ("groups_rich_base_records", 250_000, "the most base records in that case"),
    ("groups_assign_passes", 10, "sweeps assigning base records to groups"),
    ("groups_assign_cells", 10_000_000, "the most base records × groups that assignment works on"),
    ("groups_fit_iterations", 10, "GUM iterations per group where groups are fitted"),
    # method/histogram.py
    ("histogram_group_count_share", 0.5, "histogram: share of rho on the group counts (the rest on 1-way marginals)"),
    # method/planner.py
    ("planner_two_way_noise", 0.2, "measure every pair when its expected L1 noise is below this share of the rows"),
    ("planner_two_way_noise_from_draws", 0.1, "the same threshold without public records"),
    ("planner_selection_margin", 0.5, "the adaptive rounds run only where their first selection's margin "
     "(2θ·ln(candidates)/ε_select) is below this share of the noisy total; elsewhere the public regime"),
    ("planner_rich_pair_noise", 2.0, "adaptive regime: pairs' noise below which the budget counts as rich"),
    ("planner_poor_one_way_rounds", 4, "adaptive regime, pairs noisy: the 1-way marginals' rho in rounds' rho"),
    ("planner_poor_grouped_one_way_rounds", 2, "the same with groups"),
    ("planner_poor_group_share", 0.5,
     "adaptive regime, pairs noisy: the group counts keep this share of the write-up's share"),
    ("planner_group_column_share", 0.5,
     "public regime with groups, no public file: share of the group counts' rho on group × column marginals"),
    ("planner_group_count_noise", 0.15,
     "only where the group counts' noise sd stays below this share of the mean group size"),
    ("planner_total_rows", 60,
     "without group columns, the noisy total's share brings its noise sd to this many rows (it sets the row count)"),
    ("planner_total_cap", 0.1, "but at most this share of the method's rho (never below the write-up's share)"),
    ("planner_pair_share", 0.3, "share of what the group counts keep that picks and measures dependent pairs"),
    # method/rap.py
    ("rap_group_share", 0.1, "rap: share of rho on the group counts"),
    ("rap_group_column_share", 0.2, "rap: share of rho on every column's answer per group"),
    ("rap_one_way_share", 0.2, "rap: share of the rest on every column's 1-way answer"),
    ("rap_pair_share", 0.2, "rap: share of the rest on every pair of categorical columns"),
    ("rap_mix_share", 0.35, "rap: share of the rest on numeric columns' interval counts per categorical column"),
    ("rap_mix_cuts", 8, "rap: cuts of those interval counts"),
    ("rap_select_share", 0.1, "rap: share of each round's rho spent choosing its queries"),
    ("rap_fine_intervals", 32, "rap: intervals of a numeric column's first measurement"),
    ("rap_cuts", 16, "rap: cuts of a candidate's interval counts"),
    ("rap_directions", 8, "rap: random directions over the numeric columns per round (linear thresholds)"),
    ("rap_restart_beta", 128.0, "rap: inverse temperature at which projections after the first start"),
    ("rap_value_rate", 0.05, "rap: Adam's step on numeric values at the starting temperature"),
    ("rap_logit_rate", 0.03, "rap: Adam's step on categorical logits"),
    # stages/reweight.py
    ("reweight_share", 0.1, "default share of a run's rho for the reweighting measures"),
    ("reweight_band", 1.0, "reweighting: each answer's tolerance, in sds of its estimate"),
    ("reweight_floor", 0.5,
     "reweighting: the tilt stops where the effective sample size would fall below this share of rows"),
    ("reweight_quantiles", (0.01, 0.99),
     "reweighting: default moment bounds, these quantiles of the public file's values"),
    ("reweight_max_cells", 1000, "reweighting: the most cells of one marginal measure"),
    ("reweight_group_passes", 3, "reweighting: alternations of tilt and per-group rescaling"),
    # method/selection.py
    ("selection_score_share", 0.1, "--marginals select: share of the marginal rho on the dependency scores"),
    # method/split_columns.py
    ("split_columns_split_above", 32, "columns with more codes than this are read coarsely in the adaptive rounds"),
    # stages/structure.py
    ("structure_rounds", 4, "passes that make derived, null-linked and group-level columns agree after synthesis"),
    # method/superquail.py
    ("superquail_synth_share", 0.6,
     "superquail: share of --alpha's rho for the base synthesizer (the rest: the target's classifier)"),
    ("superquail_sage_rows", 4000, "superquail: synthetic records the feature importances are computed on"),
    ("superquail_sage_permutations", 64, "superquail: permutations of the feature importances"),
    ("superquail_pseudo_count", 1.0, "superquail: pseudo-count of naive Bayes' noisy counts"),
    ("superquail_accuracy_slack", 0.02, "superquail --fair fnr: how much the protected group's accuracy may drop"),
    ("superquail_confidence", 0.9,
     "superquail: the target is set to the prediction only where its probability is this high"),
    ("superquail_logistic_steps", 20, "superquail: noisy gradient steps of the target's logistic regression"),
    ("superquail_warm_steps", 100, "superquail: exact steps on the base synthesizer's records first (free)"),
    ("superquail_rates", (8.0, 4.0, 2.0),
     "superquail: step sizes of the noisy gradient steps, over the ones a row holds"),
    ("superquail_l2", 1e-3, "superquail: L2 penalty of the logistic regression"),
    ("superquail_frequency_floor", 0.01, "superquail: the smallest feature share a step divides by"),
)


class Tuning:
    """The table's values as attributes (``T.reweight_share``), their meanings, and overrides for one run."""

    def __init__(self, table: tuple[tuple[str, Any, str], ...]):
        self._defaults = {name: value for name, value, _ in table}
        self.meaning = {name: meaning for name, _, meaning in table}
        for name, value in self._defaults.items():
            setattr(self, name, value)

    if TYPE_CHECKING:  # the values are set from the table, one attribute each
        def __getattr__(self, name: str) -> Any: ...

    def parse(self, name: str, text: str) -> Any:
        """``text`` read as a value for ``name``, of its default's type (numbers; a tuple as comma-separated
        numbers).  ValueError, in one line, for an unknown name or a bad value."""
        if name not in self._defaults:
            raise ValueError(f"--set {name}: no tuned value of that name (main.py plan --tuning lists them)")
        default = self._defaults[name]
        try:
            if isinstance(default, tuple):
                value: Any = tuple(float(v) for v in text.split(","))
                if len(value) != len(default):
                    raise ValueError
            elif isinstance(default, int):
                value = int(text)
            else:
                value = float(text)
        except ValueError:
            raise ValueError(f"--set {name}={text}: expected {type(default).__name__} like {default!r}") from None
        return value

    @contextmanager
    def overridden(self, values: dict[str, Any]):
        """Within the block, each ``name: value`` of ``values`` (from ``parse``) is in force; after it, the
        values they replaced are back."""
        before = {name: getattr(self, name) for name in values}
        try:
            for name, value in values.items():
                setattr(self, name, value)
            yield
        finally:
            for name, value in before.items():
                setattr(self, name, value)

    def rows(self) -> list[tuple[str, Any, str]]:
        """(name, current value, meaning) of every entry, in table order."""
        return [(name, getattr(self, name), self.meaning[name]) for name in self._defaults]


T = Tuning(TABLE)
