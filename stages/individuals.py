"""Synthetic individuals: the release's rows linked into people who live through the clock (Sprint 2: YEAR).

Where the parameters declare an ``individual`` section (dataloader/individuals.py) with a clock, this stage
measures, inside its own plan node, how many individuals have their rows at each set of clock values
(queries.IndividualPatterns, sensitivity 1; by first clock value and number of rows, queries.IndividualSpans,
where the sets would be over individuals_pattern_cells cells) and, for each followed column, how it changes
between an individual's consecutive rows, per clock value of the first (queries.Transitions: at most
theta - 1 pairs an individual, in distinct cells since the clock is distinct per individual, so
sqrt(theta - 1) in L2; a column with more than individuals_stays_codes codes has only whether it stays
measured).  After every other stage
it links the synthetic rows into individuals along the clock (lib/records/linking.py):

* rows of one individual agree on every stable column, and each advancing column moves by the clock's
  difference (a row follows another only if the moved value falls in its bin; the value is then set to it);
* the clock values of individuals' rows (gaps included) follow the noisy counts, fitted to the synthetic rows
  per clock value;
* a link's cost is minus the log-score of its followed columns' changes under the noisy transitions (shrunk
  by their noise toward "keep the code at the noisy share that stays, else draw the next year's marginal");
* where followed columns are also group columns (PUMA, with groups PUMA × YEAR), they are the individuals'
  home: the noisy share of individuals that keep them is linked first inside its home, to rows needing few
  changes of stable and advancing codes (a stable column that differs counts 1, an advancing one its distance
  in bins; one change outweighs the spread of one link's followed-column costs), never into an edit rule's
  forbidden records, and such a follower takes its individual's codes; the others go on only in another home.
  There the followed columns' costs only break ties between rows of few changes, so homes are matched one after
  another, steered toward the noisy transitions' shares where the links made so far depart from them by more
  than their noise (individuals_steer).
  Rows synthesized per group rarely hold, in one home, a row with exactly the codes a continuing individual
  needs: linked on equal codes alone, individuals would move home far more often than the noisy transitions
  say.  Those changes run one way (an individual of a rare code finds none of it left in its home and takes a
  common one), so where every stable column is categorical, rows that start individuals at the same clock
  value take back the stable codes the followers gave up (``_Balance``).  Homes are off where a stable or
  advancing column is a group column or tied to others by the parameters' structure.

Without homes, linking changes no code: every marginal of the synthetic rows stays as it was.  With homes,
only stable and advancing codes of continuing rows and stable codes of rows that start individuals change
(every group keeps its rows and every other code; the log says how many rows changed).  The values of
advancing and stable numeric columns move to their individual's (within the bin they now hold).
Post-processing but for the two measurements.

A real individual with a gap (rows in 2015 and 2017 only) counts in its own pattern, and the pair 2015 → 2017
counts as a transition from 2015; a synthetic individual planned with that gap is linked 2015 → 2017, its link
costed by the transitions from 2015.  Where the counts are by first clock value and rows, the gap is not seen
and synthetic individuals occupy consecutive clock values.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.individuals import Individual
from dpsyn.lib.estimation.smoothing import toward_zero
from dpsyn.lib.records.constraints import Boxes
from dpsyn.lib.records.linking import NO_KEY, Homes, Rows, consecutive, grouped, link, plan_patterns
from dpsyn.lib.records.marginals import cell_index
from dpsyn.lib.privacy.accounting import gaussian_sigma
from dpsyn.lib.privacy.plan import Node
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import IndividualPatterns, IndividualSpans, Transitions, clock_pattern_count
from dpsyn.lib.privacy.unit import PrivacyUnit
from dpsyn.lib.tuning import T
from dpsyn.stages import Env, Records, Stage

log = logging.getLogger(__name__)

INDIVIDUALS = "individuals"


@dataclass(frozen=True)
class Linking:
    """What linking reads of the parameters (public): the declaration, the clock's codes in time order
    (``ranks``: each code's position) and its values (numbers: advancing columns move by their difference),
    and which followed columns have only whether they stay measured (``stays``)."""

    individual: Individual
    clock: str
    ranks: tuple[int, ...]
    times: tuple[float, ...]
    stays: tuple[str, ...] = ()
    combinations: int = 1  # code combinations of the stable and advancing columns

    @classmethod
    def of(cls, individual: Individual, encoder: Encoder) -> "Linking":
        """The clock's values in increasing order where they are numbers, else in the schema's order (its
        times then 0, 1, ...: only advancing columns read differences, and they need numbers)."""
        assert individual.clock is not None, "rows are linked only along a clock"
        coder = encoder.coder(individual.clock)
        raw = list(coder.column.values or ())
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw)
        values = [float(v) for v in raw] if numbers else [float(i) for i in range(len(raw))]
        order = np.argsort(values, kind="stable")
        ranks = np.empty(len(values), dtype=np.int64)
        ranks[order] = np.arange(len(values))
        stays = tuple(c for c in individual.follow if encoder.coder(c).size > T.individuals_stays_codes)
        keyed = individual.stable + tuple(a for a, _ in individual.advances)
        combinations = math.prod(encoder.coder(c).size for c in keyed)
        return cls(individual, individual.clock, tuple(int(r) for r in ranks), tuple(sorted(values)), stays,
                   combinations)

    def problems(self, unit: PrivacyUnit) -> list[str]:
        """Why rows cannot be linked under ``unit`` (one line each): the clock must stay distinct per individual,
        and the stable and advancing columns' code combinations must fit one 64-bit key."""
        out = [] if self.combinations < 2 ** 62 else [
            f"individual: the stable and advancing columns have {self.combinations} combinations of codes, more "
            f"than 2**62; declare fewer"]
        if unit.separates((self.clock,)):
            return out
        return out + [f"individual: {self.clock} orders an individual's rows, so it must be the one column distinct "
                      f"per individual (distinct_per_individual [\"{self.clock}\"]; --distinct-per-individual gave "
                      f"{', '.join(unit.distinct) or 'none'})"]

    def queries(self, theta: int) -> list:
        """The individuals by the clock values of their rows (by first value and rows where the sets of values
        would be over individuals_pattern_cells cells), then one transitions query per followed column."""
        many = clock_pattern_count(len(self.ranks), theta) > T.individuals_pattern_cells
        counts = IndividualSpans if many else IndividualPatterns
        return [counts(self.clock, self.ranks, theta)] + [
            Transitions(c, self.clock, self.ranks, c in self.stays) for c in self.individual.follow]

    def shares(self) -> list[float]:
        """Each query's share of the node's rho (``queries``' order)."""
        follow = len(self.individual.follow)
        if not follow:
            return [1.0]
        return [T.individuals_spans_share] + [(1 - T.individuals_spans_share) / follow] * follow


class IndividualLinks(Stage):
    """The stage (module doc).  Runs where theta > 1: with one row per individual there is nothing to link."""

    node, timer, reads_individuals = INDIVIDUALS, "linking", True

    def __init__(self, linking: Linking):
        self.linking = linking
        self.measured: list = []

    def active(self, theta: int) -> bool:
        return theta > 1

    def share(self) -> float:
        return T.individuals_share

    def note(self, rho: float, theta: int) -> str:
        return f"rows linked into individuals along {self.linking.clock}"

    def children(self, rho: float, theta: int) -> tuple[Node, ...]:
        out = []
        unit = PrivacyUnit(theta, (self.linking.clock,))  # as every release that links (Linking.problems)
        for query, share in zip(self.linking.queries(theta), self.linking.shares()):
            sigma = gaussian_sigma(query.sensitivity(unit).l2, share * rho)
            out.append(Node(query.describe(), share, f"noise sd {sigma:.3g} per count"))
        return tuple(out)

    def before(self, private: PrivateTable, env: Env) -> None:
        """Privacy cost: the node's rho, split as ``Linking.shares`` says."""
        rho = private.remaining
        self.measured = [private.measure(q, share * rho)
                         for q, share in zip(self.linking.queries(private.theta), self.linking.shares())]

    def after(self, private: PrivateTable, records: Records, env: Env) -> Records:
        encoder = env.encoder
        linking, individual = self.linking, self.linking.individual
        domain = encoder.domain
        ranks = np.asarray(linking.ranks)
        position = ranks[records.codes[:, domain.index(linking.clock)]]
        numeric = [c for c, _ in individual.advances] + [c for c in individual.stable if c in domain.ranges]
        for column in numeric:
            if column not in records.raw:
                records.raw[column] = encoder.coder(column).decode(records.codes[:, domain.index(column)], env.ctx.rng)
        keys = _Keys(records, position, linking, encoder)
        patterns, noisy = _patterns(self.measured[0], ranks)
        plan = plan_patterns(noisy, patterns, np.bincount(position, minlength=len(ranks)))
        follow, conditional, stays = [], [], []
        home = _homes(env, individual)
        stay = np.ones(len(ranks))
        for m in self.measured[1:]:
            codes = records.codes[:, domain.index(m.query.column)]
            changes = Changes(m.noisy[np.argsort(ranks)], m.sigma, domain.sizes[domain.index(m.query.column)])
            if m.query.column in home:  # several home columns: the product of their shares, as if independent
                stay *= [changes.stay_share(t) for t in range(len(ranks))]
            if m.query.stays:
                stays.append((codes, changes.stay_scores(codes, position)))
            else:
                scores, shares, noise = changes.scores(codes, position)
                follow.append((codes, scores))
                conditional.append((shares, noise))
        homes = None
        if home:
            home_code = cell_index(records.codes[:, domain.indices(home)], domain.shape(home))
            # a stable number carries its value (_carry_values): balancing is on only where every stable column
            # is a category
            balance = None if any(c in domain.ranges for c in individual.stable) else \
                _Balance(keys, records.codes, home_code, env.structure.boxes)
            homes = Homes(home_code, stay, _Rewrites(keys, records.codes, env.structure.boxes), balance)
        people = link(Rows(position, keys.key, keys, tuple(follow), tuple(stays), homes, tuple(conditional)), patterns,
                      plan, env.ctx.rng, T.individuals_piece, T.individuals_steer)
        first = _first_rows(people, position)
        codes = _take_keys(records.codes, first, position, keys)
        changed = int(((codes != records.codes).any(axis=1) & ~keys.rekeyed).sum())
        _carry_values(records, first, position, linking, encoder)
        count = int(people.max()) + 1 if len(people) else 0
        log.info("linking: %d synthetic individuals, %.2f rows each", count, len(people) / max(count, 1))
        if home:
            log.info("linking: individuals stay in their %s as the measured share says; %d synthetic rows (%.1f%%) "
                     "took the stable and advancing codes of the individual they continue", " × ".join(home),
                     changed, 100 * changed / max(len(people), 1))
        if homes is not None and homes.balance is not None:
            log.info("linking: %d synthetic rows that start an individual took back stable codes that continuing "
                     "rows of their %s gave up", int(keys.rekeyed.sum()), linking.clock)
        return Records(codes, records.raw, people)


def _patterns(measured, ranks: np.ndarray) -> tuple[tuple[tuple[int, ...], ...], np.ndarray]:
    """The patterns (sorted clock positions) the individuals' noisy counts are by, and the counts: measured by
    the positions of their rows, those of the patterns with a gap shrunk toward none (lib/estimation/smoothing.py
    ``toward_zero``: where no one has gaps, as on Sprint 2, their cells are noise alone and go to nearly
    nothing; where many have, they are kept nearly whole); or, measured by first clock code and rows, as the
    patterns without gaps.  Post-processing."""
    if isinstance(measured.query, IndividualPatterns):
        patterns, noisy = measured.query.patterns(), np.asarray(measured.noisy, dtype=np.float64).copy()
        gaps = np.array([p[-1] - p[0] + 1 > len(p) for p in patterns], dtype=bool)
        noisy[gaps] = toward_zero(noisy[gaps], measured.sigma)[0]
        return patterns, noisy
    noisy = np.zeros(measured.noisy.shape)
    noisy[ranks] = measured.noisy  # rows by position
    patterns = consecutive(*noisy.shape)
    return patterns, np.array([noisy[p[0], len(p) - 1] for p in patterns])


def _homes(env: Env, individual: Individual) -> list[str]:
    """The followed group columns (module doc), or none where a stable or advancing column is a group column
    (a row taking its individual's codes would change group) or the parameters' structure ties one to other
    columns (a derivation, null link or group-level column reads it or sets it): those codes could not be
    rewritten alone (the log says so)."""
    home = [c for c in env.ctx.group_columns if c in individual.follow]
    structure, names = env.structure, env.encoder.domain.names
    keyed = set(individual.stable) | {c for c, _ in individual.advances}
    tied = {names[d.parent] for d in structure.derivations} | {names[d.child] for d in structure.derivations} | {
        names[n.parent] for n in structure.null_links} | {names[n.child] for n in structure.null_links} | {
        c for column, within in structure.group_level for c in (column, *within)} | set(env.ctx.group_columns)
    if home and keyed & tied:
        log.info("linking: individuals may leave their %s: %s is a group column or tied to other columns by the "
                 "parameters' structure, so a continuing row cannot take its individual's codes alone",
                 " × ".join(home), ", ".join(sorted(keyed & tied)))
        return []
    return home


@dataclass(frozen=True)
class _Balance:
    """``Homes.balance`` for the stage.  A follower that takes its individual's stable codes gives up its own: an
    individual of a rare code finds no row of it left in its home and takes a common one, seldom the reverse, and
    over the clock the rare codes would grow.  For each stable column a follower changed, a row that starts an
    individual at the same position and holds the code the follower took takes the code the follower gave up
    (every follower's home first, then any home; not where that would break an edit rule), so that the
    position's counts of each stable column's codes stay as synthesized where such rows exist.  The starting
    row's individual then carries its new codes (``_Keys.rekeyed``, ``_take_keys``).  Post-processing of
    synthetic rows."""

    keys: "_Keys"
    codes: np.ndarray
    home: np.ndarray
    boxes: Boxes

    def __call__(self, needed: np.ndarray, followers: np.ndarray, starting: np.ndarray,
                 rng: np.random.Generator) -> None:
        keys, stable = self.keys, self.keys.columns[:self.keys.moves]
        if not len(stable) or not len(starting):
            return
        took = keys.digits(needed)[:, :len(stable)]
        gave = self.codes[followers][:, stable]
        order = starting[rng.permutation(len(starting))]
        homes = self.home[order].astype(np.int64)
        none = np.zeros(0, dtype=np.int64)
        for c in range(len(stable)):
            changed = rng.permutation(np.flatnonzero(took[:, c] != gave[:, c])).tolist()
            if not len(changed):
                continue
            held, size = keys.stable[c][order], int(keys.sizes[c])
            in_home = grouped(homes * size + held, order)  # home × size + code held -> starting rows, in ``order``
            anywhere = grouped(held, order)                 # code held -> starting rows
            used = np.zeros(len(self.codes), dtype=bool)
            # the rows a follower may take a code from, by (home or -1 for any, code held, code given where edit
            # rules may forbid it)
            pools: dict[tuple[int, int, int], list[int]] = {}
            for here in (True, False):  # every follower's own home first, then any home
                left: list[int] = []
                for f in changed:
                    wanted, code = int(took[f, c]), int(gave[f, c])
                    home = int(self.home[followers[f]]) if here else -1
                    key = (home, wanted, code if self.boxes else -1)
                    if key not in pools:
                        rows = in_home.get(home * size + wanted, none) if here else anywhere.get(wanted, none)
                        pools[key] = (rows[self._allowed(rows, c, code)] if self.boxes else rows).tolist()
                    pool = pools[key]
                    while pool and used[pool[-1]]:
                        pool.pop()
                    if not pool:
                        left.append(f)
                        continue
                    row = pool.pop()
                    used[row] = True
                    keys.stable[c][row] = code
                    keys.rekeyed[row] = True
                changed = left

    def _allowed(self, rows: np.ndarray, c: int, code: int) -> np.ndarray:
        """Which of ``rows`` keep every edit rule with their stable codes as they now are and stable column ``c``
        set to ``code``."""
        if not self.boxes or not len(rows):
            return np.ones(len(rows), dtype=bool)
        keys = self.keys
        codes = self.codes[rows].copy()
        for k, column in enumerate(keys.columns[:keys.moves]):
            codes[:, column] = keys.stable[k][rows]
        codes[:, keys.columns[c]] = code
        return ~np.asarray(self.boxes.forbidden(codes), dtype=bool)


@dataclass(frozen=True)
class _Rewrites:
    """``Homes.changes`` for the stage: how far each row's stable and advancing codes are from each wanted key
    (``_Keys.changes``), infinite where the row with those codes would break an edit rule."""

    keys: "_Keys"
    codes: np.ndarray
    boxes: Boxes

    def __call__(self, wanted: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = self.keys.changes(wanted, self.keys.key[rows])
        if self.boxes:
            taken = np.repeat(self.codes[rows][None, :, :], len(wanted), axis=0)
            taken[:, :, self.keys.columns] = self.keys.digits(wanted)[:, None, :]
            out[self.boxes.forbidden(taken.reshape(-1, self.codes.shape[1])).reshape(out.shape)] = np.inf
        return out


class _Keys:
    """Which rows may follow which: a row's key is its stable codes and its advancing codes; the follower at
    position t + 1 of an individual whose first row is f must have f's stable codes and the codes of f's
    advancing values moved by the clock's difference from f's position to t + 1 (NO_KEY past the last
    position, or where a moved value passes its column's range).  Codes are combined into one number per row
    (mixed radix over the columns' sizes, the first column the least significant: ``cell_index`` of the columns
    in reverse, which Linking.problems keeps below 2**62)."""

    def __init__(self, records: Records, position: np.ndarray, linking: Linking, encoder: Encoder):
        domain = encoder.domain
        self.position, self.times = position, np.asarray(linking.times)
        stable, advances = list(linking.individual.stable), [c for c, _ in linking.individual.advances]
        self.stable = [records.codes[:, domain.index(c)].astype(np.int64) for c in stable]
        self.advancing = [(encoder.coder(c), records.raw[c]) for c in advances]
        self.columns = np.asarray([domain.index(c) for c in stable + advances], dtype=np.int64)
        self.sizes = np.asarray([domain.sizes[j] for j in self.columns], dtype=np.int64)
        self.key = self._combined(records.codes[:, self.columns])
        self.moves = len(stable)  # digits from here on are advancing columns' (ordered bins)
        self.rekeyed = np.zeros(len(position), dtype=bool)  # rows starting an individual given other stable codes

    def __call__(self, first: np.ndarray, t: int) -> np.ndarray:
        if t + 1 >= len(self.times):
            return np.full(len(first), NO_KEY, dtype=np.int64)
        parts, gone = [s[first] for s in self.stable], np.zeros(len(first), dtype=bool)
        for coder, raw in self.advancing:
            moved = raw[first] + (self.times[t + 1] - self.times[self.position[first]])
            gone |= moved > coder.column.high
            parts.append(coder.encode(coder.snap(moved)).astype(np.int64))  # on the column's grid, as carried
        codes = np.column_stack(parts) if parts else np.zeros((len(first), 0), dtype=np.int64)
        return np.where(gone, NO_KEY, self._combined(codes))

    def _combined(self, codes: np.ndarray) -> np.ndarray:
        """One key per row of ``codes`` (rows × the key's columns)."""
        return cell_index(codes[:, ::-1], tuple(self.sizes[::-1]))

    def digits(self, keys: np.ndarray) -> np.ndarray:
        """len(keys) × columns: the codes a key combines (stable columns, then advancing ones)."""
        if not len(self.sizes):
            return np.zeros((len(keys), 0), dtype=np.int64)
        return np.column_stack(np.unravel_index(keys, tuple(self.sizes[::-1]))[::-1])

    def changes(self, wanted: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """|wanted| × |keys|: how far a row of each key is from each wanted key: 1 for each stable column that
        differs, and the distance in bins of each advancing column."""
        wanted, at_wanted = np.unique(wanted, return_inverse=True)  # worked out once per distinct key
        keys, at_keys = np.unique(keys, return_inverse=True)
        a, b = self.digits(wanted), self.digits(keys)
        out = np.zeros((len(wanted), len(keys)))
        for j in range(len(self.sizes)):
            gap = np.abs(a[:, j][:, None] - b[:, j][None, :])
            out += gap if j >= self.moves else gap > 0
        return out[np.ix_(at_wanted, at_keys)]


@dataclass(frozen=True)
class Changes:
    """A followed column's noisy transitions in time order (positions × codes × codes, or positions × 2 where
    only whether it stays was measured), their noise sd and the column's number of codes.  Scores a change
    a → b of a row at position t by log P(b | a) / P(b), P(b) the next position's synthetic 1-way marginal
    (0: as likely as a row drawn at random).  Negative counts count as 0.  The share of pairs that keep their
    code, s, is the noisy table's (its diagonal over its total, or its (stays, moves) counts); the prior of a
    row is "keep the code with probability s, else draw from P"; with the whole table each row is its counts
    plus that prior weighted by the row's noise (sigma times the square root of its cells)."""

    noisy: np.ndarray
    sigma: float
    codes: int

    def stay_share(self, t: int) -> float:
        """The share of pairs starting at position t that keep their code, from the noisy table's sums (not its
        counts clipped at 0, whose noise would count as moves), within [0, 1)."""
        counts = self.noisy[t]
        kept = counts[0] if counts.ndim == 1 else np.trace(counts)
        return float(np.clip(kept / max(counts.sum(), 1.0), 0.0, 1 - 1e-6))

    def _prior(self, t: int, codes: np.ndarray, position: np.ndarray) -> tuple[float, np.ndarray]:
        """(s, P) at position t: the share that stays (of the counts clipped at 0) and the next position's 1-way
        marginal."""
        q = np.bincount(codes[position == t + 1], minlength=self.codes) + 1.0
        counts = np.clip(self.noisy[t], 0, None)
        kept = counts[0] if counts.ndim == 1 else np.trace(counts)
        return min(kept / max(counts.sum(), 1.0), 1 - 1e-6), q / q.sum()

    def scores(self, codes: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """From the whole noisy table: positions × codes × codes, the score of each change; the same, the table's own
        shares of each change a → b among the changes from a (counts clipped at 0 over their row's sum: what linking
        steers toward; without the prior, which at small budgets is most of the scores and says nothing of who
        changes); positions × codes, the noise sd of each row's shares (sigma over the row's sum; 1, steering
        nothing, where the row is all zeros and from the last position, which starts no pair)."""
        k, positions = self.codes, len(self.noisy)
        out, shares, noise = np.zeros((positions, k, k)), np.full((positions, k, k), 1 / k), np.ones((positions, k))
        for t in range(positions - 1):
            stay, q = self._prior(t, codes, position)
            prior = (1 - stay) * np.tile(q, (k, 1))
            prior[np.arange(k), np.arange(k)] += stay
            counts, weight = np.clip(self.noisy[t], 0, None), self.sigma * math.sqrt(k)
            n = counts.sum(axis=1)
            p = (counts + weight * prior) / (n[:, None] + weight)
            out[t] = np.log(np.clip(p, 1e-12, None)) - np.log(q)[None, :]
            shares[t][n > 0] = counts[n > 0] / n[n > 0, None]
            noise[t][n > 0] = self.sigma / n[n > 0]
        return out, shares, noise

    def stay_scores(self, codes: np.ndarray, position: np.ndarray) -> np.ndarray:
        """positions × codes × 2: the score of keeping code a (0) or changing it (1), from the prior alone."""
        out = np.zeros((len(self.noisy), self.codes, 2))
        for t in range(len(self.noisy) - 1):
            stay, q = self._prior(t, codes, position)
            out[t, :, 0] = np.log((1 - stay) * q + stay) - np.log(q)
            out[t, :, 1] = math.log(1 - stay)
        return out


def _first_rows(people: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Each row's individual's first row (by position)."""
    if not len(people):
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((position, people))
    starts = np.r_[0, np.flatnonzero(np.diff(people[order])) + 1]
    first = np.empty(len(people), dtype=np.int64)
    first[order] = np.repeat(order[starts], np.diff(np.r_[starts, len(order)]))
    return first


def _take_keys(codes: np.ndarray, first: np.ndarray, position: np.ndarray, keys: _Keys) -> np.ndarray:
    """``codes`` with each continuing row's stable and advancing codes those its individual needs at its
    position (``keys``: its first row's stable codes and moved advancing values), and each first row's stable
    codes those ``_Balance`` gave it; unchanged where they already are (always, where rows were linked on equal
    keys alone)."""
    out = codes.copy()
    given = np.flatnonzero(keys.rekeyed)
    for c in range(keys.moves):
        out[given, keys.columns[c]] = keys.stable[c][given]
    for t in range(1, int(position.max()) + 1 if len(position) else 0):
        rows = np.flatnonzero((position == t) & (first != np.arange(len(first))))
        wanted = keys(first[rows], t - 1)
        assert (wanted != NO_KEY).all(), "a row follows only an individual that may go on"
        out[np.ix_(rows, keys.columns)] = keys.digits(wanted).astype(codes.dtype)
    return out


def _carry_values(records: Records, first: np.ndarray, position: np.ndarray, linking: Linking,
                  encoder: Encoder) -> None:
    """Sets each row's advancing values to its individual's first row's moved by the clock's difference between
    them, and its stable numeric values to the first row's: the very values whose codes the row holds
    (``_Keys``, ``_take_keys``)."""
    columns = [(c, True) for c, _ in linking.individual.advances] + [
        (c, False) for c in linking.individual.stable if c in records.raw]
    if not columns or not len(first):
        return
    times = np.asarray(linking.times)
    for column, advances in columns:
        values = records.raw[column]
        coder = encoder.coder(column)
        moved = coder.snap(values[first] + (times[position] - times[position[first]])) if advances else values[first]
        records.raw[column] = np.where(first == np.arange(len(first)), values, moved)
