"""Per-group synthesis: group sizes from noisy counts, records per group from a base set.

Post-processing only (reads noisy counts, consistent targets and synthetic records).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from dpsyn.lib.estimation.consistency import fit_to_margins
from dpsyn.lib.records.constraints import NO_BOXES, Boxes
from dpsyn.lib.estimation.gum import GumOptions, gum
from dpsyn.lib.records.marginals import clip_and_normalise
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.runtime.progress import progress
from dpsyn.lib.estimation.raking import balanced_groups, rake, rake_groups, stratified_order, systematic_draw
from dpsyn.lib.estimation.shrinkage import shrink_counts
from dpsyn.lib.runtime.tasks import run_tasks
from dpsyn.lib.tuning import T

log = logging.getLogger(__name__)

# How a group's records are fitted to its targets (``synthesize_groups``):
GUM_MOVES = "gum"  # the write-up: GUM passes (GROUP_GUM) toward every target
REWRITE = "rewrite"  # GUM passes that only rewrite the columns of the group's targets (GROUP_REWRITE)
OWN_RAKE = "own-rake"  # for a base whose records carry their group (``own_pools``): each group rakes its own
# records to its own 1-way marginals, draws its rows, and GUM rewrites them the rest of the way (GROUP_REWRITE):
# the draw alone leaves each group's 1-way marginals a little off, and the rewriting moves few records
OWN_REWRITE = "own-rewrite"  # for base records each assigned to one group (``assigned_rows``): each group's own
# records, GUM-rewritten toward its own 1-way marginals (GROUP_REWRITE), so that the pairs the base fitted stay
RAKE = "rake"  # no GUM: whole base records drawn with weights raked to the group's own 1-way marginals,
# stratified by those marginals' columns (the draw's sampling error then falls on the other columns less)
# Duplicating a whole record to fit a group's targets also moves the group's other columns, which nothing
# refits: from public records that keeps the public joint structure, but from independent draws it only adds
# sampling error to every column.  Rewriting, in turn, makes records the base never held (children with
# incomes): a base fitted from public records to every pair keeps its pairs best when each group is a weighted
# draw of whole base records.
GROUP_GUM = GumOptions(iterations=4, alpha=0.5, decay=0.8)
GROUP_REWRITE = GumOptions(iterations=4, alpha=0.5, decay=0.8, duplicate_share=0.0)


def base_size(total: float, most: int | None = None, per_row: int | None = None) -> int:
    """Records in a base set for a table of about ``total`` rows: at most ``most`` (default
    groups_base_records), at least 1,000; ``per_row`` records a row (the plan's ``base_per_row``) when that is
    at most groups_rich_base_records."""
    most = T.groups_base_records if most is None else most
    if per_row is not None and per_row * total <= T.groups_rich_base_records:
        return int(max(per_row * total, 1000))
    return int(min(most, max(total, 1000)))


def start_records(public_codes: np.ndarray | None, other_idx: list[int], targets, n: int,
                  sizes: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """n records to start GUM from: random public records when given (unknown codes as 0), else
    independent draws from the 1-way projections of ``targets`` (Targets over column indices).  Only the
    ``other_idx`` columns are set; group columns and columns the release sets later stay 0."""
    records = np.zeros((n, len(sizes)), dtype=np.int32)
    if public_codes is not None:
        records[:, other_idx] = public_codes[rng.integers(0, len(public_codes), n)][:, other_idx]
        records[records < 0] = 0
        return records
    for j in other_idx:
        cols, values = next((t.query, t.noisy) for t in targets if j in t.query)
        axis = tuple(i for i, c in enumerate(cols) if c != j)
        records[:, j] = rng.choice(sizes[j], size=n, p=clip_and_normalise(values.sum(axis=axis)))
    return records


def smoothed_counts(noisy: np.ndarray, sigma: float, columns: tuple[str, ...]) -> np.ndarray:
    """The noisy group counts (shaped by ``columns``) pulled toward their independence fit by
    empirical Bayes (lib/estimation/shrinkage.py): where the noise sd is large against the counts, as with
    many small groups, each group's count borrows from its row and column totals.  Post-processing."""
    shrunk = shrink_counts(noisy, sigma)
    kept = ", ".join(f"{c} totals {w:.0%}" for c, w in zip(columns, shrunk.margins))
    log.info("group counts (noise sd %.3g rows each): each group's count moved toward what %s, keeping "
             "%.0f%% of its difference from that prediction (the noisier the counts, the less; %s)", sigma,
             "the mean count predicts" if len(columns) == 1 else "the " + " and ".join(columns) + " totals predict",
             100 * shrunk.cells, kept)
    return shrunk.values


def group_sizes(noisy: np.ndarray, max_records: int, floor: int = 0, multiple: int = 1) -> np.ndarray:
    """Integer group sizes: noisy counts raised to ``floor`` (where positive), rounded to a multiple
    of ``multiple`` (so equal sizes can reuse work), then scaled down to fit ``max_records``."""
    sizes = np.where(noisy > 0, np.maximum(noisy, floor), 0.0)
    sizes = np.rint(sizes / multiple) * multiple
    total = sizes.sum()
    if total > max_records:
        log.warning("noisy total %d exceeds max_records %d: group sizes scaled down", total, max_records)
        sizes = np.floor(sizes * (max_records / total))
    return sizes.astype(np.int64)




def per_group_targets(targets: list[Target], per_group_1way: dict, n_groups: int) -> list[Target]:
    """Each global target stacked per group (leading axis: group) and fitted, for all groups
    at once, to the groups' own 1-way marginals (``per_group_1way[column]``: groups × values).

    Keeps each global marginal's association while moving its margins to every group's own."""
    out = []
    for t in targets:
        cols, values = t.query, t.noisy
        margins = {("group", c): per_group_1way[c] + 1e-9 for c in cols if c in per_group_1way}
        stacked = np.broadcast_to(values, (n_groups,) + values.shape)
        out.append(Target(cols, fit_to_margins(stacked, ("group",) + tuple(cols), margins, 0.0,
                                               T.groups_fit_iterations)))
    return out


def draw_rows(available: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n row indices below ``available``: without repeats when there are enough rows (a subsample
    keeps the base's marginals better than draws with replacement), else every row as often as n
    allows and the remainder without repeats (so only the remainder adds sampling error)."""
    if n <= available:
        return rng.permutation(available)[:n]
    whole, rest = divmod(n, available)
    return np.concatenate([np.tile(np.arange(available), whole), rng.permutation(available)[:rest]])


def partition_rows(available: int, counts: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Row indices below ``available`` for groups of ``counts`` rows: consecutive pieces of one stream
    of permutations, so the groups share the base out between them instead of each drawing on its own.
    Where the counts sum to ``available`` the groups together hold every base record once, and a column
    that no group refits keeps the base's overall marginal exactly; independent draws per group would
    add sampling error to it (ct_drug_deaths, 9 groups of ~850 rows: about 0.004 of TVD on a binary
    column with p = 0.3, as much as MST's whole 1-way error there)."""
    counts = np.asarray(counts, dtype=np.int64)
    stream = draw_rows(available, int(counts.sum()), rng)
    return np.split(stream, np.cumsum(counts)[:-1])


def own_pools(base: np.ndarray, per_group: np.ndarray, group_idx: list[int],
              sizes: tuple[int, ...]) -> list[tuple[np.ndarray, int]]:
    """For every group with rows (``np.flatnonzero(per_group)``, in order): (indices of the base records
    whose group columns read that group, or of every base record where none does; the group's size).
    The ``pieces`` of an OWN_RAKE ``synthesize_groups``.  Post-processing."""
    cells = np.ravel_multi_index(base[:, group_idx].T, tuple(sizes[j] for j in group_idx))
    return [(own, int(per_group[g])) for g, own in _members(cells, per_group)]


def assigned_rows(base: np.ndarray, per_group: np.ndarray, per_group_1way: dict,
                  rng: np.random.Generator) -> list[np.ndarray]:
    """For every group with rows (``np.flatnonzero(per_group)``, in order): ``per_group[g]`` indices of
    the base records assigned to it.  Each base record goes to one group as its ``rake_groups`` shares say
    (the groups' sizes ``per_group``; ``per_group_1way[column]``: groups × values), so the groups split
    the base whole, as their own 1-way marginals say: ``balanced_groups`` over the records stratified by
    those columns, which keeps the draw's error in the groups' marginals to a few records (independent
    draws broke more of the pairs the rewriting then has to mend: a test's X = Y share 0.972, balanced
    0.995).  A group keeps a random subset of its records, or repeats them where it needs more
    (``draw_rows``).  The ``pieces`` of an OWN_REWRITE ``synthesize_groups``.  Post-processing."""
    shares = rake_groups(base, [Target((j,), v) for j, v in per_group_1way.items()], per_group, T.groups_assign_passes)
    strata = base[:, list(per_group_1way)]
    cells = balanced_groups(shares, stratified_order(len(base), strata, rng))
    return [own[draw_rows(len(own), int(per_group[g]), rng)] for g, own in _members(cells, per_group)]


def _members(cells: np.ndarray, per_group: np.ndarray) -> list[tuple[np.integer, np.ndarray]]:
    """(g, indices of the records in group g, or of every record where none is) for every group with rows."""
    order = np.argsort(cells, kind="stable")
    bounds = np.searchsorted(cells[order], np.arange(len(per_group) + 1))
    return [(g, order[bounds[g]:bounds[g + 1]] if bounds[g + 1] > bounds[g] else np.arange(len(cells)))
            for g in np.flatnonzero(per_group)]


def _one_group(state, args) -> np.ndarray:
    cell, rows, rng = args  # rows: base row indices, or (RAKE) how many rows to draw, or (OWN_RAKE) (pool, how many)
    base, group_idx, targets, stacked, sizes, group_shape, boxes, fit = state
    if fit in (RAKE, OWN_RAKE):  # targets: the groups' own 1-way marginals, {column: groups × values}
        if fit == OWN_RAKE:
            pool, rows = base[rows[0]], rows[1]
        elif len(base) <= T.groups_rake_pool * rows:
            pool = base
        else:
            pool = base[rng.choice(len(base), T.groups_rake_pool * rows, replace=False)]
        weights = rake(pool, [Target((j,), values[cell]) for j, values in targets.items()], T.groups_rake_passes)
        records = pool[systematic_draw(weights, rows, rng, strata=pool[:, list(targets)])]
        if fit == OWN_RAKE:
            records = gum(records, sizes, [Target((j,), values[cell]) for j, values in targets.items()], rng,
                          GROUP_REWRITE, boxes)
    elif fit == OWN_REWRITE:
        records = gum(base[rows], sizes, [Target((j,), values[cell]) for j, values in targets.items()], rng,
                      GROUP_REWRITE, boxes)
    else:
        if stacked:
            targets = [Target(t.query, t.noisy[cell]) for t in targets]
        records = gum(base[rows], sizes, targets, rng,
                      GROUP_REWRITE if fit == REWRITE else GROUP_GUM, boxes)
    if group_idx:
        records[:, group_idx] = np.unravel_index(cell, group_shape)
    return records


class GroupState(NamedTuple):
    """What every group's task reads (``_one_group``): the base records, the group columns, the targets, whether
    they are stacked per group, the domain sizes, the groups' shape, the boxes no record may enter, the fit."""

    base: np.ndarray
    group_idx: list[int]
    targets: object
    stacked: bool
    sizes: tuple[int, ...]
    group_shape: tuple[int, ...]
    boxes: Boxes
    fit: str


@dataclass(frozen=True)
class GroupTargets:
    """What the groups are fitted to: ``shared``, the global marginals (Targets over column indices), and
    ``own``, by column, each group's own 1-way marginal (rows = groups)."""

    shared: list[Target]
    own: dict = field(default_factory=dict)


@dataclass(frozen=True)
class GroupFit:
    """How ``synthesize_groups`` fits each group.  ``fit``: GUM_MOVES (the write-up's GUM), REWRITE (GUM that
    only rewrites the targets' columns, for a base that did not start from public records) or RAKE (where
    there are per-group marginals: each group draws its rows from the base, or a random groups_rake_pool
    records a row of it, in proportion to weights raked to its own 1-way marginals, stratified by their
    columns, and keeps them whole) or OWN_RAKE (the same from ``pieces``, (each group's own base records, its
    size) from ``own_pools``, then GUM rewriting toward its own 1-way marginals) or OWN_REWRITE (``pieces``:
    the base rows each group holds, from ``assigned_rows``, GUM-rewritten toward its own 1-way marginals).
    ``jobs``: worker processes.  ``reuse_equal_sizes``: groups that share the global targets and a size share
    one set of records (see ``_reuse_equal_sizes``).  ``boxes``: no record lands in one (raked draws copy
    base records, which are allowed).  ``own_targets_only``: GUM each group only toward the targets that
    involve a column with a per-group marginal (the base already follows the others; fitting a small group
    to them again distorts it), and not at all when there is none.  ``run(fn, state, tasks, done)`` runs the
    groups' tasks (a RunContext's ``run_tasks``: the release's engine); default, ``jobs`` forked
    processes."""

    fit: str = GUM_MOVES
    jobs: int = 1
    reuse_equal_sizes: bool = False
    boxes: Boxes = NO_BOXES
    own_targets_only: bool = False
    pieces: list | None = None
    run: Callable | None = None


def synthesize_groups(base: np.ndarray, per_group: np.ndarray, group_idx: list[int], targets: GroupTargets,
                      sizes: tuple[int, ...], rng: np.random.Generator, how: GroupFit = GroupFit()) -> np.ndarray:
    """Records of every group stacked in group order: ``per_group[g]`` rows of ``base`` (the groups
    share the base out between them, ``partition_rows``) GUM-updated toward ``targets.shared`` (global
    marginals); where ``targets.own[column]`` gives the group's own 1-way marginal (rows = groups), the
    group's targets are the global ones fitted to it; fitted as ``how`` says.  Each group has its own child
    of ``rng``, so the result does not depend on ``how.jobs`` (worker processes)."""
    per_group_1way, fit, boxes, pieces = targets.own, how.fit, how.boxes, how.pieces
    jobs, shared = how.jobs, targets.shared
    run = how.run or (lambda fn, state, tasks, done: run_tasks(fn, state, tasks, jobs, done))
    if how.own_targets_only:
        shared = [t for t in shared if set(t.query) & set(per_group_1way)]
    group_shape = tuple(sizes[j] for j in group_idx)
    cells = np.flatnonzero(per_group)
    rngs = rng.spawn(len(cells))
    stacked = bool(per_group_1way)
    if fit == RAKE and not stacked:
        fit = GUM_MOVES  # no marginal of a group's own to rake to
    aims: list[Target] | dict[int, np.ndarray] = shared  # what each group fits: global, stacked or its own
    if fit in (RAKE, OWN_RAKE, OWN_REWRITE):
        aims = per_group_1way
    elif stacked:
        aims = per_group_targets(shared, per_group_1way, int(np.prod(group_shape)))
    elif how.reuse_equal_sizes and len(cells):
        tasks = [(int(c), int(per_group[c]), r) for c, r in zip(cells, rngs)]
        return _reuse_equal_sizes(tasks, GroupState(base, [], aims, False, sizes, group_shape, boxes, fit),
                                  group_idx)
    # a raked group draws from the whole base, an own-raked or own-rewritten one from its own records; the others
    # share it out
    if fit == RAKE:
        pieces = [int(n) for n in per_group[cells]]
    elif fit not in (OWN_RAKE, OWN_REWRITE):
        pieces = partition_rows(len(base), per_group[cells], rng)
    assert pieces is not None, "own-raked and own-rewritten groups come with their pieces"
    tasks = [(int(c), rows, r) for c, rows, r in zip(cells, pieces, rngs)]
    state = GroupState(base, group_idx, aims, stacked, sizes, group_shape, boxes, fit)
    with progress(len(tasks), "groups", "group", log, minimum=2) as bar:
        parts = run(_one_group, state, tasks, bar.update)
    if not parts:
        return np.zeros((0, len(sizes)), dtype=np.int32)
    return np.concatenate(parts)


def _reuse_equal_sizes(tasks, state: GroupState, group_idx: list[int]) -> np.ndarray:
    """Groups that share global targets and a (rounded) size share one set of records: each
    distinct size is synthesized once, with the generator of its first group, and copied
    into every group of that size (the write-up's reuse of work with rounding to K).  ``state``'s
    own group columns are empty: ``group_idx`` are set on each copy."""
    base, group_shape = state.base, state.group_shape
    by_size = {}
    for cell, n, rng in tasks:
        if n not in by_size:
            by_size[n] = _one_group(state, (cell, draw_rows(len(base), n, rng), rng))
    log.info("groups: %d distinct rounded sizes synthesized for %d groups", len(by_size), len(tasks))
    parts = []
    for cell, n, _ in tasks:
        records = by_size[n].copy()
        records[:, group_idx] = np.unravel_index(cell, group_shape)
        parts.append(records)
    return np.concatenate(parts)
