"""Synthetic individuals: the release's rows linked into people who live through the clock (Sprint 2: YEAR).

Where the parameters declare an ``individual`` section (dataloader/individuals.py) with a clock, this stage
measures, inside its own plan node, how many individuals start at each clock value with each number of rows
(queries.IndividualSpans, sensitivity 1) and, for each followed column, how it changes between an
individual's consecutive rows, per clock value of the first (queries.Transitions: at most theta - 1 pairs an
individual, in distinct cells since the clock is distinct per individual, so sqrt(theta - 1) in L2; a column
with more than individuals_stays_codes codes has only whether it stays measured).  After every other stage
it links the synthetic rows of consecutive clock values into individuals (lib/records/linking.py):

* rows of one individual agree on every stable column, and each advancing column moves by the clock's
  difference (a row follows another only if the moved value falls in its bin; the value is then set to it);
* rows per individual and first clock values follow the noisy counts, fitted to the synthetic rows per clock
  value;
* a link's cost is minus the log-score of its followed columns' changes under the noisy transitions (shrunk
  by their noise toward "keep the code at the noisy share that stays, else draw the next year's marginal").

Linking changes no code: every marginal of the synthetic rows stays as it was; the values of advancing and
stable numeric columns move within their bins.  Post-processing but for the two measurements.

Synthetic individuals occupy consecutive clock values.  A real individual with a gap (rows in 2015 and 2017
only) is measured as it is: its rows count in its span, and the pair 2015 → 2017 counts as a transition from
2015; its synthetic counterpart is linked 2015 → 2016 instead.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.individuals import Individual
from dpsyn.lib.records.linking import NO_KEY, Rows, link, plan_spans
from dpsyn.lib.privacy.accounting import gaussian_sigma
from dpsyn.lib.privacy.plan import Node
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import IndividualSpans, Transitions
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
        """The spans, then one transitions query per followed column."""
        return [IndividualSpans(self.clock, self.ranks, theta)] + [
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
        spans = self.measured[0]
        noisy = np.zeros(spans.noisy.shape)
        noisy[ranks] = spans.noisy
        plan = plan_spans(noisy, np.bincount(position, minlength=len(ranks)))
        follow, stays = [], []
        for m in self.measured[1:]:
            codes = records.codes[:, domain.index(m.query.column)]
            changes = Changes(m.noisy[np.argsort(ranks)], m.sigma, domain.sizes[domain.index(m.query.column)])
            if m.query.stays:
                stays.append((codes, changes.stay_scores(codes, position)))
            else:
                follow.append((codes, changes.scores(codes, position)))
        people = link(Rows(position, keys.key, keys, tuple(follow), tuple(stays)), plan, env.ctx.rng,
                      T.individuals_piece)
        _carry_values(records, people, position, linking, encoder)
        count = int(people.max()) + 1 if len(people) else 0
        log.info("linking: %d synthetic individuals, %.2f rows each", count, len(people) / max(count, 1))
        return Records(records.codes, records.raw, people)


class _Keys:
    """Which rows may follow which: a row's key is its stable codes and its advancing codes; the follower at
    position t + 1 of an individual whose first row is f must have f's stable codes and the codes of f's
    advancing values moved by the clock's difference from f's position to t + 1 (NO_KEY past the last
    position, or where a moved value passes its column's range, or where no row has that key).  Codes are
    combined into one number per row (mixed radix over the columns' sizes), numbered by ``np.unique``."""

    def __init__(self, records: Records, position: np.ndarray, linking: Linking, encoder: Encoder):
        domain = encoder.domain
        self.position, self.times = position, np.asarray(linking.times)
        stable, advances = list(linking.individual.stable), [c for c, _ in linking.individual.advances]
        self.stable = [records.codes[:, domain.index(c)].astype(np.int64) for c in stable]
        self.advancing = [(encoder.coder(c), records.raw[c]) for c in advances]
        self.radix = np.cumprod([1] + [domain.sizes[domain.index(c)] for c in stable + advances])  # < 2**62: problems
        mine = self._combined(self.stable + [records.codes[:, domain.index(c)].astype(np.int64) for c in advances],
                              len(position))
        self.known, key = np.unique(mine, return_inverse=True)
        self.key = key.astype(np.int64)

    def _combined(self, columns: list[np.ndarray], n: int) -> np.ndarray:
        """One number per row for its codes in ``columns`` (mixed radix; 0 for every row without columns)."""
        out = np.zeros(n, dtype=np.int64)
        for codes, weight in zip(columns, self.radix):
            out += codes * int(weight)
        return out

    def __call__(self, first: np.ndarray, t: int) -> np.ndarray:
        if t + 1 >= len(self.times):
            return np.full(len(first), NO_KEY, dtype=np.int64)
        parts, gone = [s[first] for s in self.stable], np.zeros(len(first), dtype=bool)
        for coder, raw in self.advancing:
            moved = raw[first] + (self.times[t + 1] - self.times[self.position[first]])
            gone |= moved > coder.column.high
            parts.append(coder.encode(coder.snap(moved)).astype(np.int64))  # on the column's grid, as carried
        wanted = self._combined(parts, len(first))
        at = np.minimum(np.searchsorted(self.known, wanted), len(self.known) - 1)
        return np.where(gone | (self.known[at] != wanted), NO_KEY, at)


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

    def _prior(self, t: int, codes: np.ndarray, position: np.ndarray) -> tuple[float, np.ndarray]:
        """(s, P) at position t: the share that stays and the next position's 1-way marginal."""
        q = np.bincount(codes[position == t + 1], minlength=self.codes) + 1.0
        counts = np.clip(self.noisy[t], 0, None)
        kept = counts[0] if counts.ndim == 1 else np.trace(counts)
        return min(kept / max(counts.sum(), 1.0), 1 - 1e-6), q / q.sum()

    def scores(self, codes: np.ndarray, position: np.ndarray) -> np.ndarray:
        """positions × codes × codes: the score of each change, from the whole noisy table."""
        k, positions = self.codes, len(self.noisy)
        out = np.zeros((positions, k, k))
        for t in range(positions - 1):
            stay, q = self._prior(t, codes, position)
            prior = (1 - stay) * np.tile(q, (k, 1))
            prior[np.arange(k), np.arange(k)] += stay
            counts, weight = np.clip(self.noisy[t], 0, None), self.sigma * math.sqrt(k)
            p = (counts + weight * prior) / (counts.sum(axis=1, keepdims=True) + weight)
            out[t] = np.log(np.clip(p, 1e-12, None)) - np.log(q)[None, :]
        return out

    def stay_scores(self, codes: np.ndarray, position: np.ndarray) -> np.ndarray:
        """positions × codes × 2: the score of keeping code a (0) or changing it (1), from the prior alone."""
        out = np.zeros((len(self.noisy), self.codes, 2))
        for t in range(len(self.noisy) - 1):
            stay, q = self._prior(t, codes, position)
            out[t, :, 0] = np.log((1 - stay) * q + stay) - np.log(q)
            out[t, :, 1] = math.log(1 - stay)
        return out


def _carry_values(records: Records, people: np.ndarray, position: np.ndarray, linking: Linking,
                  encoder: Encoder) -> None:
    """Sets each row's advancing values to its individual's first row's moved by the clock's difference between
    them, and its stable numeric values to the first row's: the very values linking found in the row's own bins
    (``_Keys``), so no code changes."""
    columns = [(c, True) for c, _ in linking.individual.advances] + [
        (c, False) for c in linking.individual.stable if c in records.raw]
    if not columns or not len(people):
        return
    order = np.lexsort((position, people))
    starts = np.r_[0, np.flatnonzero(np.diff(people[order])) + 1]
    first = np.empty(len(people), dtype=np.int64)
    first[order] = np.repeat(order[starts], np.diff(np.r_[starts, len(order)]))
    times = np.asarray(linking.times)
    for column, advances in columns:
        values = records.raw[column]
        coder = encoder.coder(column)
        moved = coder.snap(values[first] + (times[position] - times[position[first]])) if advances else values[first]
        records.raw[column] = np.where(first == np.arange(len(first)), values, moved)
