"""Linking synthetic rows into individuals: rows of clock positions (years) chained so that the number of
individuals by pattern (the positions of their rows: consecutive, or with gaps) follows a planned table, only
rows that may belong to one individual are linked, and each link's cost (how unlikely its changes are) is small.

Everything here is post-processing of synthetic rows and released (noisy) answers: nothing reads private data.

* ``plan_patterns``: integer counts of individuals by pattern, rounded from the least-squares fit to noisy
  counts that covers every position's rows exactly (one-row individuals take what is left); ``consecutive``
  lists the patterns without gaps, for counts measured by first position and number of rows;
* ``link``: position by position, the individuals planned to have their next row there (from the last
  position, or across a gap) are matched to that position's rows of their own block (equal keys: what must
  agree between two rows of one individual) by a min-cost assignment whose costs are perturbed by Gumbel
  noise (so that links are drawn, not always the likeliest); blocks with many rows are cut into pieces of
  rows alike in the followed columns, matched alone; where a block has no row for a planned link, an
  individual of another block that was planned to end goes on instead, so each position keeps its planned
  number of links where the blocks allow it.
* where rows have homes (``Homes``: e.g. the area of a table synthesized per area and year), the share of
  individuals that stays home is matched first to the next position's rows of the same home, whatever their
  keys, at a cost in which one key change outweighs the spread of a piece's followed-column costs; such a
  follower then takes the key its individual needs (the caller rewrites it); the rest may go on only in
  another home.  Rows synthesized per home and year rarely hold, in one home, a row with exactly the key a
  continuing individual needs; without homes, individuals would move home to keep their keys.  Those key changes
  run one way (an individual of a rare key finds no row of it left in its home and takes a common one, seldom the
  reverse), so where the caller can, it gives rows that start individuals at that position parts of the keys
  the followers gave up (``Homes.balance``; the stage: their stable codes, column by column), so that a
  position's rows keep those codes' counts where such rows exist.  Inside a home the key changes outweigh the
  followed columns' costs, which then only break ties, and every home's assignment would lean the same way (the
  changes its few rows of the needed keys happen to offer); where the caller gives each followed column's
  conditional shares (``Rows.conditional``), a position's home assignments are steered toward them one after
  another, the homes in a random order (``_Steering``): changes the earlier homes made too often cost more in
  the next ones and those made too seldom less, by as much of the gap as exceeds the shares' noise.  Outside
  homes the followed columns' costs decide each block's links and are not steered (a block's changes differ from
  the pooled shares for reasons the shares do not see).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
from scipy.optimize import LinearConstraint, linear_sum_assignment, minimize

NO_KEY = -1  # a row whose individual cannot go on (no row could follow it)


def consecutive(positions: int, theta: int) -> tuple[tuple[int, ...], ...]:
    """The patterns of individuals without gaps: first position s and k rows (1 to ``theta``) at s to s + k - 1,
    in the order s * theta + k - 1, the spans past the last position left out."""
    return tuple(tuple(range(s, s + k)) for s in range(positions) for k in range(1, theta + 1) if s + k <= positions)


def coverage(patterns, positions: int) -> np.ndarray:
    """positions × patterns 0/1 matrix: which positions each pattern (sorted positions) covers."""
    out = np.zeros((positions, len(patterns)))
    for i, pattern in enumerate(patterns):
        out[list(pattern), i] = 1
    return out


def plan_patterns(noisy: np.ndarray, patterns, rows: np.ndarray) -> np.ndarray:
    """Integer counts of individuals by pattern (``patterns``: the sorted positions of an individual's rows, every
    one-position pattern among them) that cover each position t with exactly ``rows[t]`` rows: the real-valued
    plan nearest in least squares to ``noisy`` (one real value a pattern) under that constraint, its patterns of
    two rows or more rounded (down, then up where the remainder is at least a half and the rows allow),
    one-row individuals taking the rows left.  Always feasible (one-row individuals alone)."""
    positions = len(rows)
    rows = np.asarray(rows, dtype=np.int64)
    cover = coverage(patterns, positions)
    noisy = np.asarray(noisy, dtype=np.float64)
    single = {p[0]: i for i, p in enumerate(patterns) if len(p) == 1}
    singles = noisy[[single[t] for t in range(positions)]]
    # the patterns of two rows or more are the unknowns y (>= 0); one-row individuals are what they leave,
    # rows - C y, which must not be negative: least squares of both against the noisy counts
    longer = np.array([len(p) > 1 for p in patterns], dtype=bool)
    c = cover[:, longer]
    target = noisy[longer]

    def loss(y: np.ndarray) -> tuple[float, np.ndarray]:
        left = rows - c @ y - singles
        return float(((y - target) ** 2).sum() + (left ** 2).sum()), 2 * (y - target) - 2 * c.T @ left
    start = np.zeros(int(longer.sum()))
    fitted_longer = minimize(loss, start, jac=True, method="SLSQP", bounds=[(0, None)] * len(start),
                             constraints=[LinearConstraint(c, -np.inf, rows)]).x if len(start) else start
    fitted = np.zeros(len(patterns))
    fitted[longer] = np.clip(fitted_longer, 0, None)
    plan = np.floor(fitted).astype(np.int64)
    left = rows - cover @ plan  # rows no longer pattern covers (flooring only frees rows)
    fraction = fitted - plan
    for i in np.argsort(-fraction, kind="stable"):  # round up the largest remainders that still fit
        at = list(patterns[i])
        if longer[i] and fraction[i] >= 0.5 and (left[at] > 0).all():
            plan[i] += 1
            left[at] -= 1
    for t, i in single.items():
        plan[i] = int(left[t])
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
    row at t with code a is followed by the same code, [t, a, 1] by another.  ``conditional``, where given: for
    each followed column, positions × codes × codes, the share of an individual's rows at t with code a whose next
    row has code b (each [t, a] sums to 1), toward which ``link`` steers the links it makes, and positions × codes,
    the noise sd of each [t, a]'s entries."""

    position: np.ndarray
    key: np.ndarray
    next_keys: Callable[[np.ndarray, int], np.ndarray]
    follow: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    stays: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    homes: "Homes | None" = None
    conditional: tuple[tuple[np.ndarray, np.ndarray], ...] = ()


@dataclass(frozen=True)
class Homes:
    """Each row's home (``code``), the share of individuals at each position that keep their home at the next
    (``stay``, one per position), ``changes(keys, rows)``: len(keys) × len(rows), how much each row changes
    to take each key (0 where it has it; infinite where it may not take it), and, where given,
    ``balance(needed, followers, starting, rng)``: called at each position after its links with the keys its
    followers need, the followers and the rows that start individuals there; it may change what starting rows
    hold (the caller's keys: ``Rows.next_keys`` then reads them) to give back what the followers' changes
    took from the position."""

    code: np.ndarray
    stay: np.ndarray
    changes: Callable[[np.ndarray, np.ndarray], np.ndarray]
    balance: Callable[[np.ndarray, np.ndarray, np.ndarray, np.random.Generator], None] | None = None


def link(rows: Rows, patterns, counts: np.ndarray, rng: np.random.Generator, piece: int = 400,
         steer: float = 0.0) -> np.ndarray:
    """Each row's individual (0, 1, ... in order of first appearance by position), the rows chained position
    by position as ``counts`` (``plan_patterns``: individuals by ``patterns``, the sorted positions of their rows)
    plans, as far as the keys allow (module doc): an individual whose next planned row is at t (after a gap or
    not) is matched to a row at t.  ``piece``: blocks with more rows on a side are cut into pieces of about this
    many rows alike in the followed columns, each matched alone (an assignment's time grows with the cube of its
    side).  ``steer``: how hard each position's later home assignments make up for the changes its earlier ones
    made too often or too seldom against ``rows.conditional`` (``_Steering``; 0: not at all)."""
    n = len(rows.position)
    positions = int(rows.position.max()) + 1 if n else 0
    individual = np.full(n, -1, dtype=np.int64)
    first = np.arange(n)  # each row's individual's first row
    # each row's individual's planned pattern, and the position its next row is planned at: -1 none (it ends
    # there, or its planned link could not be made), -2 the row has been followed
    pattern = np.full(n, -1, dtype=np.int64)
    next_at = np.full(n, -1, dtype=np.int64)
    # after[i, t]: the position after t in pattern i (-1: none, or t not in it)
    after = np.full((len(patterns), max([positions] + [p[-1] + 1 for p in patterns])), -1, dtype=np.int64)
    for i, p in enumerate(patterns):
        after[i, list(p[:-1])] = p[1:]
    single = {p[0]: i for i, p in enumerate(patterns) if len(p) == 1}
    at = [rng.permutation(np.flatnonzero(rows.position == t)) for t in range(positions)]
    starts = 0
    needs = np.full(n, NO_KEY, dtype=np.int64)  # the key each chain's follower must have at this position
    for t in range(positions):
        linked: list[tuple[int, int]] = []
        if t > 0:
            planned = int(sum(c for p, c in zip(patterns, counts) if t in p and p[0] < t))  # individuals going on at t
            # chains planned to go on at t (from any earlier position), then those planned to end at t - 1
            members = np.concatenate([a[(next_at[a] == t) | ((s == t - 1) & (next_at[a] == -1))]
                                      for s, a in enumerate(at[:t])])
            going = next_at == t
            following = at[t]
            wanted = rows.next_keys(first[members], t - 1)
            needs[members] = wanted
            chains = _Chains(members, wanted)
            if rows.homes is not None:
                linked, away = _home_links(rows, chains, following, going, rng, piece, _Steering(rows, steer))
                done, taken = np.isin(members, [i for i, _ in linked]), np.isin(following, [j for _, j in linked])
                chains, following = _Chains(members[~done], wanted[~done], away), following[~taken]
            linked += _links(rows, chains, following, going, planned - len(linked), rng, piece)
            for i, j in linked:
                individual[j], first[j], pattern[j] = individual[i], first[i], pattern[i]
                next_at[j] = after[pattern[i], t] if going[i] else -1
                next_at[i] = -2
            next_at[going & (next_at == t)] = -1  # planned links no row could take: those individuals end
        new = at[t][individual[at[t]] < 0]
        if linked and rows.homes is not None and rows.homes.balance is not None:
            rows.homes.balance(needs[[i for i, _ in linked]], np.array([j for _, j in linked], dtype=np.int64), new,
                               rng)
        here = [i for i, p in enumerate(patterns) if p[0] == t]
        drawn = rng.permutation(np.repeat(np.asarray(here, dtype=np.int64), counts[here]))[:len(new)]
        pattern[new] = np.r_[drawn, np.full(len(new) - len(drawn), single[t], dtype=np.int64)]
        next_at[new] = after[pattern[new], t]
        individual[new] = starts + np.arange(len(new))
        starts += len(new)
    return individual


class _Chains(NamedTuple):
    """The rows of one position (``members``), the keys their followers must have (``wanted``), and those of
    them whose individuals may go on only in another home (``away``)."""

    members: np.ndarray
    wanted: np.ndarray
    away: np.ndarray | None = None


class _Steering:
    """The followed columns' log-scores (``follow``, what ``_costs`` reads) for one position's home assignments,
    steered toward ``Rows.conditional``: ``made`` tallies the links made so far by their chain's position and codes
    (a → b); for each code a, the gap between its tally times P(b | a) and ``made`` is kept only as far as it
    exceeds P's noise (shrunk by the positive-part James-Stein factor 1 - codes × (tally × noise)² / Σ_b gap², one
    factor for each a), ``due`` = ``made`` plus the kept gap, and after each assignment every score is the rows'
    own minus ``step`` × log((made + 1) / (due + 1)), so changes made too often so far cost more in the next
    assignments and those made too seldom less.  A chain after a gap is tallied and steered at its last row's
    position, as ``_costs`` scores it.  Without conditionals or with step 0, the rows' own scores."""

    def __init__(self, rows: Rows, step: float):
        self.rows, self.step = rows, step if rows.conditional else 0.0
        self.follow = tuple((codes, logp.copy()) for codes, logp in rows.follow) if self.step else rows.follow
        self.made = [np.zeros(logp.shape) for _, logp in rows.follow] if self.step else []

    def tally(self, a: np.ndarray, b: np.ndarray) -> None:
        """Count the links (a[i], b[i]) just made and steer the scores of the positions they start from."""
        if not self.step or not len(a):
            return
        t = self.rows.position[a]
        for (codes, logp), (conditional, noise), made, (_, steered) in zip(
                self.rows.follow, self.rows.conditional, self.made, self.follow, strict=True):
            np.add.at(made, (t, codes[a], codes[b]), 1)
            for s in np.unique(t):
                tally = made[s].sum(axis=1, keepdims=True)
                gap = tally * conditional[s] - made[s]
                energy = (gap ** 2).sum(axis=1, keepdims=True)  # against its noise's: codes × (tally × noise)²
                with np.errstate(divide="ignore", invalid="ignore"):
                    kept = np.where(energy > 0, np.clip(1 - gap.shape[1] * (tally * noise[s][:, None]) ** 2 / energy,
                                                        0, 1), 0.0)
                steered[s] = logp[s] - self.step * np.log((made[s] + 1) / (made[s] + gap * kept + 1))


def _links(rows: Rows, current: _Chains, following: np.ndarray, going: np.ndarray, planned: int,
           rng: np.random.Generator, piece: int) -> list[tuple[int, int]]:
    """(row, next row) links between the chains' last rows (``current``) and the rows ``following`` of the
    next position: within each block, every individual planned to go on (``going``) is matched if the block has a row
    for it (one in ``current.away`` only to a row of another home); then, up to ``planned`` links in all, pairs
    of an individual planned to end and a row left over in its block, cheapest first."""
    out: list[tuple[int, int]] = []
    spare: list[tuple[float, int, int]] = []
    members, wanted, away = current
    by_key = grouped(rows.key[following], following)
    for key, chains in grouped(wanted[wanted != NO_KEY], members[wanted != NO_KEY]).items():
        candidates = by_key.get(key)
        if candidates is None:
            continue
        a, b = chains[_by_codes(rows, chains)], candidates[_by_codes(rows, candidates)]
        parts = max(1, -(-max(len(a), len(b)) // piece))
        for pa, pb in zip(np.array_split(a, parts), np.array_split(b, parts)):
            go, stop = pa[going[pa]], pa[~going[pa]]
            taken = np.zeros(len(pb), dtype=bool)
            if len(go) and len(pb):
                cost = _costs(rows, go, pb, rng, rows.follow)
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
                cost = _costs(rows, stop, rest, rng, rows.follow)
                r, c = linear_sum_assignment(cost)
                spare += [(float(cost[x, y]), int(stop[x]), int(rest[y])) for x, y in zip(r, c)]
    more = planned - len(out)
    if more > 0 and spare:
        spare.sort()
        out += [(i, j) for _, i, j in spare[:more]]
    return out


def _home_links(rows: Rows, current: _Chains, following: np.ndarray, going: np.ndarray, rng: np.random.Generator,
                piece: int, steering: _Steering) -> tuple[list[tuple[int, int]], np.ndarray]:
    """(row, next row) links within homes, and the rows whose individuals are to leave home.  Of the
    individuals planned to go on from each home, the share that stays (rounded at random) is matched to rows of
    the next position in that home, at the followed columns' costs plus ``Homes.changes`` times one more than
    the spread of those costs in the piece (Gumbel noise included), so that of two links for one individual
    the one with fewer key changes wins; a link whose change is infinite is not made.  The others are to leave
    (``_links`` links them elsewhere on equal keys, or not at all).  A home with more rows than ``piece`` on a
    side is cut into pieces of its individuals in order of the keys they need, each matched alone to the rows
    whose keys fall in that piece's range.  Costs are read from ``steering``, which tallies each assignment's
    links."""
    homes = rows.homes
    assert homes is not None
    members, wanted, _ = current
    goes = going[members] & (wanted != NO_KEY)
    out: list[tuple[int, int]] = []
    away: list[np.ndarray] = []
    if not goes.any() or not len(following):
        return out, np.zeros(0, dtype=np.int64)
    by_home = grouped(homes.code[following], following)
    leaving = list(grouped(homes.code[members[goes]], np.flatnonzero(goes)).items())
    if steering.step:  # homes in a random order, so that the later ones, which the steering moves most, are any
        leaving = [leaving[i] for i in rng.permutation(len(leaving))]
    for home, chains in leaving:
        candidates = by_home.get(home)
        if candidates is None:
            continue
        share = float(homes.stay[rows.position[members[chains]]].mean())  # each from its own position
        if np.ptp(rows.position[members[chains]]) > 0:  # chains after a gap come first in members: stay at random
            chains = chains[rng.permutation(len(chains))]
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
            cost = _costs(rows, members[pa], pb, rng, steering.follow)
            change = homes.changes(wanted[pa], pb)
            allowed = np.isfinite(change)
            change[~allowed] = change[allowed].max(initial=0.0) + 1  # worse than any allowed link; dropped below
            r, c = linear_sum_assignment(cost + change * (1 + np.ptp(cost)))  # key changes first, link by link
            kept = allowed[r, c]
            chain, follower = members[pa[r[kept]]], pb[c[kept]]
            out += list(zip(chain.tolist(), follower.tolist()))
            steering.tally(chain, follower)
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


def grouped(keys: np.ndarray, members: np.ndarray) -> dict[int, np.ndarray]:
    """``members`` grouped by their ``keys`` (in increasing key order; each group in the members' order), one
    sort for all the groups."""
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


def _costs(rows: Rows, a: np.ndarray, b: np.ndarray, rng: np.random.Generator,
           follow: tuple[tuple[np.ndarray, np.ndarray], ...]) -> np.ndarray:
    """|a| × |b|: minus the log-scores of each link's changes in the followed columns (``follow``: the rows' own or
    steered ones), minus Gumbel noise."""
    cost = np.log(-np.log(_open_uniform(rng, (len(a), len(b)))))  # minus standard Gumbel draws
    t = rows.position[a]  # each chain's last row's position (after a gap, earlier than the others')
    for codes, logp in follow:
        cost -= logp[t, codes[a]][:, codes[b]]  # each chain's row of scores, then the followers' codes in it
    for codes, scores in rows.stays:
        ca, own = codes[a], scores[t, codes[a]]  # each chain's (keep, change) scores
        cost -= np.where(ca[:, None] == codes[b][None, :], own[:, :1], own[:, 1:])
    return cost


def _open_uniform(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Uniform draws on (0, 1): 1 minus ``rng.random``, a draw of 0 (a 1 here) drawn again, as numpy's own Gumbel
    sampler takes them (its scalar loop is about three times slower than these logs over the whole array)."""
    u = 1.0 - rng.random(shape)
    while (ones := u == 1.0).any():
        u[ones] = 1.0 - rng.random(int(ones.sum()))
    return u
