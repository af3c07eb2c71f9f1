"""Linking synthetic rows into individuals: rows of consecutive clock positions (years) chained so that the
number of individuals by first position and length follows a planned table, only rows that may belong to one
individual are linked, and each link's cost (how unlikely its changes are) is small.

Everything here is post-processing of synthetic rows and released (noisy) answers: nothing reads private data.

* ``plan_spans``: integer counts of individuals by first position and number of rows, rounded from the
  least-squares fit to noisy counts that covers every position's rows exactly (one-row individuals take what
  is left);
* ``link``: position by position, the individuals planned to go on are matched to the next position's rows
  of their own block (equal keys: what must agree between two rows of one individual) by a min-cost
  assignment whose costs are perturbed by Gumbel noise (so that links are drawn, not always the likeliest);
  blocks with many rows are cut into pieces of rows alike in the followed columns, matched alone;
  where a block has no row for a planned link, an individual of another block that was planned to end goes
  on instead, so each position keeps its planned number of links where the blocks allow it.
* where rows have homes (``Homes``: e.g. the area of a table synthesized per area and year), the share of
  individuals that stays home is matched first to the next position's rows of the same home, whatever their
  keys, at a cost in which one key change outweighs the spread of a piece's followed-column costs; such a
  follower then takes the key its individual needs (the caller rewrites it); the rest may go on only in
  another home.  Rows synthesized per home and year rarely hold, in one home, a row with exactly the key a
  continuing individual needs; without homes, individuals would move home to keep their keys.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
from scipy.optimize import LinearConstraint, linear_sum_assignment, minimize

NO_KEY = -1  # a row whose individual cannot go on (no row could follow it)


def coverage(positions: int, theta: int) -> np.ndarray:
    """positions × (positions·theta) 0/1 matrix: which positions the span (first s, k rows), flattened as
    s·theta + k - 1, covers; spans past the last position cover nothing (they are impossible)."""
    out = np.zeros((positions, positions * theta))
    for s in range(positions):
        for k in range(1, min(theta, positions - s) + 1):
            out[s:s + k, s * theta + k - 1] = 1
    return out


def plan_spans(noisy: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Integer counts (positions × theta) of individuals by first position s and rows k (at positions s to
    s + k - 1) whose spans cover each position t with exactly ``rows[t]`` rows: the real-valued plan nearest in
    least squares to ``noisy`` (the same shape, any real values) under that constraint, its spans of two rows
    or more rounded (down, then up where the remainder is at least a half and the rows allow), one-row
    individuals taking the rows left.  Always feasible (one-row individuals alone)."""
    positions, theta = noisy.shape
    rows = np.asarray(rows, dtype=np.int64)
    cover = coverage(positions, theta)
    noisy = np.asarray(noisy, dtype=np.float64)
    # the spans of two rows or more are the unknowns y (>= 0); one-row individuals are what they leave, rows - C y,
    # which must not be negative: least squares of both against the noisy counts
    longer = cover.any(axis=0) & (np.arange(positions * theta) % theta > 0)
    c = cover[:, longer]
    target, singles = noisy.ravel()[longer], noisy[:, 0]

    def loss(y: np.ndarray) -> tuple[float, np.ndarray]:
        left = rows - c @ y - singles
        return float(((y - target) ** 2).sum() + (left ** 2).sum()), 2 * (y - target) - 2 * c.T @ left
    start = np.zeros(int(longer.sum()))
    fitted_longer = minimize(loss, start, jac=True, method="SLSQP", bounds=[(0, None)] * len(start),
                             constraints=[LinearConstraint(c, -np.inf, rows)]).x if len(start) else start
    fitted = np.zeros(positions * theta)
    fitted[longer] = np.clip(fitted_longer, 0, None)
    fitted = fitted.reshape(positions, theta)
    plan = np.floor(fitted).astype(np.int64)
    plan[:, 0] = 0
    left = rows - cover @ plan.ravel()  # rows no longer span covers (flooring only frees rows)
    fraction = (fitted - plan).ravel()
    for flat in np.argsort(-fraction, kind="stable"):  # round up the largest remainders that still fit
        s, k = divmod(int(flat), theta)
        if longer[flat] and fraction[flat] >= 0.5 and (left[s:s + k + 1] > 0).all():
            plan[s, k] += 1
            left[s:s + k + 1] -= 1
    plan[:, 0] = left.astype(np.int64)
    return plan


@dataclass(frozen=True)
class Rows:
    """Synthetic rows as linking reads them: each row's clock position (0 to positions - 1), its key as a
    follower (``key``: rows of one individual agree on what it encodes), ``next_keys(first, t)``: the keys the
    followers at position t + 1 of individuals whose first rows are ``first`` must have (NO_KEY: none may
    follow), for each followed column its codes and the log-scores of its changes: positions × codes ×
    codes, entry [t, a, b] for a row at t with code a followed by a row with code b (e.g. log P(b | a) / P(b): 0
    where the column's change is as likely as a row drawn at random), and for each column of many codes
    followed by whether it stays (``stays``) its codes and positions × codes × 2 log-scores, [t, a, 0] where a
    row at t with code a is followed by the same code, [t, a, 1] by another."""

    position: np.ndarray
    key: np.ndarray
    next_keys: Callable[[np.ndarray, int], np.ndarray]
    follow: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    stays: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    homes: "Homes | None" = None


@dataclass(frozen=True)
class Homes:
    """Each row's home (``code``), the share of individuals at each position that keep their home at the next
    (``stay``, one per position), and ``changes(keys, rows)``: len(keys) × len(rows), how much each row changes
    to take each key (0 where it has it; infinite where it may not take it)."""

    code: np.ndarray
    stay: np.ndarray
    changes: Callable[[np.ndarray, np.ndarray], np.ndarray]


def link(rows: Rows, spans: np.ndarray, rng: np.random.Generator, piece: int = 400) -> np.ndarray:
    """Each row's individual (0, 1, ... in order of first appearance by position), the rows chained position
    by position as ``spans`` (``plan_spans``: individuals by first position and rows) plans, as far as the keys
    allow (module doc).  ``piece``: blocks with more rows on a side are cut into pieces of about this many
    rows alike in the followed columns, each matched alone (an assignment's time grows with the cube of its
    side)."""
    n = len(rows.position)
    positions, theta = spans.shape
    individual = np.full(n, -1, dtype=np.int64)
    first = np.arange(n)  # each row's individual's first row
    left = np.zeros(n, dtype=np.int64)  # rows still planned to follow each row's individual
    at = [rng.permutation(np.flatnonzero(rows.position == t)) for t in range(positions)]
    starts = 0
    for t in range(positions):
        if t > 0:
            planned = int(sum(spans[s, k] for s in range(t) for k in range(t - s, theta)))  # spans over t-1 and t
            members, following = at[t - 1], at[t]
            wanted = rows.next_keys(first[members], t - 1)
            chains = _Chains(members, wanted)
            linked: list[tuple[int, int]] = []
            if rows.homes is not None:
                linked, away = _home_links(rows, chains, following, left, rng, piece)
                done, taken = np.isin(members, [i for i, _ in linked]), np.isin(following, [j for _, j in linked])
                chains, following = _Chains(members[~done], wanted[~done], away), following[~taken]
            linked += _links(rows, chains, following, left, planned - len(linked), rng, piece)
            for i, j in linked:
                individual[j], first[j], left[j] = individual[i], first[i], max(left[i] - 1, 0)
        new = at[t][individual[at[t]] < 0]
        lengths = np.repeat(np.arange(theta), spans[t])  # rows after the first, of each individual starting here
        lengths = rng.permutation(lengths)[:len(new)]
        left[new] = np.r_[lengths, np.zeros(len(new) - len(lengths), dtype=np.int64)]
        individual[new] = starts + np.arange(len(new))
        starts += len(new)
    return individual


class _Chains(NamedTuple):
    """The rows of one position (``members``), the keys their followers must have (``wanted``), and those of
    them whose individuals may go on only in another home (``away``)."""

    members: np.ndarray
    wanted: np.ndarray
    away: np.ndarray | None = None


def _links(rows: Rows, current: _Chains, following: np.ndarray, left: np.ndarray, planned: int,
           rng: np.random.Generator, piece: int) -> list[tuple[int, int]]:
    """(row, next row) links between the rows of one position (``current``) and the rows ``following`` of the
    next: within each block, every individual planned to go on (``left`` > 0) is matched if the block has a row
    for it (one in ``current.away`` only to a row of another home); then, up to ``planned`` links in all, pairs
    of an individual planned to end and a row left over in its block, cheapest first."""
    out: list[tuple[int, int]] = []
    spare: list[tuple[float, int, int]] = []
    members, wanted, away = current
    by_key = _groups(rows.key[following], following)
    for key, chains in _groups(wanted[wanted != NO_KEY], members[wanted != NO_KEY]).items():
        candidates = by_key.get(key)
        if candidates is None:
            continue
        a, b = chains[_by_codes(rows, chains)], candidates[_by_codes(rows, candidates)]
        parts = max(1, -(-max(len(a), len(b)) // piece))
        for pa, pb in zip(np.array_split(a, parts), np.array_split(b, parts)):
            go, stop = pa[left[pa] > 0], pa[left[pa] == 0]
            taken = np.zeros(len(pb), dtype=bool)
            if len(go) and len(pb):
                cost = _costs(rows, go, pb, rng)
                home = np.zeros(cost.shape, dtype=bool)
                if away is not None and rows.homes is not None:
                    home = np.isin(go, away)[:, None] & (rows.homes.code[go][:, None] == rows.homes.code[pb][None, :])
                    cost[home] = cost.max() + np.ptp(cost) + 1  # worse than any link elsewhere; dropped below
                r, c = linear_sum_assignment(cost)
                kept = ~home[r, c]
                out += [(int(go[x]), int(pb[y])) for x, y in zip(r[kept], c[kept])]
                taken[c[kept]] = True
            rest = pb[~taken]
            if len(stop) and len(rest):
                cost = _costs(rows, stop, rest, rng)
                r, c = linear_sum_assignment(cost)
                spare += [(float(cost[x, y]), int(stop[x]), int(rest[y])) for x, y in zip(r, c)]
    more = planned - len(out)
    if more > 0 and spare:
        spare.sort()
        out += [(i, j) for _, i, j in spare[:more]]
    return out


def _home_links(rows: Rows, current: _Chains, following: np.ndarray, left: np.ndarray, rng: np.random.Generator,
                piece: int) -> tuple[list[tuple[int, int]], np.ndarray]:
    """(row, next row) links within homes, and the rows whose individuals are to leave home.  Of the
    individuals planned to go on from each home, the share that stays (rounded at random) is matched to rows of
    the next position in that home, at the followed columns' costs plus ``Homes.changes`` times one more than
    the spread of those costs in the piece (Gumbel noise included), so that of two links for one individual
    the one with fewer key changes wins; a link whose change is infinite is not made.  The others are to leave
    (``_links`` links them elsewhere on equal keys, or not at all).  A home with more rows than ``piece`` on a
    side is cut into pieces of its individuals in order of the keys they need, each matched alone to the rows
    whose keys fall in that piece's range."""
    homes = rows.homes
    assert homes is not None
    members, wanted, _ = current
    going = (left[members] > 0) & (wanted != NO_KEY)
    out: list[tuple[int, int]] = []
    away: list[np.ndarray] = []
    if not going.any() or not len(following):
        return out, np.zeros(0, dtype=np.int64)
    share = float(homes.stay[int(rows.position[members[0]])])
    by_home = _groups(homes.code[following], following)
    for home, chains in _groups(homes.code[members[going]], np.flatnonzero(going)).items():
        candidates = by_home.get(home)
        if candidates is None:
            continue
        staying = int(np.floor(share * len(chains) + rng.random()))
        away.append(members[chains[staying:]])
        chains = chains[:staying]  # indices into members
        a = chains[_by_codes(rows, members[chains], wanted[chains])]
        b = candidates[_by_codes(rows, candidates, rows.key[candidates])]
        parts = max(1, -(-max(len(a), len(b)) // piece))
        pieces = [p for p in np.array_split(a, parts) if len(p)]
        for pa, pb in zip(pieces, np.split(b, _cuts(wanted[a], rows.key[b], [len(p) for p in pieces]))):
            if not len(pb):
                continue
            cost = _costs(rows, members[pa], pb, rng)
            change = homes.changes(wanted[pa], pb)
            allowed = np.isfinite(change)
            change[~allowed] = change[allowed].max(initial=0.0) + 1  # worse than any allowed link; dropped below
            r, c = linear_sum_assignment(cost + change * (1 + np.ptp(cost)))  # key changes first, link by link
            out += [(int(members[pa[x]]), int(pb[y])) for x, y in zip(r, c) if allowed[x, y]]
    return out, np.concatenate(away) if away else np.zeros(0, dtype=np.int64)


def _cuts(needed: np.ndarray, keys: np.ndarray, sizes: list[int]) -> list[int]:
    """Where to cut rows of sorted ``keys`` so that each piece holds the key range of one piece of individuals
    whose sorted ``needed`` keys are cut into ``sizes``: at each cut's key, the rows holding it are split as the
    individuals needing it are."""
    out = []
    for i in np.cumsum(sizes)[:-1]:
        k = needed[i]
        a_lo, a_hi = np.searchsorted(needed, k, "left"), np.searchsorted(needed, k, "right")
        b_lo, b_hi = np.searchsorted(keys, k, "left"), np.searchsorted(keys, k, "right")
        out.append(int(b_lo + round((i - a_lo) / (a_hi - a_lo) * (b_hi - b_lo))))
    return out


def _groups(keys: np.ndarray, members: np.ndarray) -> dict[int, np.ndarray]:
    """``members`` grouped by their ``keys`` (in increasing key order; each group in the members' order)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(ordered) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(ordered)]
    return {int(ordered[s]): members[order[s:e]] for s, e in zip(starts, ends)}


def _by_codes(rows: Rows, members: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
    """The order of ``members`` by ``keys`` (one per member) where given, then by their followed columns' codes
    (those followed by whether they stay first, then the others, each in the given order; ties in the members'
    order), so that a block cut into pieces puts rows alike in those columns in one piece."""
    columns = ([] if keys is None else [keys]) + [codes[members] for codes, _ in rows.stays + rows.follow]
    if not columns:
        return np.arange(len(members))
    return np.lexsort(list(reversed(columns)))


def _costs(rows: Rows, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """|a| × |b|: minus the log-scores of each link's changes in the followed columns, minus Gumbel noise."""
    cost = -rng.gumbel(size=(len(a), len(b)))
    t = int(rows.position[a[0]])  # one position: the rows of a link come from one clock value
    for codes, logp in rows.follow:
        cost -= logp[t][codes[a][:, None], codes[b][None, :]]
    for codes, scores in rows.stays:
        ca = codes[a][:, None]
        cost -= np.where(ca == codes[b][None, :], scores[t, codes[a], 0][:, None], scores[t, codes[a], 1][:, None])
    return cost
