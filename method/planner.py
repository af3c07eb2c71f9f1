"""DPSyn's budget planner: choose the regime and split a run's rho (Sprint-2 write-up).

Thresholds (theta = max_records_per_individual): eps0 = theta/1400 (noisy total),
eps1 = theta/50, eps2 = theta/35, eps3 = theta/25 (group-count budgets),
tau1 = 1500*theta/N~, tau2 = 6*tau1 with N~ the noisy total.

* eps < eps2: "public" regime, the whole budget on group counts;
* eps < eps0 + eps1 + tau1: "public" regime, eps - eps0 on group counts;
* eps < eps0 + eps1 + tau2: "one-way": y = min(eps3, eps1 + x/2) on group counts
  (x = eps - eps0 - eps1 - tau1), the rest on noisy 1-way marginals;
* otherwise "two-way": the same with tau2, the rest on noisy 2-way marginals.

Beyond the write-up (the auto planner): the public regime's second condition is not eps0 + eps1 + tau1 but
whether the adaptive rounds' selection could tell marginals apart: public where ``selection_margin`` (the score
gap, 2*theta*ln(candidates)/eps_select, a first round's exponential mechanism needs, over N~; eps_select as if
all of the method's rho went to the rounds, so a lower bound) exceeds planner_selection_margin.  That margin also
weighs how many marginals the selection chooses among and how many rounds share the budget, which the write-up's
test, (eps - eps0 - eps1)*N~ < 1500*theta, does not.  Where it picks one-way or two-way, the
planner keeps two-way only when measuring every pair is cheap (expected L1 noise per pair below
planner_two_way_noise of the rows, see ``pair_noise``; planner_two_way_noise_from_draws without public records)
and, with groups, every group × column marginal too (the same test on their cells: many small
groups make each group's own marginals mostly noise, as on the Sprint-2 shape), and only with groups
or a public file (without either, few adaptive rounds measure what cheap pairs leave wrong, triples
included, so the model grows with the budget); otherwise it picks "adaptive" (method/adaptive.py:
AIM-style rounds that measure what the model gets wrong),
with the group-count share of the regime it replaces (the two-way one when forced), and with
fewer, larger rounds where the pairs were below planner_two_way_noise.  The thresholds come from
bench/run_bench.py.

The write-up states these shares in epsilon; here each share becomes the same
fraction of the run's rho, so the shares sum exactly to the run's budget.  Without
a public file the "public" regime measures noisy 1-way marginals with half of
what would go to group counts (there are no public marginals to fall back on), and
under the auto planner, with groups, half of what is left for the group counts measures the
columns that differ most between groups per group (planner_group_column_share, method/group_columns.py), and
planner_pair_share of what the group counts keep then measures the pairs of columns that depart most from
independence (method/dependent_pairs.py).
Without group columns the group-count share goes to the marginals, and the
noisy total N~ sets the number of records; when every column is a group column, the
marginal share goes to the group counts.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from dpsyn.lib.tuning import T

PUBLIC, ONE_WAY, TWO_WAY, ADAPTIVE = "public", "one-way", "two-way", "adaptive"
REGIMES = (PUBLIC, ONE_WAY, TWO_WAY, ADAPTIVE)
ALL, SELECT = "all", "select"
MARGINAL_CHOICES = (ALL, SELECT)  # one-way/two-way regimes: the regime's fixed set, or PrivSyn-style selection
AUTO, WRITE_UP = "auto", "write-up"
PLANNERS = (AUTO, WRITE_UP)  # the planner with the adaptive regime, or the write-up's alone


@dataclass(frozen=True)
class WriteUpThresholds:
    """The Sprint-2 write-up's epsilon thresholds for ``theta`` (the module doc's eps0 to eps3)."""

    eps0: float
    eps1: float
    eps2: float
    eps3: float

    @classmethod
    def for_theta(cls, theta: int) -> "WriteUpThresholds":
        return cls(theta / 1400, theta / 50, theta / 35, theta / 25)


@dataclass(frozen=True)
class Rounds:
    """How the adaptive rounds (method/adaptive.py) spend the marginals' share; ``adaptive_rounds`` picks it and
    the method decides nothing more (tuned values are read when a plan is made, so ``--set`` reaches them).
    ``per_column``: the first round's rho is the rounds' budget over this many rounds per column; ``one_way``: the
    1-way marginals' rho, in rounds' rho each; ``coarse_reads``: a column an edit rule reads is split like the
    others and a numeric column with a null token is split at it, so that rounds may read them coarsely (the
    pairs are mostly noise); ``max_entropy``: the final records are drawn from the maximum-entropy fit (no public
    records); ``group_keep``: the share of the write-up's group-count budget the group counts keep, the rest
    going to the rounds; ``base_per_row``: base records a row of the noisy total (None: groups.py's default
    size)."""

    per_column: int
    one_way: int = 1
    coarse_reads: bool = False
    max_entropy: bool = False
    group_keep: float = 1.0
    base_per_row: int | None = None

    def describe(self) -> str:
        """The rounds' numbers in words, for the plan's log line."""
        out = f" ({self.per_column} rounds a column to start"
        if self.one_way > 1:
            out += f", 1-way marginals at {self.one_way} rounds' rho each"
        if self.coarse_reads:
            out += ", coarse reads of rule columns and null tokens"
        return out + (", records from the maximum-entropy fit)" if self.max_entropy else ")")


@dataclass(frozen=True)
class RegimePlan:
    """The method's regime and the fraction of the run's rho for each step (fractions sum to 1), with every choice
    the method makes from public facts (``make_plan`` says which); the run's budget plan is lib/privacy/plan.py's
    ``Plan``."""

    regime: str
    total_share: float
    group_share: float
    marginal_share: float
    rounds: Rounds | None = None  # adaptive regime: how the rounds spend the marginals' share
    base_per_row: int | None = None  # base records a row of the noisy total (None: groups.py's default size)
    joint: bool = False  # two-way, few groups, no public file: the group columns fitted in one shared base
    joint_rounds: bool = False  # and dpsyn_triple_share of the marginals' rho on rounds of 3-way marginals
    group_column_share: float = 0.0  # public regime: group × column marginals of chosen columns
    pair_share: float = 0.0  # public regime: pairs of columns chosen for their dependence

    def describe(self, rho: float) -> str:
        what = {TWO_WAY: "2-way marginals", ADAPTIVE: "adaptive rounds"}.get(self.regime, "1-way marginals")
        parts = [f"noisy total {self.total_share:.1%}" if self.total_share else "",
                 f"group counts {self.group_share:.1%}" if self.group_share else "",
                 f"{what} {self.marginal_share:.1%}" if self.marginal_share else "",
                 f"group × column marginals of the columns that differ most between groups "
                 f"{self.group_column_share:.1%}" if self.group_column_share else "",
                 f"pairs of columns that depart most from independence {self.pair_share:.1%}"
                 if self.pair_share else ""]
        rounds = self.rounds.describe() if self.rounds is not None else ""
        return f"regime {self.regime}{rounds}; rho {rho:.4g} split: " + ", ".join(p for p in parts if p)


def needs_total(epsilon: float, theta: int, has_groups: bool, forced: str | None) -> bool:
    """Whether to buy a noisy total first (its share: ``total_share``).

    The plan needs it to set tau1 and tau2; without group columns it also sets the
    number of records.
    """
    if not has_groups:
        return True
    if forced is not None:
        return forced not in (PUBLIC, ADAPTIVE)
    return epsilon >= WriteUpThresholds.for_theta(theta).eps2


def total_share(epsilon: float, theta: int, has_groups: bool, rho: float | None = None) -> float:
    """Fraction of the run's rho spent on the noisy total, when one is bought: the write-up's; under the auto
    planner (``rho``: the method's budget) without group columns, where the total alone sets the number of
    records, at least the share that brings its noise sd to planner_total_rows rows, at most
    planner_total_cap (at eps 0.1 the write-up's share left the count a few hundred rows off).  Public: from
    epsilon, theta and rho alone."""
    share = min(WriteUpThresholds.for_theta(theta).eps0, epsilon / 2) / epsilon
    if has_groups or rho is None:
        return share
    wanted = theta ** 2 / (2 * rho * T.planner_total_rows ** 2)  # sigma = theta / sqrt(2 * share * rho)
    return max(share, min(wanted, T.planner_total_cap))


def pair_noise(rho: float, theta: int, noisy_total: float, pair_cells: tuple[int, ...]) -> float:
    """Expected L1 noise of one marginal of a set (2-way marginals, or group × column ones), over the
    noisy total, when all of ``rho`` is split evenly over the P marginals of the set (cells
    ``pair_cells``): sqrt(2/π)·θ·sqrt(P/(2ρ))·mean cells / N.  For group × column marginals that is
    the noise of a group's own marginal over the group's mean size.  Public: computed from the
    budget, the domain and the released noisy total."""
    sigma = theta * math.sqrt(len(pair_cells) / (2 * rho))
    return math.sqrt(2 / math.pi) * sigma * sum(pair_cells) / len(pair_cells) / max(noisy_total, 1.0)


def selection_margin(rho: float, theta: int, noisy_total: float, shape: "TableShape", per_column: int) -> float:
    """The score gap, over the noisy total, that the adaptive rounds' first selection needs to pick one marginal
    out of about C candidates (every 1-way and 2-way marginal and, with groups, one group × column marginal a
    column; the rounds' own list differs a little: readings of split columns, subsets of the group columns,
    marginals over max_cells): 2θ·ln(C)/ε_select, with ε_select = sqrt(8·adaptive_select_share·ρ/(per_column·
    columns)) the exponential mechanism's ε where ``rho`` is the method's whole budget.  The rounds get only the
    marginals' share of it (after the total and the group counts), so this is a lower bound on the first
    selection's margin.  A score is a marginal's L1 error in rows less its expected noise, so a margin of m
    finds only marginals the model gets wrong by a TVD of about m/2 more than that noise.  Needs two or more
    columns.  Public: from the budget, θ, the domain and the released noisy total."""
    candidates = shape.columns + len(shape.pair_cells) + (len(shape.group_cells) if shape.has_groups else 0)
    eps_select = math.sqrt(8 * T.adaptive_select_share * rho / (per_column * shape.columns))
    return 2 * theta * math.log(candidates) / eps_select / max(noisy_total, 1.0)


@dataclass(frozen=True)
class TableShape:
    """The public facts of a run's table that the planner reads: whether it has group columns and a public
    file, how many non-group columns it has (``varying``: how many of them have two or more codes; None: all),
    the cells of every pair of them (``pair_cells``), of every group × column marginal (``group_cells``),
    how many groups there are and how many group columns."""

    has_groups: bool
    has_public: bool
    columns: int = 2
    pair_cells: tuple[int, ...] = ()
    group_cells: tuple[int, ...] = ()
    n_groups: int = 1
    varying: int | None = None
    group_columns: int = 0


def adaptive_rounds(noise: float, pairs: float, has_public: bool, has_groups: bool) -> Rounds:
    """The adaptive rounds for a run whose every pair (and group × column marginal) would carry expected L1 noise
    ``noise`` over the rows if all were measured (``pair_noise``; ``pairs``: the pairs' alone).  Three tiers:

    * every pair cheap (``noise`` below planner_two_way_noise): adaptive_few_rounds_per_column, larger rounds;
    * the pairs worth their noise (``pairs`` below planner_rich_pair_noise): adaptive_rounds_per_column, the
      1-way marginals at two rounds' rho, and where groups are raked from public records groups_rich_base_per_row
      base records a row;
    * pairs mostly noise: the group counts keep planner_poor_group_share of their share; from public records
      adaptive_rounds_per_column, else adaptive_many_rounds_per_column smaller rounds with coarse reads, the
      1-way marginals at planner_poor_one_way_rounds rounds' rho (planner_poor_grouped_one_way_rounds with groups).

    Without public records, the final records come from the maximum-entropy fit where there are groups or the
    pairs are mostly noise (without groups on an affordable budget GUM's records score better: they match the
    measured marginals directly, where a draw from the fit adds its sampling noise; from public records GUM's
    moves keep their structure)."""
    if noise < T.planner_two_way_noise:
        rounds = Rounds(T.adaptive_few_rounds_per_column)
    elif pairs < T.planner_rich_pair_noise:
        rounds = Rounds(T.adaptive_rounds_per_column, 2,
                        base_per_row=T.groups_rich_base_per_row if has_public and has_groups else None)
    elif has_public:
        rounds = Rounds(T.adaptive_rounds_per_column, group_keep=T.planner_poor_group_share)
    else:
        rounds = Rounds(T.adaptive_many_rounds_per_column, T.planner_poor_grouped_one_way_rounds if has_groups else
                        T.planner_poor_one_way_rounds, coarse_reads=True, group_keep=T.planner_poor_group_share)
    return _with_max_entropy(rounds, has_public, has_groups)


def _with_max_entropy(rounds: Rounds, has_public: bool, has_groups: bool) -> Rounds:
    return dataclasses.replace(rounds, max_entropy=not has_public and (has_groups or rounds.coarse_reads))


def make_plan(epsilon: float, theta: int, noisy_total: float | None, shape: TableShape, forced: str | None = None,
              rho: float | None = None) -> RegimePlan:
    """The regime choice, shares and the method's other choices for one run; ``forced`` overrides the regime.

    ``noisy_total`` is given exactly when ``needs_total`` says so (bought with ``total_share``).
    ``shape.columns``: how many non-group columns there are; with none, the marginal share goes
    to the group counts.  Where ``rho`` and ``pair_cells`` (the cells of every pair of non-group columns) are
    given, the public regime's test from eps2 up is ``selection_margin`` above planner_selection_margin (else the
    write-up's eps0 + eps1 + tau1).  Where the regime is then one-way or two-way, measuring every
    pair decides: two-way when its noise (``pair_noise``) is below planner_two_way_noise (without public
    records planner_two_way_noise_from_draws), and so is that of the group × column marginals (cells
    ``group_cells``) where there are groups, and there are groups or public records; else the adaptive
    rounds, which measure only the marginals worth their noise, as ``adaptive_rounds`` says from that noise
    (a forced adaptive regime: adaptive_rounds_per_column rounds a column, the rest ``Rounds``' defaults).
    In the public regime with groups but no public file, given ``rho`` (the auto planner) and a noisy total, planner_group_column_share of the group counts'
    share goes to ``group_column_share`` (method/group_columns.py) where the group counts' noise sd
    after that cut stays within planner_group_count_noise of the mean size of the ``n_groups`` groups and some
    column has two or more codes (``shape.varying``: one of one value cannot differ between groups); then, with two or
    more such columns, planner_pair_share of what they keep goes to ``pair_share`` (method/dependent_pairs.py).
    In the two-way regime under the auto planner with groups, no public file, at most dpsyn_joint_groups groups
    and dpsyn_joint_base_per_row base records a row within groups_rich_base_records, the group columns are
    fitted in one shared base (``joint``), and where its 3-way candidates times base records stay within
    dpsyn_triple_work, rounds of them follow (``joint_rounds``).  ``base_per_row``: dpsyn_joint_base_per_row
    for that base; groups_rich_base_per_row where groups are raked from public records in the two-way regime;
    the rounds' in the adaptive one; else None.
    """
    has_groups, has_public, columns = shape.has_groups, shape.has_public, shape.columns
    pair_cells, group_cells, n_groups = shape.pair_cells, shape.group_cells, shape.n_groups
    varying = columns if shape.varying is None else shape.varying
    t = WriteUpThresholds.for_theta(theta)
    total_eps, tau1, tau2 = 0.0, 0.0, 0.0
    rounds: Rounds | None = None
    if noisy_total is not None:
        total_eps = total_share(epsilon, theta, has_groups, rho) * epsilon
        tau1 = 1500 * theta / max(noisy_total, 1.0)
        tau2 = 6 * tau1
    if forced is None:
        noise = margin = 0.0
        rounds_if_adaptive: Rounds | None = None  # set where the auto planner chooses (given rho and pairs)
        if rho is not None and noisy_total is not None and pair_cells:
            pairs = pair_noise(rho, theta, noisy_total, pair_cells)
            noise = max(pairs, pair_noise(rho, theta, noisy_total, group_cells) if has_groups and group_cells else 0.0)
            rounds_if_adaptive = adaptive_rounds(noise, pairs, has_public, has_groups)
            margin = selection_margin(rho, theta, noisy_total, shape, rounds_if_adaptive.per_column)
        # the public regime's test from eps2 up: the rounds' selection margin, or the write-up's
        too_little = (margin > T.planner_selection_margin if rounds_if_adaptive is not None
                      else epsilon < t.eps0 + t.eps1 + tau1)
        if noisy_total is None or epsilon < t.eps2 or too_little:
            regime = PUBLIC
        elif epsilon < t.eps0 + t.eps1 + tau2:
            regime = ONE_WAY
        else:
            regime = TWO_WAY
        written = regime  # public, one-way or two-way: the adaptive regime keeps that group-count share
        if regime != PUBLIC and rounds_if_adaptive is not None:
            cheap = noise < (T.planner_two_way_noise if has_public else T.planner_two_way_noise_from_draws)
            regime = TWO_WAY if cheap and (has_groups or has_public) else ADAPTIVE
            if regime == ADAPTIVE:
                rounds = rounds_if_adaptive
    else:
        regime = written = forced
    if regime == ADAPTIVE and rounds is None:
        rounds = _with_max_entropy(Rounds(T.adaptive_rounds_per_column), has_public, has_groups)
    rest = epsilon - total_eps
    if regime == PUBLIC:
        group_eps = rest
    else:
        tau = tau1 if written == ONE_WAY else tau2  # forced adaptive: the two-way share
        x = max(0.0, epsilon - t.eps0 - t.eps1 - tau)
        keep = rounds.group_keep if rounds is not None and columns else 1.0
        group_eps = min(t.eps3, t.eps1 + x / 2, rest / 2) * keep
    marginal_eps = rest - group_eps
    if regime == PUBLIC and not has_public:
        marginal_eps = group_eps / 2
        group_eps -= marginal_eps
    if not has_groups:
        marginal_eps += group_eps
        group_eps = 0.0
    elif columns == 0:
        group_eps += marginal_eps
        marginal_eps = 0.0
    group_column_eps = pair_eps = 0.0
    if regime == PUBLIC and not has_public and has_groups and varying and rho is not None and noisy_total:
        kept = (1 - T.planner_group_column_share) * group_eps / epsilon * rho  # the group counts' rho after the cut
        if theta / math.sqrt(2 * kept) <= T.planner_group_count_noise * noisy_total / n_groups:
            group_column_eps = T.planner_group_column_share * group_eps
            group_eps -= group_column_eps
            if varying > 1:
                pair_eps = T.planner_pair_share * group_eps
                group_eps -= pair_eps
    joint = (regime == TWO_WAY and rho is not None and has_groups and not has_public and n_groups <= T.dpsyn_joint_groups
             and noisy_total is not None and T.dpsyn_joint_base_per_row * noisy_total <= T.groups_rich_base_records)
    triples = math.comb(columns + shape.group_columns, 3)  # none: the rounds would find nothing new
    joint_rounds = joint and 0 < triples * T.dpsyn_joint_base_per_row * (noisy_total or 0.0) <= T.dpsyn_triple_work
    base_per_row = T.dpsyn_joint_base_per_row if joint else \
        T.groups_rich_base_per_row if regime == TWO_WAY and has_public and has_groups else \
        rounds.base_per_row if rounds is not None else None
    return RegimePlan(regime, total_eps / epsilon, group_eps / epsilon, marginal_eps / epsilon, rounds, base_per_row,
                      joint, joint_rounds, group_column_eps / epsilon, pair_eps / epsilon)
