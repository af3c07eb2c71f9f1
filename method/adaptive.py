"""Adaptive measurement: AIM's rounds (McKenna et al. 2022) with GUM records as the model.

Spends what remains of the run's budget in three steps, every one through the private table, then
post-processes the records (step 4):

1. cheap measurements: the group counts (the write-up's share, planner_poor_group_share of it where the planner
   finds the pairs noisy, when there are groups; pulled toward the
   product of their one-way totals, method/groups.py ``smoothed_counts``) and every 1-way marginal,
   each at the planner's number of rounds' measuring rho (method/planner.py ``Rounds.one_way``) (their sum
   split by cells^(2/3) where columns are split, below);
2. rounds: the candidates are every 1-way, 2-way and group × column marginal, the 3-way
   marginals that extend a measured pair and every column by some of the group columns (PUMA × column
   without YEAR: what many small groups can afford to have measured), each at most
   ``max_cells`` cells.  Without public records, a column of many codes is split into coarse
   code and offset (method/split_columns.py): pairs over it, and it by some group columns, are
   candidates read exactly or coarsely (age in 10s × hours in 10s: 100 cells, not 8,415), triples
   all exactly or all coarsely; where the pairs are noisy, a numeric column with a null token is split at it too,
   and read coarsely as null or not.  A round picks one (or ``picks``: one selection of that many) by the exponential
   mechanism (``PrivateTable.select``, adaptive_select_share of the round's rho) on the score
   ||q(D) − q(model)||₁ − e(q(model), σ), the model's L1 error minus the L1 error that measuring it would
   leave: the noise left once consistency cuts the noisy counts to non-negative ones of the same total
   (lib/estimation/projected_noise.py, worked out on the model's answer: about sqrt(2/π)·σ·cells for a dense marginal,
   far less for a sparse one, whose empty cells mostly stay empty), and measures it with the rest
   (Gaussian); the model is then refit (consistency,
   then GUM warm-started from the last round's records: the write-up's moves when the records
   started from public records, else rewriting the measured columns with a short polish, see REWRITE);
3. annealing: the first round's rho is the budget over the planner's rounds a column (``Rounds.per_column``)
   × columns rounds; when a measurement moves the model by less than the
   error it leaves (e above), the next rounds get four times the rho (half the noise sd, AIM's rule);
   when less than two rounds' rho is left, the last round takes all of it, so the ledger
   sums to the budget;
4. without public records, each column's values are exchanged among the records that agree on
   every column measured with it (``Model.exchange_unmeasured``): the measured marginals keep
   their counts, and the association with unmeasured columns that GUM's duplicates copied in
   goes.  Or, when asked (``max_entropy``: the planner's
   choice, method/dpsyn.py), the final records are drawn instead from private-pgm's estimate: the
   distribution nearest the consistent marginals, from the uniform, found by accelerated mirror descent on a
   junction tree (``Model.max_entropy``, lib/estimation/maxent.py), with the group columns among its columns where there are
   groups (each group's records then drawn from it given the group, ``Model.draw_groups``).

The model (post-processing of released values only) is a set of records over the non-group
columns (public records when given, else independent draws from the noisy 1-way marginals),
plus, per group, the consistent group × column counts or, for a column not measured per
group, the group's count times the column's overall distribution, fitted to the column's
marginals by some of the group columns where measured.  It answers a measured marginal by its
consistent estimate when the records started from independent draws (``Model.estimates``), else
by counting its records.  From independent draws, the noisy 1-way marginal of an ordered column (numeric
bins, integer categories in increasing order) is smoothed along its codes where Stein's unbiased risk
estimate says that at least halves its squared error (``Model.smoothed``, lib/estimation/smoothing.py: adult's age
and fnlwgt at eps 0.1).  Records and marginals are over the model's columns (split columns as
coarse code and offset) and translated back to the domain's for the rest of the release.  The
final records are shared out per group from the model's records (method/groups.py), as in the
write-up, except where the maximum-entropy estimate with the group columns draws each group's (step 4).
"""
from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field

import numpy as np

from dpsyn.lib.estimation.consistency import fit_to_margins, make_consistent
from dpsyn.lib.records.constraints import NO_BOXES, Boxes
from dpsyn.lib.records.exchange import exchange_unmeasured
from dpsyn.lib.estimation.smoothing import denoise, shrink
from dpsyn.lib.estimation.gum import GumOptions, gum
from dpsyn.lib.records.marginals import clip_and_normalise, compact_codes, count_marginal, count_marginals
from dpsyn.lib.estimation.projected_noise import projected_noise_l1
from dpsyn.lib.estimation.maxent import draw, fit, junction_tree, maximal_cliques, tree_cells
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import Marginal
from dpsyn.lib.runtime.progress import progress
from dpsyn.lib.tuning import T
from dpsyn.method.base import RunContext, spread
from dpsyn.method.groups import base_size, smoothed_counts, start_records
from dpsyn.method.planner import Rounds
from dpsyn.method.selection import allocate
from dpsyn.method.split_columns import SplitColumns, per_key

log = logging.getLogger(__name__)

NOISE_L1 = math.sqrt(2 / math.pi)  # E|N(0, σ²)| / σ
# GUM passes of a round's warm-started refit and of the final fit.  From public records, the write-up's
# moves: duplicating a whole record keeps the joint structure of the public records among the columns no
# measurement covers.  From independent draws there is no such structure to keep, and duplicates collapse
# the records onto fewer distinct rows, which every unmeasured marginal pays for: there GUM first moves
# records only by rewriting the measured columns, then polishes briefly with duplicates for what rewriting
# alone does not fit.
# Each is (a round's passes, the final fit's passes).
FROM_PUBLIC = ((GumOptions(iterations=5, alpha=0.5, decay=0.85),), (GumOptions(),))
# The final polish is the write-up's full GUM: the exchange after it (``Model.exchange_unmeasured``) takes away
# what its duplicates copy into unmeasured columns.
REWRITE = ((GumOptions(iterations=5, alpha=0.5, decay=0.85, duplicate_share=0.0),
            GumOptions(iterations=2, alpha=0.3, decay=0.85)),
           (GumOptions(duplicate_share=0.0), GumOptions()))


@dataclass
class Model:
    """The released noisy marginals (merged per column set), their consistent versions, and the
    model records over the non-group columns.  Everything here is post-processing.

    Columns of many codes are split (``layout``, method/split_columns.py), so that the rounds can
    measure them coarsely: marginals, records and keys are over the model's columns; ``query``,
    ``domain_records`` and ``domain_marginals`` translate to and from the domain's."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    group_idx: tuple[int, ...]
    records: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int32))  # set by the rounds
    from_public: bool = False                        # the records started from public records
    noisy: dict = field(default_factory=dict)        # model key -> (values, sigma)
    consistent: dict = field(default_factory=dict)   # model key -> consistent values
    total: float = 1.0
    layout: SplitColumns = None  # type: ignore[assignment]  # default (__post_init__): no column split
    ordered: dict = field(default_factory=dict)      # domain column -> its first codes in increasing order
    smoothing: dict = field(default_factory=dict)    # model key -> how its noisy values were denoised, in words
    smoothed_memo: dict = field(default_factory=dict)  # model key -> (its noisy values, smoothed)
    public_memo: dict = field(default_factory=dict)    # model key -> the public records' counts
    tree_memo: dict = field(default_factory=dict)      # a graph of measured column sets -> its tree's cells
    fitted: tuple | None = None                      # the maximum-entropy fit with the group columns (joint)
    boxes: Boxes = NO_BOXES                          # the edit rules' forbidden boxes over the model's columns
    public: np.ndarray | None = None                 # the public records (model layout), a prior for every marginal

    def __post_init__(self):
        if self.layout is None:
            self.layout = SplitColumns(tuple(self.sizes), (1,) * len(self.sizes))

    @per_key
    def query(self, key: tuple[int, ...]) -> Marginal:
        """The private marginal a model key stands for (split columns read coarsely where the key does)."""
        cols = self.layout.columns(key)
        widths = self.layout.query_widths(key)
        return Marginal(tuple(self.names[j] for j in cols), widths if max(widths, default=1) > 1 else ())

    def add(self, cols: tuple[int, ...], values: np.ndarray, sigma: float) -> None:
        """Merge a measurement (model layout) into any earlier one of the same key (inverse-variance mean)."""
        if cols in self.noisy:
            old, old_sigma = self.noisy[cols]
            w_old, w_new = old_sigma ** -2, sigma ** -2
            values = (w_old * old + w_new * values) / (w_old + w_new)
            sigma = (w_old + w_new) ** -0.5
        self.noisy[cols] = (values, sigma)

    def fit_marginals(self, final: bool) -> None:
        """Consistent versions of every noisy marginal and their common total (cheaper within rounds,
        in full when ``final``)."""
        tolerance, sweeps = (T.consistency_tolerance, T.consistency_max_fit_iterations) if final else (T.adaptive_round_tolerance, T.adaptive_round_fit_iterations)
        keys, labels = list(self.noisy), self.layout.labels(self.names)
        consistent = make_consistent([Target(tuple(labels[j] for j in cols), *self.smoothed(cols)) for cols in keys],
                                     tolerance=tolerance, fit_iterations=sweeps)
        self.consistent = dict(zip(keys, consistent))
        self.total = float(consistent[0].sum())

    def smoothed(self, key: tuple[int, ...]) -> tuple[np.ndarray, float]:
        """The noisy marginal of model key ``key`` and its noise sd, pulled toward a guess where Stein's risk
        estimate says that pays (lib/estimation/smoothing.py): with public records, every marginal toward the public records'
        own (``shrink``: the public file as the prior, kept only as far as the noisy answer agrees with it);
        without, an exact 1-way marginal smoothed along its ordered codes or shrunk toward flat (``denoise``).
        Post-processing."""
        values, sigma = self.noisy[key]
        cols = self.layout.columns(key)
        memo = self.smoothed_memo.get(key)
        if memo is not None and memo[0] is values:  # smoothed again only when measured again
            return memo[1], sigma
        if self.public is not None:
            out, weight, share = shrink(values, sigma, self.public_shape(key))
            done = f"{1 - weight:.0%} toward the public records', estimated squared error {share:.2f} of the noise's" \
                if weight < 1 else ""
        elif self.from_public or len(cols) != 1 or self.layout.coarse(key):
            return values, sigma
        else:
            out, done = denoise(self.layout.to_query(key, values), sigma, self.ordered.get(cols[0], 0))
            out = self.layout.from_query(key, out)
        self.smoothing[key] = done
        self.smoothed_memo[key] = (values, out)
        return out, sigma

    def public_shape(self, key: tuple[int, ...]) -> np.ndarray:
        """The public records' counts over model key ``key`` (records with a code in every one of its columns).
        Public: no privacy cost."""
        if key not in self.public_memo:
            assert self.public is not None, "public_shape needs the public records"
            rows = self.public[:, list(key)]
            rows = rows[(rows >= 0).all(axis=1)]
            self.public_memo[key] = count_marginal(rows, tuple(self.layout.model_sizes[j] for j in key))
        return self.public_memo[key]

    def refit(self, rng: np.random.Generator, final: bool = False) -> None:
        """``fit_marginals``, then GUM on the records toward the global consistent marginals: a round's
        warm-started passes, or when ``final`` the full fit's (FROM_PUBLIC or REWRITE)."""
        self.fit_marginals(final)
        for options in (FROM_PUBLIC if self.from_public else REWRITE)[int(final)]:
            self.records = gum(self.records, self.layout.model_sizes, self.global_targets(),
                               rng, options, self.boxes)

    def global_targets(self) -> list[Target]:
        """The consistent marginals without group columns."""
        return [Target(cols, v) for cols, v in self.consistent.items() if self.is_global(cols)]

    def is_global(self, cols: tuple[int, ...]) -> bool:
        """Whether model key ``cols`` is a marginal of some columns, none of them a group column."""
        return bool(cols) and not set(cols) & set(self.group_idx)

    def group_parts(self, j: int) -> list[tuple[int, ...]]:
        """The measured marginals of column j by some of the group columns (S × j, S a non-empty
        subset of the group columns in their order; j read exactly or, where split, by coarse code)."""
        return [c for c in self.consistent if self.by_groups(c) and self.layout.columns(c)[-1] == j]

    @per_key
    def by_groups(self, cols: tuple[int, ...]) -> bool:
        """Whether model key ``cols`` is some group columns and one other column (read exactly or, where
        split, by coarse code)."""
        domain = self.layout.columns(cols)
        return len(domain) > 1 and set(domain[:-1]) <= set(self.group_idx) and domain[-1] not in self.group_idx

    def per_group_model(self, j: int) -> np.ndarray:
        """Groups × values of column j in the model's layout (group columns' axes, then j's): the
        consistent group × j counts when measured; else each group's count times j's overall
        distribution, fitted (iterative proportional fitting) to whatever S × j marginals were measured
        for subsets S of the group columns (PUMA × j without YEAR, say), keeping the group counts."""
        cols = self.layout.key(self.group_idx + (j,))
        if cols in self.consistent:
            return self.consistent[cols]
        counts = self.consistent[self.group_idx]
        one_way = clip_and_normalise(self.consistent[self.layout.key((j,))])
        start = counts.reshape(counts.shape + (1,) * one_way.ndim) * one_way
        parts = {c: self.consistent[c] for c in self.group_parts(j)}
        if parts:
            start = fit_to_margins(start, cols, {**parts, self.group_idx: counts}, T.adaptive_round_tolerance * self.total,
                                   T.adaptive_round_fit_iterations)
        return start

    def per_group(self, j: int) -> np.ndarray:
        """``per_group_model`` as groups × j's codes."""
        cols = self.layout.key(self.group_idx + (j,))
        return self.layout.to_query(cols, self.per_group_model(j)).reshape(-1, self.sizes[j])

    def per_group_marginals(self) -> dict[int, np.ndarray]:
        """``per_group`` of every column measured by some group columns (groups × values)."""
        return {j: self.per_group(j)
                for j in sorted({self.layout.columns(c)[-1] for c in self.consistent if self.by_groups(c)})}

    def answer(self, cols: tuple[int, ...]) -> np.ndarray:
        """The model's answer to the marginal of model key ``cols`` (model layout, scaled to the
        model's total): counted from the records, or where measured and the records started from
        independent draws, its consistent estimate (``estimates``)."""
        if self.estimates(cols):
            return self.consistent[cols]
        if self.by_groups(cols):  # the per-group model summed over what ``cols`` leaves out (groups, j's offset)
            j = self.layout.columns(cols)[-1]
            full = self.per_group_model(j)
            drop = tuple(i for i, c in enumerate(self.layout.key(self.group_idx + (j,))) if c not in cols)
            return full.sum(axis=drop) if drop else full
        shape = tuple(self.layout.model_sizes[c] for c in cols)
        return count_marginal(self.records[:, list(cols)], shape) * (self.total / max(len(self.records), 1))

    def estimates(self, cols: tuple[int, ...]) -> bool:
        """Whether the model answers model key ``cols`` by its consistent estimate rather than its records.
        From independent draws, a measured marginal that the records fit poorly is otherwise chosen again
        and again for a misfit that a new measurement does not mend (adult at eps 10: marital-status ×
        relationship × sex in 50 of 99 rounds); from public records, answering by the records does better."""
        return cols in self.consistent and not self.from_public

    def answers(self, candidates: list[tuple[int, ...]]) -> list[np.ndarray]:
        """``answer`` for every candidate, the ones counted from the records counted together in one pass
        over them (lib/records/marginals.count_marginals); a coarse reading whose exact one is a candidate too is that
        one with the offsets summed out."""
        exact_set = {key for key in candidates if not self.layout.coarse(key)}
        counted = [key for key in candidates if not self.estimates(key) and not self.by_groups(key)
                   and (not self.layout.coarse(key) or self.layout.exact_key(key) not in exact_set)]
        shapes = [self.layout.model_shape(key) for key in counted]
        scale = self.total / max(len(self.records), 1)
        specs = [(key, (1,) * len(key), shape) for key, shape in zip(counted, shapes)]
        known = dict(zip(counted, count_marginals(compact_codes(self.records, self.layout.model_sizes), specs, scale)))
        known.update((key, self.answer(key)) for key in candidates  # not from the records
                     if key not in known and (not self.layout.coarse(key)
                                              or self.by_groups(key) and self.layout.exact_key(key) not in exact_set))
        out = []
        for key in candidates:
            if key in known:
                out.append(known[key])
            elif self.estimates(key):
                out.append(self.consistent[key])
            else:  # a coarse reading of an exact candidate: offsets summed out
                out.append(known[self.layout.exact_key(key)].sum(axis=self.layout.summed_out(key)))
        return out

    def max_entropy(self, columns: list[int], with_groups: bool = False) -> tuple | None:
        """The consistent marginals fitted in full, then the maximum-entropy distribution with them
        (lib/estimation/maxent.py: its junction tree and calibrated beliefs) over model columns ``columns``, and the group
        columns with their marginals too when ``with_groups``, after at most adaptive_max_entropy_steps steps;
        None (nothing fitted but the marginals) where the tree would take over adaptive_max_entropy_cells cells.
        Post-processing."""
        keys, columns = self.tree_sets(columns, with_groups)
        tree = junction_tree(keys, columns, self.layout.model_sizes, root=self.group_idx if with_groups else ())
        if tree.cells > T.adaptive_max_entropy_cells:
            log.info("adaptive: the measured marginals' junction tree would take %d cells (over %d); records "
                     "fitted by GUM instead", tree.cells, T.adaptive_max_entropy_cells)
            return None
        self.fit_marginals(final=True)
        targets = [(c, self.consistent[c]) for c in keys]
        log.info("adaptive: records to be drawn from the maximum-entropy distribution with the consistent "
                 "marginals%s (a junction tree of %d cliques, %d cells)", " and the group columns" * with_groups,
                 len(tree.cliques), tree.cells)
        weights = [(self.total / self.noisy[c][1]) ** 2 for c, _ in targets]
        beliefs, settled = fit(tree, [Target(c, v, weight=w) for (c, v), w in zip(targets, weights)],
                               iterations=T.adaptive_max_entropy_steps, tolerance=T.adaptive_max_entropy_tolerance)
        if not settled:  # private-pgm's estimators stop at a fixed number of steps too
            log.info("adaptive: the maximum-entropy fit stopped at %d steps before it settled; records drawn from it",
                     T.adaptive_max_entropy_steps)
        return tree, beliefs

    def tree_sets(self, columns: list[int], with_groups: bool) -> tuple[list[tuple[int, ...]], list[int]]:
        """The column sets the maximum-entropy fit's junction tree must hold (the measured marginals', with the
        group columns' when ``with_groups``) and its columns."""
        keys = [c for c in self.noisy if c and (with_groups or self.is_global(c))]
        return keys, list(columns) + (list(self.group_idx) if with_groups else [])

    def within_tree(self, candidates: list[tuple[int, ...]], columns: list[int]) -> list[tuple[int, ...]]:
        """The candidates whose measurement keeps the maximum-entropy fit's junction tree (over model columns
        ``columns`` and the group columns) within adaptive_max_entropy_cells cells, so that measuring more never
        forces the final records off that fit (AIM's model-size rule).  Public: keys and sizes only."""
        keys, columns = self.tree_sets(columns, bool(self.group_idx))
        sizes = self.layout.model_sizes
        cliques = [set(c) for c in maximal_cliques(keys, columns, sizes)]
        edges = {e for k in keys for e in itertools.combinations(sorted(k), 2)}

        def fits(key) -> bool:  # cells memoised by the graph: a round that adds no edge asks the same again
            graph = frozenset(edges.union(itertools.combinations(sorted(key), 2)))
            if graph not in self.tree_memo:
                self.tree_memo[graph] = tree_cells(keys + [key], columns, sizes)
            return self.tree_memo[graph] <= T.adaptive_max_entropy_cells

        return [key for key in candidates if any(set(key) <= c for c in cliques) or fits(key)]

    def draw_groups(self, per_group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Domain records from the maximum-entropy fit with the group columns (``fitted``): ``per_group[g]``
        of group g (groups in C order of the group columns), the other columns drawn given the group.
        Post-processing."""
        assert self.fitted is not None, "draw_groups needs the maximum-entropy fit"
        tree, beliefs = self.fitted
        records = np.zeros((int(per_group.sum()), len(self.layout.model_sizes)), dtype=np.int32)
        groups = np.repeat(np.arange(per_group.size), per_group)
        records[:, list(self.group_idx)] = np.stack(
            np.unravel_index(groups, tuple(self.sizes[g] for g in self.group_idx)), axis=1)
        return self.layout.decode(draw(tree, beliefs, records, rng, given=tuple(sorted(self.group_idx))))

    def exchange_unmeasured(self, columns: list[int], rng: np.random.Generator) -> None:
        """Each of ``columns`` (model columns) exchanged among the records that agree on every column
        measured with it (lib/records/exchange.py) and on every column an edit rule reads with it.  Every measured
        marginal keeps the records' counts and no record enters a box (each block's other box columns are
        equal, and each value was allowed with them); what goes is the association with unmeasured columns
        that GUM's duplicates copy in.  Post-processing."""
        groups = set(self.group_idx)  # not model records' columns
        together = [tuple(c for c in cols if c not in groups)
                    for cols in [*self.noisy, *(box.columns for box in self.boxes.boxes)]]
        changed = exchange_unmeasured(self.records, columns, together, rng)
        log.info("adaptive: each column exchanged among records that agree on the columns measured with it "
                 "(%d values of %d records moved)", changed, len(self.records))

    def domain_records(self) -> np.ndarray:
        """The model records over the domain's columns."""
        return self.layout.decode(self.records)

    def domain_marginals(self) -> dict[tuple[int, ...], np.ndarray]:
        """Every consistent marginal that reads its columns exactly, over the domain's columns."""
        return {self.layout.columns(k): self.layout.to_query(k, v) for k, v in self.consistent.items()
                if not self.layout.coarse(k)}


@dataclass(frozen=True)
class RoundsSpec:
    """How ``measure_adaptively`` spends its budget (method/planner.py chooses).

    ``group_rho``: the group counts' rho (when there are groups).  ``max_cells``: the largest marginal a
    round may measure.  ``earlier``: Targets (column indices, noisy values, sigma) already measured (a noisy total;
    or the two-way regime's marginals where method/dpsyn.py fits the group columns in the base), kept in the
    model; a column measured there is never split.  ``rounds``: the planner's numbers (rounds a column, the 1-way
    marginals' rho in rounds' (0: none measured here), coarse reads, the maximum-entropy fit; planner.py
    ``Rounds``; the default measures no 1-way marginals and needs ``count``); ``count``: this many rounds instead
    of ``rounds.per_column`` a column; ``picks``: marginals measured a round (one selection of that many), the
    round's rho split evenly over them; ``per_row``: base
    records a row of the noisy total (groups.py ``base_size``; None: its default).  The maximum-entropy fit is
    used only without public records or edit rules (step 4; with groups, drawn per group by
    ``Model.draw_groups``) and where it fits."""

    group_rho: float = 0.0
    max_cells: int = 20_000
    earlier: tuple = ()
    rounds: Rounds = Rounds(0, one_way=0)
    per_row: int | None = None
    picks: int = 1
    count: int | None = None


def measure_adaptively(private: PrivateTable, public_codes: np.ndarray | None, ctx: RunContext,
                       group_idx: list[int], other_idx: list[int], spec: RoundsSpec) -> Model:
    """The fitted model after spending exactly what remains of the run's budget (module doc), as ``spec``
    says.  Privacy cost: ``private.remaining`` at the call, all of it: ``spec.group_rho`` on the group
    counts (when there are groups), the rest on 1-way marginals and the rounds' selections and
    measurements.
    """
    earlier, coarse_reads, one_way_rounds, picks = (spec.earlier, spec.rounds.coarse_reads, spec.rounds.one_way,
                                                    spec.picks)
    names, sizes = ctx.domain.names, ctx.domain.sizes
    # Columns of many codes are split (method/split_columns.py) only when the records start from independent
    # draws.  Public records already carry each column's detail and its relation to the others, and there coarse
    # readings crowd out the exact ones.  A column an edit rule reads is split too, the rules' boxes carried into
    # the split layout (``SplitColumns.boxes``), except where the pairs are noisy: there its coarse readings take
    # rounds from the pairs a classifier reads.
    kept_whole = {c for box in ctx.boxes.boxes for c in box.columns} if coarse_reads else set()
    measured = {j for t in earlier for j in t.query}  # keyed by the domain's codes
    # Where the pairs are noisy (``coarse_reads``), a numeric column with a null token is also split at that
    # token, so that a round may read it as null or not: that is often what it shares most with other columns
    # (income, null under 15, against age or marital status; number of children, null outside households,
    # against housing type), and there the exact pair is mostly noise.  Where pairs are affordable the coarse
    # readings crowd out exact ones.
    candidates = [j for j in other_idx if j not in kept_whole | measured] if public_codes is None else []
    layout = SplitColumns.choose(sizes, candidates, at_null=[j for j in candidates if names[j] in ctx.domain.nullable]
                                 if coarse_reads else ())
    public = layout.encode(public_codes) if public_codes is not None else None
    model = Model(names, sizes, tuple(group_idx), from_public=public is not None, layout=layout, public=public,
                  ordered={j: ctx.domain.ordered.get(names[j], 0) for j in other_idx},
                  boxes=layout.boxes(ctx.boxes))
    for t in earlier:
        model.add(tuple(t.query), t.noisy, t.sigma)
    if group_idx:
        m = private.measure(Marginal(tuple(names[j] for j in group_idx)),
                            spec.group_rho if other_idx else private.remaining,
                            f"group counts ({' × '.join(names[j] for j in group_idx)})")
        model.add(tuple(group_idx), smoothed_counts(m.noisy, m.sigma, tuple(names[j] for j in group_idx)),
                  m.sigma)
    elif not other_idx:
        m = private.measure(Marginal(()), private.remaining, "number of rows")
        model.add((), m.noisy.reshape(()), m.sigma)
    rho_round = private.remaining / (spec.count * picks if spec.count else
                                     spec.rounds.per_column * max(len(other_idx), 1))  # a pick's
    # where columns are split, rounds mostly read them coarsely, so their exact 1-way marginals are measured
    # about once: the 1-way budget goes by cells^(2/3), the split that minimises their summed expected noise
    one_way = one_way_rounds * (1 - T.adaptive_select_share) * rho_round * len(other_idx)
    rhos = allocate([(j,) for j in other_idx], sizes, one_way) if layout.split else \
        [one_way / len(other_idx)] * len(other_idx)
    for j, rho_j in zip(other_idx, rhos if one_way_rounds > 0 else []):
        m = private.measure(Marginal((names[j],)), rho_j)
        model.add(layout.key((j,)), layout.from_query(layout.key((j,)), m.noisy), m.sigma)
    model.fit_marginals(final=not other_idx)
    if not other_idx:
        return model
    if layout.split:
        log.info("adaptive: %s split into coarse codes and offsets, so rounds may measure them coarsely",
                 ", ".join(f"{names[j]} ({sizes[j]} codes, " + ("null or not)" if layout.at_null(j) else
                                                                 f"in {layout.widths[j]}s)") for j in layout.split))
    model_idx = list(other_idx) + [layout.offset(j) for j in layout.split]
    n = base_size(model.total, per_row=spec.per_row)
    # kept as compact_codes gives them: GUM moves them, and the rounds count them, in that layout
    model.records = compact_codes(start_records(public, model_idx, model.global_targets(), n, layout.model_sizes,
                                                ctx.rng), layout.model_sizes)
    model.records = gum(model.records, layout.model_sizes, model.global_targets(), ctx.rng,
                        boxes=model.boxes)
    if one_way_rounds > 0:
        sigmas = [model.noisy[layout.key((j,))][1] for j in other_idx]
        log.info("adaptive: %s%d 1-way marginals measured (noise sd %s rows per cell); rounds start at rho %.3g "
                 "each", "group counts and " if group_idx else "", len(other_idx), spread(sigmas), rho_round)
    else:
        log.info("adaptive: rounds start from %d marginals measured before, at rho %.3g each", len(earlier),
                 rho_round)
    max_entropy = spec.rounds.max_entropy and not model.from_public and not model.boxes
    chosen = _rounds(private, ctx, model, other_idx,
                     RoundBudget(spec.max_cells, rho_round * picks, picks, model_idx if max_entropy else None))
    log.info("adaptive: the rounds measured %d marginals: %s", len(chosen), ", ".join(chosen) or "none")
    fitted = model.max_entropy(model_idx, with_groups=bool(group_idx)) if max_entropy else None
    if fitted is None:
        model.refit(ctx.rng, final=True)
    elif group_idx:
        model.fitted = fitted
    else:
        tree, beliefs = fitted
        model.records = draw(tree, beliefs, np.zeros_like(model.records), ctx.rng)
    smoothed = {key: done for key, done in model.smoothing.items() if done}
    if smoothed:
        log.info("adaptive: noisy marginals smoothed or shrunk toward a guess (post-processing): %s",
                 ", ".join(f"{model.query(key).columns_text()} ({done})" for key, done in smoothed.items()))
    if fitted is None and not model.from_public:
        model.exchange_unmeasured(model_idx, ctx.rng)
    return model


@dataclass(frozen=True)
class RoundBudget:
    """The rounds' sizes: the largest marginal a round may measure (``max_cells``), a round's rho at the start
    (``rho_round``), the marginals each round measures (``picks``) and, where the final records come from the
    maximum-entropy fit over ``tree_columns``, those columns (a round then keeps its junction tree within
    its size)."""

    max_cells: int
    rho_round: float
    picks: int = 1
    tree_columns: list[int] | None = None


def _rounds(private: PrivateTable, ctx: RunContext, model: Model, other_idx: list[int],
            budget: RoundBudget) -> list[str]:
    """AIM's rounds until the budget is spent, each choosing ``budget.picks`` marginals; returns what each round
    measured, in words.  With ``budget.tree_columns``, a round chooses only among the candidates that keep its
    junction tree within its size (``Model.within_tree``)."""
    chosen: list[str] = []
    with progress(100, "adaptive rounds", "% of their rho", log) as bar:
        _spend_rounds(private, ctx, model, other_idx, budget, chosen, bar)
    return chosen


def _spend_rounds(private: PrivateTable, ctx: RunContext, model: Model, other_idx: list[int], budget: RoundBudget,
                  chosen: list[str], bar) -> None:
    """The rounds of ``_rounds``, appending what each measured to ``chosen`` and moving ``bar`` by the share of
    the rounds' rho spent."""
    max_cells, rho_round, picks, tree_columns = budget.max_cells, budget.rho_round, budget.picks, budget.tree_columns
    start = private.remaining
    round_no = 0
    shifts: dict[tuple[int, ...], float] = {}  # each candidate's last τ / σ (projected_noise_l1's start)
    while private.remaining > 0:
        last = private.remaining <= 2 * rho_round * (1 + 1e-9)
        if last:
            rho_round = private.remaining
        rho_select = T.adaptive_select_share * rho_round
        rho_measure = (rho_round - rho_select) / picks
        candidates = candidate_keys(model, other_idx, max_cells)
        if tree_columns is not None:
            candidates = model.within_tree(candidates, tree_columns)
        if not candidates:  # every column has one value: nothing to choose, the rest sharpens the counts
            key = tuple(model.group_idx) or model.layout.key((other_idx[0],))
            query = model.query(key)
            m = private.measure(query, private.remaining, f"adaptive: {query.describe()} again (nothing to choose)")
            model.add(key, model.layout.from_query(key, m.noisy), m.sigma)
            model.refit(ctx.rng)
            chosen.append(query.columns_text())
            break
        queries = [model.query(key) for key in candidates]
        references = [model.layout.to_query(key, a) for key, a in zip(candidates, model.answers(candidates))]
        sigmas = np.array([private.sensitivity(q).l2 for q in queries]) / math.sqrt(2 * rho_measure)
        left = projected_noise_l1(references, sigmas, [shifts.get(key, 0.0) for key in candidates])
        penalties = left.l1
        shifts.update(zip(candidates, left.shift))
        round_no += 1
        k = min(picks, len(queries))
        picked = private.select(queries, references, rho_select, k=k, penalties=penalties,
                                label=f"adaptive round {round_no}: choice of {k} of {len(queries)} marginals").chosen
        expected = []
        for i, pick in enumerate(picked):
            cols, query = candidates[pick], queries[pick]
            final = last and i == len(picked) - 1
            measured = private.measure(query, private.remaining if final else rho_measure,
                                       f"adaptive round {round_no}: {query.describe()}")
            error = float(np.abs(measured.noisy - references[pick]).sum())  # public: noisy answer against the model
            model.add(cols, model.layout.from_query(cols, measured.noisy), measured.sigma)
            expected.append(float(projected_noise_l1([references[pick]], [measured.sigma]).l1[0]))
            chosen.append(query.columns_text())
            log.debug("adaptive round %d: chose %s (noisy L1 error %.4g vs expected noise %.4g over %d cells), "
                      "rho %.3g (noise sd %.3g)", round_no, chosen[-1], error, expected[-1], references[pick].size,
                      rho_round, measured.sigma)
        model.refit(ctx.rng)
        bar.update(round(100 * (1 - private.remaining / start)) - bar.n)
        moved = [float(np.abs(model.layout.to_query(candidates[p], model.answer(candidates[p])) - references[p]).sum())
                 for p in picked]
        log.debug("adaptive round %d: the model moved %s", round_no, ", ".join(f"{m:.4g}" for m in moved))
        if last:
            break
        if all(m <= e for m, e in zip(moved, expected)):
            rho_round = min(4 * rho_round, private.remaining)
            log.debug("adaptive: the model moved less than the noise; rounds now spend rho %.3g", rho_round)


def candidate_keys(model: Model, other_idx: list[int], max_cells: int) -> list[tuple[int, ...]]:
    """Model keys the next round may measure (module doc), each at most ``max_cells`` cells, in a
    fixed order (group × column last, by one group column before two).  A pair or triple with split
    columns is a candidate in every reading of them: exactly or by coarse code (a pair), or all
    exactly or all coarsely (a triple)."""
    sizes, layout = model.sizes, model.layout
    out = [layout.key((j,)) for j in other_idx if sizes[j] > 1]
    out += [k for p in itertools.combinations(other_idx, 2) for k in layout.readings(p) if layout.cells(k) <= max_cells]
    measured = {layout.columns(c) for c in model.noisy}
    pairs = [c for c in measured if len(c) == 2 and not set(c) & set(model.group_idx)]
    triples = {tuple(sorted(p + (k,))) for p in pairs for k in other_idx if k not in p}
    out += [k for t in sorted(triples) for k in layout.whole_readings(t) if layout.cells(k) <= max_cells]
    if model.group_idx:  # by one group column or more: small groups get their columns by PUMA or by YEAR
        widths = range(1, len(model.group_idx) + 1)
        for by in (by for r in widths for by in itertools.combinations(model.group_idx, r)):
            out += [k for j in other_idx if sizes[j] > 1 for k in layout.readings(by + (j,))
                    if layout.cells(k) <= max_cells]
    return out
