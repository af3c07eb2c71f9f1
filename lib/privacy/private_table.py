"""The private table: the only door through which a method reaches private data.

A method gets a :class:`PrivateTable` and nothing else of the private side.  The table
holds the records (bounded to theta rows per individual when ids are given) through its
measuring engine (engine.py: in this process, or in partitions on a Dask cluster), the
run's ledger and its noise generator, and answers two kinds of calls:

* ``measure(query, rho)``: a query of lib/privacy/queries.py plus exact discrete
  Gaussian noise, Δ₂ derived by the query from theta (never stated by the caller);
* ``select(candidates, references, rho, k)``: the k candidate queries whose answers lie
  farthest (L1) from public reference answers (a method's current synthetic data),
  chosen by the exponential mechanism with the sensitivity derived from the candidates.

Each call charges the ledger before it computes the answer or draws noise, and returns a
record (:class:`Measurement` or :class:`Selection`) that is also kept in ``released``,
so the run's result carries every measurement whether or not a method passes it on.
The records are stored out of reach of attribute access (``vars(table)`` shows none of
them); tests/test_boundary.py fails if code under method/ tries to get at them.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from dpsyn.lib.records.domain import Domain
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.bounding import individual_codes
from dpsyn.lib.records.marginals import compact_codes
from dpsyn.lib.privacy.engine import Loaded, LocalEngine
from dpsyn.lib.privacy.mechanisms import LedgerStep, exponential_mechanism, gaussian_mechanism
from dpsyn.lib.privacy.queries import (BY_INDIVIDUAL, MAX_ROWS_BITS, QUERY_KINDS, DomainRecords, Marginal, Query,
                                       Sensitivity)
from dpsyn.lib.privacy.unit import PrivacyUnit

if TYPE_CHECKING:
    from dpsyn.lib.privacy.engine import DaskEngine


@dataclass(frozen=True)
class Measurement:
    """A released noisy answer: the query, its noisy values (shaped as the query's answer),
    the noise sd and the rho charged.  The only thing that crosses to the estimation side."""

    query: Query
    noisy: np.ndarray
    sigma: float
    rho: float
    label: str

    @property
    def attrs(self) -> tuple[str, ...]:
        """The encoded columns of a marginal measurement."""
        if not isinstance(self.query, Marginal):
            raise TypeError(f"{self.query.describe()} is not a marginal")
        return self.query.attrs

    @property
    def total(self) -> float:
        return float(self.noisy.sum())


@dataclass(frozen=True)
class Selection:
    """A released choice: the indices (in ``candidates``) the exponential mechanism picked."""

    candidates: tuple[Query, ...]
    chosen: tuple[int, ...]
    rho: float
    label: str


MAX_ROWS = 2 ** MAX_ROWS_BITS  # the tables the float bounds hold for (PRIVACY.md, "Floating point")


def _score_rounding(row_l1: float, reference_l1: float, weight: float, penalty: float) -> float:
    """A public bound on |computed - exact| of the score weight·(fsum |answer - reference| - penalty) on any table
    of fewer than MAX_ROWS rows, each row adding at most ``row_l1`` to ||answer||_1: each |a - r| is rounded
    once (relative 2**-53), fsum rounds the exact sum of those once, the penalty's subtraction and the weight's
    product once each; four relative errors of 2**-53 on at most weight·(||answer||_1 + ||reference||_1 +
    |penalty|), bounded with room by 2**-50 times that.  ``reference_l1``, ||reference||_1, is a float sum of N non-negative terms,
    within N·2**-53 of its value in any order: times (1 + 2**-20) bounds it for fewer than 2**33 cells.  Integer
    answers (``_l1_distance``) take three roundings (the int64 sum to float, the penalty, the weight) on
    weight·(||answer||_1 + ||rounded reference||_1 + |penalty|), the rounded reference at most twice the
    reference: 6·2**-53 of the same mass, inside the bound."""
    mass = MAX_ROWS * row_l1 + reference_l1 * (1 + 2.0 ** -20) + abs(penalty)
    return float(2.0 ** -50 * weight * mass)


REFERENCE_GRID = 2 ** 18  # integer answers meet references rounded to multiples of 1/REFERENCE_GRID


def _l1_distance(answer: np.ndarray, reference: np.ndarray, reference_l1: float, row_l1: float,
                 integer: bool) -> float:
    """||answer - reference||_1 within the float error ``_score_rounding`` bounds, the same in any summation order.

    ``integer`` (public: the query kind's) answers meet the public reference rounded to the nearest multiple of
    1/REFERENCE_GRID (a public change of the reference, so the score's sensitivity is unchanged): the distance is
    an exact int64 sum, rounded once to float, while the public bound on its total (tables under MAX_ROWS rows,
    each adding at most ``row_l1`` to ||answer||_1; ||reference||_1 = ``reference_l1``, the rounded one at most
    twice that) checks under 2^62, so every partial sum is under 2^63.  Other answers are summed with fsum."""
    if integer and (MAX_ROWS * row_l1 + 2 * reference_l1 + 1) * REFERENCE_GRID < 2.0 ** 62:
        if answer.dtype.kind not in "iu":
            raise TypeError("an integer query's answer is not held in integers")
        grid = np.rint(reference * REFERENCE_GRID).astype(np.int64)
        return float(np.abs(answer.astype(np.int64) * REFERENCE_GRID - grid).sum()) / REFERENCE_GRID
    return math.fsum(np.abs(answer - reference).ravel())


@dataclass(frozen=True)
class PrivateRecords:
    """A run's private records before bounding: n × d codes in domain order, the raw values (NaN = null) of
    the numeric columns whose values a query may read, and each row's individual (the ids' exact text, or
    None), or the same left on the Dask engine's workers (``loaded``, engine.Loaded, instead of the three).
    ``by_individual``: the private table keeps each bounded row's individual beside it, so that queries over
    an individual's rows (queries.BY_INDIVIDUAL) can be answered; ids are needed.
    Held by the release and by the private table; a method never sees them."""

    codes: np.ndarray | None
    numeric: Mapping[str, np.ndarray] | None = None
    ids: pa.Array | np.ndarray | None = None  # the ids' exact text
    loaded: Loaded | None = None
    by_individual: bool = False  # hold each kept row's individual, for the queries that read it


class PrivateTable:
    """The private records of one run behind measuring calls (see the module doc).

    ``records`` (``PrivateRecords``): the codes, the raw values of the numeric columns a query may read (the
    others are not held: a query reading them is refused before any charge) and, where there are ids, each
    row's individual, used to keep at most ``unit.theta`` random rows per individual (``bound_rng``, required
    with ids: bounding never draws from the noise generator); without ids each row is taken to belong to an
    individual with at most theta rows, as the parameters declare.  ``unit.distinct``: columns in which no two
    rows of one individual agree (bounding keeps one row per individual per combination of their codes first),
    which lowers the L2 sensitivity of queries whose cells include them: with theta > 1 it needs ids (the
    table refuses it without: it could not be enforced).  Queries over an individual's rows
    (queries.BY_INDIVIDUAL) need ``records.by_individual`` (with ids), else they are refused before any charge.
    The unit is read-only once the table holds the records.  ``engine`` (engine.py; default LocalEngine)
    bounds, holds and counts the records; loaded records are the engine's own, bounded there when they carry
    ids.  ``rng`` draws the noise (and the selections' randomness) and should be the table's own: nothing
    released should be drawn from it; ``ledger`` holds the run's budget.
    """

    __slots__ = ("domain", "__unit", "raw_columns", "_ledger", "_rng", "_released", "__engine", "__held",
                 "__by_individual", "__answers", "__sensitivities", "__shapes")

    def __init__(self, records: PrivateRecords, domain: Domain, unit: PrivacyUnit, ledger: Ledger,
                 rng: np.random.Generator, bound_rng: np.random.Generator | None = None,
                 engine: LocalEngine | DaskEngine | None = None):
        distinct, theta = unit.distinct, unit.theta
        unknown = [c for c in distinct if c not in domain.names]
        if unknown:
            raise ValueError(f"distinct columns not in the domain: {', '.join(unknown)}")
        loaded, ids = records.loaded, records.ids
        has_ids = loaded.has_ids if loaded is not None else ids is not None
        if distinct and theta > 1 and not has_ids:
            raise ValueError(f"columns distinct per individual ({', '.join(distinct)}) with theta {theta} need each "
                             f"row's individual: without ids bounding cannot enforce them")
        if has_ids and bound_rng is None:
            raise ValueError("bounding needs its own generator (bound_rng), never the noise's")
        held: Any  # the engine's handle on the bounded records
        if records.by_individual and not has_ids:
            raise ValueError("holding each row's individual needs ids")
        if loaded is not None:  # rows the engine already read onto its workers
            owner, raw_columns = loaded.engine, loaded.raw_columns
            engine, held = owner, owner.hold_loaded(loaded, domain, theta, bound_rng if loaded.has_ids else None,
                                                    domain.indices(distinct) if distinct and loaded.has_ids else [],
                                                    records.by_individual)
        else:
            codes, numeric = records.codes, dict(records.numeric or {})
            if codes is None:
                raise ValueError("private records need codes or the engine's loaded rows")
            if not set(numeric) <= set(domain.ranges):
                raise ValueError("raw values can be held only of the domain's numeric columns")
            engine = engine if engine is not None else LocalEngine()
            people = individual_codes(ids) if records.by_individual else None
            if ids is not None and bound_rng is not None:  # with ids the generator is there (checked above)
                keys = codes[:, domain.indices(distinct)] if distinct else None
                keep = engine.keep(ids, theta, bound_rng.random(len(ids)), keys)  # one random priority per row
                if len(keep) < len(ids):  # else every row is kept, in order: no copy
                    codes = codes[keep]
                    numeric = {name: values[keep] for name, values in numeric.items()}
                    people = people[keep] if people is not None else None
            held = engine.hold(DomainRecords(compact_codes(codes, domain.sizes), numeric, domain, people))
            raw_columns = tuple(numeric)
        self.domain, self.__unit = domain, unit
        self.raw_columns = tuple(c for c in domain.names if c in raw_columns)  # public: whose raw values are held
        self._ledger, self._rng = ledger, rng
        self._released: list[Measurement | Selection] = []
        self.__engine, self.__held = engine, held
        self.__by_individual = records.by_individual  # public: whether queries over individuals can be answered
        self.__answers: dict[Query, np.ndarray] = {}
        self.__sensitivities: dict[Query, Sensitivity] = {}
        self.__shapes: dict[Query, tuple[int, ...]] = {}

    @property
    def unit(self) -> PrivacyUnit:
        """Who the guarantee protects (read-only: every sensitivity is derived from it)."""
        return self.__unit

    @property
    def theta(self) -> int:
        """The most rows one individual keeps (the unit's theta)."""
        return self.__unit.theta

    @property
    def budget(self) -> float:
        """The run's whole rho budget."""
        return self._ledger.budget

    @property
    def remaining(self) -> float:
        """The rho still unspent (the largest charge that fits exactly)."""
        return self._ledger.remaining

    @contextmanager
    def holding(self, rho: float) -> Iterator[None]:
        """Within the ``with`` block, ``rho`` of the budget is out of reach (``remaining`` and every
        charge leave it aside): the share of a stage that measures after the block."""
        self._ledger.hold(rho)
        try:
            yield
        finally:
            self._ledger.unhold()

    @contextmanager
    def spending(self, node: str) -> Iterator[None]:
        """Within the ``with`` block, every charge goes to the run plan's node ``node`` and ``remaining``
        is what is left of it (the ledger refuses a charge past it; nodes do not nest, so a stage
        inside one node cannot reach another's rho)."""
        with self._ledger.spending(node):
            yield

    @property
    def released(self) -> tuple[Measurement | Selection, ...]:
        """Every record this table has released, in order."""
        return tuple(self._released)

    def sensitivity(self, query: Query) -> Sensitivity:
        """The query's sensitivity on this table (from theta and the distinct columns): public.  Worked out
        once per query (an adaptive round asks it of every candidate)."""
        if query not in self.__sensitivities:
            self._check(query)
            self.__sensitivities[query] = query.sensitivity(self.unit)
        return self.__sensitivities[query]

    def _answer(self, query: Query) -> np.ndarray:
        """The query's exact answer, computed once per query (the records never change)."""
        self._count([query])
        return self.__answers[query]

    def _count(self, queries: Sequence[Query]) -> None:
        """Exact answers of the queries not answered yet, asked of the engine together (one pass)."""
        new = list(dict.fromkeys(q for q in queries if q not in self.__answers))
        if new:
            self.__answers.update(zip(new, self.__engine.answers(self.__held, new)))

    def _shape(self, query: Query) -> tuple[int, ...]:
        """The query's answer shape, once it passes ``_check`` (both once per query: an adaptive round asks
        them of every candidate)."""
        if type(query) not in QUERY_KINDS or query not in self.__shapes:  # another kind: _check's one line
            self._check(query)
            self.__shapes[query] = query.shape(self.domain)
        return self.__shapes[query]

    def _check(self, query: Query) -> None:
        if type(query) not in QUERY_KINDS:
            raise TypeError(f"the private table answers only {', '.join(k.__name__ for k in QUERY_KINDS)} "
                            f"queries, not {type(query).__name__}")
        query.validate(self.domain)
        if isinstance(query, BY_INDIVIDUAL) and not self.__by_individual:
            raise ValueError(f"{query.describe()} needs each row's individual, which this table does not hold "
                             f"(it holds them only when built with ids and by_individual)")
        missing = [c for c in query.raw_columns if c not in self.raw_columns]
        if missing:
            raise ValueError(f"{query.describe()} reads the raw values of {', '.join(missing)}, which this table "
                             f"does not hold (the release holds those of {', '.join(self.raw_columns) or 'no column'})")

    def measure(self, query: Query, rho: float, label: str | None = None) -> Measurement:
        """The query's answer plus exact discrete Gaussian noise with σ = Δ₂/sqrt(2ρ).

        Privacy cost: ``rho`` (zCDP; exactly what remains when ``rho`` exceeds it by float
        error), charged before the answer is computed; Δ₂ from the query and theta.
        """
        self._check(query)
        sens = self.sensitivity(query)
        label = label or query.describe()
        noisy, sigma, rho = gaussian_mechanism(lambda: self._answer(query),
                                               int(np.prod(query.shape(self.domain))),
                                               query.integer, sens.l2, rho, self._rng,
                                               LedgerStep(self._ledger, label, sens.reason))
        record = Measurement(query, noisy, sigma, rho, label)
        self._released.append(record)
        return record

    def select(self, candidates: Sequence[Query], references: Sequence[np.ndarray], rho: float, k: int = 1,
               weights: Sequence[float] | None = None, penalties: Sequence[float] | np.ndarray | None = None,
               label: str | None = None) -> Selection:
        """The k candidates with the largest scores w_i·(||q_i(D) - references[i]||₁ - penalties[i]),
        chosen by the exponential mechanism (k rounds, without repeats).

        ``references`` (public, e.g. the answers on a method's synthetic records), ``weights``
        (positive) and ``penalties`` are public.  One individual moves score i by at most
        w_i times the query's L1 sensitivity, so the mechanism uses Δ = max_i of that.
        Privacy cost: ``rho`` (zCDP), charged before any score is computed.
        """
        candidates = tuple(candidates)
        ws = np.ones(len(candidates)) if weights is None else np.asarray(weights, dtype=np.float64)
        ps = np.zeros(len(candidates)) if penalties is None else np.asarray(penalties, dtype=np.float64)
        if not candidates or not len(references) == len(ws) == len(ps) == len(candidates):
            raise ValueError("select needs candidates with one reference, weight and penalty each")
        if any(isinstance(q, BY_INDIVIDUAL) for q in candidates):  # the scores' float bound counts rows, not people
            raise TypeError("select does not take queries over an individual's rows")
        if not (np.isfinite(ws).all() and (ws > 0).all() and np.isfinite(ps).all()):
            raise ValueError("select needs finite positive weights and finite penalties")
        for query, reference in zip(candidates, references):
            if np.shape(reference) != self._shape(query):
                raise ValueError(f"reference for {query.describe()} has shape {np.shape(reference)}, "
                                 f"not {self._shape(query)}")
        l1 = [self.sensitivity(q).l1 for q in candidates]
        bounds = [w * b for b, w in zip(l1, ws)]
        # the float score is within float_error of the exact one (a public bound, PRIVACY.md "Floating point"):
        # two neighbours' scores differ by at most the exact bound plus twice that
        references = [np.asarray(r, dtype=np.float64) for r in references]
        reference_l1 = [float(np.abs(r).sum()) for r in references]
        float_error = max(_score_rounding(b / self.theta, r, w, p)
                          for b, r, w, p in zip(l1, reference_l1, ws, ps))
        sensitivity = max(bounds) + 2 * float_error
        label = label or f"selection of {k} of {len(candidates)} candidates"
        reason = (f"{label}: score i is w_i(||q_i - reference_i||_1 - penalty_i); one individual moves "
                  f"||q_i||_1 by at most its L1 sensitivity, so each score by at most w_i times it "
                  f"(largest {max(bounds):.6g}), plus {2 * float_error:.3g} for the scores' float rounding")

        def scores() -> np.ndarray:
            self._count(candidates)
            return np.array([w * (_l1_distance(self.__answers[q], r, r1, b / self.theta, type(q).integer) - p)
                             for q, r, r1, b, w, p in zip(candidates, references, reference_l1, l1, ws, ps)])
        chosen, rho = exponential_mechanism(scores, len(candidates), sensitivity, rho, self._rng,
                                            LedgerStep(self._ledger, label, reason), k)
        record = Selection(candidates, chosen, rho, label)
        self._released.append(record)
        return record
