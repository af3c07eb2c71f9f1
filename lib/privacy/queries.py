"""The queries the private table answers: a closed set, each deriving its own sensitivity.

A query is a public description (columns, thresholds, weights); the private table
(lib/privacy/private_table.py) answers it on the bounded records and adds noise scaled
to the sensitivity derived here.  The table accepts only the kinds in ``QUERY_KINDS``, so
a method cannot bring a query with a sensitivity of its own making; a new kind is added
here, with its derivation and a case in tests/test_neighbours.py.

Neighbouring tables differ by one individual, who has at most theta rows after
contribution bounding.  Every derivation below bounds, over all such individuals, the
change of the answer vector: ``l1`` and ``l2`` are its largest L1 and L2 norms.  When the
run declares columns in which one individual's rows never agree (``distinct``, enforced by
bounding: at most one row per individual per combination of their codes), a query whose
cells include those columns puts that individual's rows in different cells, so its L2
change shrinks by sqrt(theta) (e.g. Sprint 2: at most one row per person per YEAR).

Numeric columns enter threshold and sum queries through their raw values scaled to
[0, 1] by the public range of the domain; a null in any of a query's numeric columns
makes the row count in no threshold and add 0 to a sum.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from numpy.typing import ArrayLike

from dpsyn.lib.records.domain import Domain, scale_to_unit
from dpsyn.lib.records.marginals import cell_index, count_marginal
from dpsyn.lib.privacy.bounding import individual_codes
from dpsyn.lib.privacy.unit import PrivacyUnit

EXACT_BOX_COLUMNS = 12  # up to this many columns, max over [0,1]^p of ||Wx||_2 is found at the 2^p corners


@dataclass(frozen=True)
class DomainRecords:
    """Records over a domain, as a query reads them: codes (n × d, domain order) and the raw values of
    numeric columns (NaN = null).  The private table's bounded records are one (held out of reach); a
    method's synthetic records may be another (a query's answer on those is public)."""

    codes: np.ndarray
    numeric: Mapping[str, np.ndarray]
    domain: Domain
    individuals: Any = None  # each row's individual (integers, or ids' text: equal, one individual); None: unknown

    def scaled(self, columns: tuple[str, ...], bounds: tuple[tuple[float, float], ...] = ()) -> np.ndarray:
        """n × p raw values of ``columns`` scaled to [0, 1] (NaN = null) by their public range, or by
        ``bounds`` (one (low, high) per column) where given; values outside are clipped to them."""
        if not columns:
            return np.zeros((len(self.codes), 0))
        if bounds:
            return np.column_stack([scale_to_unit(self.numeric[c], lo, hi) for c, (lo, hi) in zip(columns, bounds)])
        return np.column_stack([self.domain.scale(c, self.numeric[c]) for c in columns])

    def cells(self, attrs: tuple[str, ...]) -> np.ndarray:
        """Flat cell index of every row in the marginal over ``attrs`` (0 for no attrs)."""
        return cell_index(self.codes[:, self.domain.indices(attrs)], self.domain.shape(attrs))


@dataclass(frozen=True)
class Sensitivity:
    l1: float
    l2: float
    reason: str


def per_row(what: str, row_l1: float, row_l2: float, row_reason: str, unit: PrivacyUnit,
            cells: tuple[str, ...]) -> Sensitivity:
    """Sensitivity of an answer that adds up per-row contributions, each at most ``row_l1`` / ``row_l2``
    and confined to the row's own cell of ``cells``: one individual's theta rows change it by theta
    times that, or, when ``cells`` separate those rows (``PrivacyUnit.separates``), by sqrt(theta) times
    in L2, their contributions landing in disjoint coordinates."""
    theta, distinct = unit.theta, unit.distinct
    if unit.separates(cells):
        return Sensitivity(theta * row_l1, math.sqrt(theta) * row_l2,
                           f"{what}: {row_reason}; one individual's rows (theta={theta}) lie in distinct cells "
                           f"(no two alike in {' × '.join(distinct)}), so the L2 change is at most sqrt({theta}) "
                           f"times that")
    return Sensitivity(theta * row_l1, theta * row_l2,
                       f"{what}: {row_reason}; one individual (theta={theta} rows) changes it by at most theta "
                       f"times that, {theta * row_l2:.6g} in L2")


FIXED_POINT_BITS = 20  # a row's part of a real-valued sum is rounded to 2**-20 of the least power of two >= its bound
MAX_ROWS_BITS = 33     # real-valued sums are exact for tables of fewer than 2**33 rows (PRIVACY.md)


def fixed_point_step(bound: float) -> float:
    """The step q = 2**(e - FIXED_POINT_BITS), 2**e the least power of two >= ``bound`` (a public bound on the
    magnitude of one row's values), to which ``exact_cell_sums`` rounds each row's values."""
    return 2.0 ** (math.ceil(math.log2(max(bound, 2.0 ** -60))) - FIXED_POINT_BITS)


def row_dot(x: np.ndarray, weights: ArrayLike) -> np.ndarray:
    """n × r: each row's w·x for the r weight vectors (a vector: r = 1), added column by column in a fixed
    order with numpy's elementwise operations, so that a row's value depends on that row alone.  A BLAS
    product (``x @ w``) may round one row differently when other rows are added or moved (its blocking),
    which would let one individual change another row's cell or fixed-point value."""
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros((len(x), len(w)))
    for j in range(x.shape[1]):
        out += x[:, j:j + 1] * w[:, j]
    return out


def exact_cell_sums(cells: np.ndarray, values: np.ndarray, n_cells: int, bound: float) -> np.ndarray:
    """n_cells × k: per cell, the sums of the rows' ``values`` (n × k, each at most ``bound`` in magnitude),
    each value first rounded to the nearest multiple of q = ``fixed_point_step(bound)`` (one row at a time:
    a per-record transformation).  Every partial sum is then an integer multiple of q below 2**53·q for
    tables of fewer than 2**MAX_ROWS_BITS rows, so float64 adds them exactly, in any order and any split of
    the rows: the answer is the exact sum of the rounded rows (the same on either engine, bit for bit), and
    the sensitivity argument holds for it with no floating-point error term.  Rounding moves a value by at
    most q/2, and never past a power of two at or above ``bound`` (a multiple of q)."""
    q = fixed_point_step(bound)
    rounded = np.rint(np.asarray(values, dtype=np.float64) / q) * q
    return np.stack([np.bincount(cells, weights=rounded[:, k], minlength=n_cells)
                     for k in range(rounded.shape[1])], axis=-1)


def _check_columns(domain: Domain, attrs: tuple[str, ...], numeric: bool | None, what: str) -> None:
    unknown = [a for a in attrs if a not in domain.names]
    if unknown:
        raise ValueError(f"{what}: not domain columns: {', '.join(unknown)}")
    if len(set(attrs)) != len(attrs):
        raise ValueError(f"{what}: a column is named twice")
    if numeric:
        plain = [a for a in attrs if not domain.is_numeric(a)]
        if plain:
            raise ValueError(f"{what}: not numeric columns: {', '.join(plain)}")


@dataclass(frozen=True)
class Marginal:
    """Counts of rows per cell of the encoded columns ``attrs`` (``()``: the number of rows).

    ``widths`` (one per column, or empty for all 1) coarsens a column: its code integer-divided by
    the width, so a column of 85 codes read in widths of 10 has 9 coarse cells (the last one short).
    A public, per-row transformation: each row is still in exactly one cell."""

    attrs: tuple[str, ...]
    widths: tuple[int, ...] = ()
    integer = True
    raw_columns = ()  # no raw numeric value is read: codes only

    def validate(self, domain: Domain) -> None:
        _check_columns(domain, self.attrs, None, f"marginal {self.attrs}")
        if self.widths and (len(self.widths) != len(self.attrs) or min(self.widths) < 1):
            raise ValueError(f"marginal {self.attrs}: one width of at least 1 per column")

    def column_widths(self) -> tuple[int, ...]:
        """Each column's width (1: the codes themselves)."""
        return self.widths or (1,) * len(self.attrs)

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return tuple(-(-size // w) for size, w in zip(domain.shape(self.attrs), self.column_widths()))

    def answer(self, records: DomainRecords) -> np.ndarray:
        codes = records.codes[:, records.domain.indices(self.attrs)]
        if any(w > 1 for w in self.column_widths()):
            codes = codes // np.asarray(self.column_widths(), dtype=codes.dtype)
        return count_marginal(codes, self.shape(records.domain))

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        # a coarsened column no longer tells an individual's rows apart, so only exact columns separate them
        exact = tuple(a for a, w in zip(self.attrs, self.column_widths()) if w == 1)
        return per_row(self.describe(), 1, 1, "each row is in exactly one cell, changing one count by 1", unit,
                       exact)

    def columns_text(self) -> str:
        """The columns in words, a coarsened one with its width ("age (codes in 10s) × sex")."""
        return " × ".join(a if w == 1 else f"{a} (codes in {w}s)" for a, w in zip(self.attrs, self.column_widths()))

    def describe(self) -> str:
        return f"{len(self.attrs)}-way marginal {self.columns_text()}" if self.attrs else "number of rows"


@dataclass(frozen=True)
class Thresholds:
    """For each direction w (over the scaled numeric ``columns``) and threshold t: the number
    of rows with w·x <= t, per cell of the encoded columns ``by``.  Shape: by's cells × r × k.
    One column with direction (1,) gives prefix counts x <= t (a CDF at the thresholds)."""

    columns: tuple[str, ...]
    directions: tuple[tuple[float, ...], ...]
    thresholds: tuple[float, ...]
    by: tuple[str, ...] = ()
    integer = True

    @property
    def raw_columns(self) -> tuple[str, ...]:
        """The numeric columns whose raw values the query reads."""
        return self.columns

    def validate(self, domain: Domain) -> None:
        _check_columns(domain, self.columns, True, f"threshold query on {self.columns}")
        _check_columns(domain, self.by, None, f"threshold query by {self.by}")
        if not self.columns or not self.directions or not self.thresholds:
            raise ValueError("a threshold query needs columns, directions and thresholds")
        if any(len(w) != len(self.columns) for w in self.directions):
            raise ValueError("every direction needs one weight per column")
        if not np.isfinite(np.asarray(self.directions, dtype=float)).all() or \
                not np.isfinite(np.asarray(self.thresholds, dtype=float)).all():
            raise ValueError("directions and thresholds must be finite numbers")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return domain.shape(self.by) + (len(self.directions), len(self.thresholds))

    def answer(self, records: DomainRecords) -> np.ndarray:
        x = records.scaled(self.columns)
        keep = ~np.isnan(x).any(axis=1)
        cells = records.cells(self.by)[keep]
        n_cells = records.domain.size(self.by)
        order = np.argsort(self.thresholds, kind="stable")
        sorted_t = np.asarray(self.thresholds, dtype=np.float64)[order]
        k = len(sorted_t)
        out = np.empty((n_cells, len(self.directions), k), dtype=np.int64)
        for i, w in enumerate(np.asarray(self.directions, dtype=np.float64)):
            first = np.searchsorted(sorted_t, row_dot(x[keep], w)[:, 0], side="left")  # w·x <= t_j for j >= first
            counts = np.bincount(cells * (k + 1) + first, minlength=n_cells * (k + 1)).reshape(n_cells, k + 1)
            out[:, i, order] = np.cumsum(counts[:, :k], axis=1)
        return out.reshape(self.shape(records.domain))

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        # one row sits in one cell of `by` and satisfies at most r*k of that cell's (direction, threshold) pairs
        hits = len(self.directions) * len(self.thresholds)
        return per_row(self.describe(), hits, math.sqrt(hits),
                       f"one row is in one cell and meets at most {hits} of its {len(self.directions)} directions "
                       f"× {len(self.thresholds)} thresholds, changing counts by sqrt({hits}) in L2", unit, self.by)

    def describe(self) -> str:
        by = f" by {' × '.join(self.by)}" if self.by else ""
        return (f"threshold counts on {', '.join(self.columns)} ({len(self.directions)} directions × "
                f"{len(self.thresholds)} thresholds){by}")


@dataclass(frozen=True)
class LinearSums:
    """For each weight vector w: the sum over rows of w·x (x: the scaled numeric ``columns``,
    nulls as 0), per cell of the encoded columns ``by``.  Shape: by's cells × r."""

    columns: tuple[str, ...]
    weights: tuple[tuple[float, ...], ...]
    by: tuple[str, ...] = ()
    integer = False

    @property
    def raw_columns(self) -> tuple[str, ...]:
        """The numeric columns whose raw values the query reads."""
        return self.columns

    def validate(self, domain: Domain) -> None:
        _check_columns(domain, self.columns, True, f"sum query on {self.columns}")
        _check_columns(domain, self.by, None, f"sum query by {self.by}")
        if not self.columns or not self.weights or any(len(w) != len(self.columns) for w in self.weights):
            raise ValueError("a sum query needs columns and weight vectors with one weight per column")
        if not np.isfinite(np.asarray(self.weights, dtype=float)).all():
            raise ValueError("weights must be finite numbers")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return domain.shape(self.by) + (len(self.weights),)

    def answer(self, records: DomainRecords) -> np.ndarray:
        x = np.nan_to_num(records.scaled(self.columns), nan=0.0)
        per_row = row_dot(x, self.weights)
        out = exact_cell_sums(records.cells(self.by), per_row, records.domain.size(self.by), self.row_bound())
        return out.reshape(self.shape(records.domain))

    def row_bound(self) -> float:
        """The largest |w·x| over x in [0, 1]^p and the weight vectors: max ||w||_1."""
        return float(np.abs(np.asarray(self.weights, dtype=np.float64)).sum(axis=1).max())

    def row_norms(self) -> tuple[float, float]:
        """(max L1, max L2) over x in [0, 1]^p of W x: one row's largest contribution."""
        w = np.asarray(self.weights, dtype=np.float64)
        l1 = float(np.maximum(np.clip(w, 0, None).sum(axis=1), -np.clip(w, None, 0).sum(axis=1)).sum())
        if w.shape[1] <= EXACT_BOX_COLUMNS:  # a convex function's maximum over a box sits at a corner
            corners = np.array(list(itertools.product((0.0, 1.0), repeat=w.shape[1])))
            l2 = float(np.sqrt(((corners @ w.T) ** 2).sum(axis=1)).max())
        else:  # ||Wx|| <= sum_j x_j ||W[:, j]||
            l2 = float(np.sqrt((w ** 2).sum(axis=0)).sum())
        return l1, l2

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        l1, l2 = self.row_norms()
        r, q = len(self.weights), fixed_point_step(self.row_bound())
        # each of a row's r values is computed in float64 (error <= p·2**-53·||w||_1, far below q/2) and
        # rounded to a multiple of q (at most q/2 more): the row's part is within r·q (L1), sqrt(r)·q (L2) of W·x
        return per_row(self.describe(), l1 + r * q, l2 + math.sqrt(r) * q,
                       f"one row in one cell adds W·x with x in [0,1]^p, at most {l2:.6g} in L2, each value "
                       f"rounded to a multiple of {q:.3g} (plus sqrt(r)·q)", unit, self.by)

    def describe(self) -> str:
        by = f" by {' × '.join(self.by)}" if self.by else ""
        return f"sums of {len(self.weights)} linear combinations of {', '.join(self.columns)}{by}"


@dataclass(frozen=True)
class DependencyScores:
    """For each pair (a, b) of encoded columns, the independence gap
    InDif(a, b) = sum over cells |c_ab(x, y) - c_a(x)·c_b(y)/n| (PrivSyn's dependency score):
    the L1 error of synthesizing the pair as independent."""

    pairs: tuple[tuple[str, str], ...]
    integer = False
    raw_columns = ()  # no raw numeric value is read: codes only

    def validate(self, domain: Domain) -> None:
        if not self.pairs:
            raise ValueError("dependency scores need at least one pair")
        for pair in self.pairs:
            _check_columns(domain, tuple(pair), None, f"dependency score {pair}")
            if len(pair) != 2:
                raise ValueError(f"dependency score {pair}: needs two columns")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return (len(self.pairs),)

    def answer(self, records: DomainRecords) -> np.ndarray:
        return np.array([independence_gap(Marginal(pair).answer(records)) for pair in self.pairs])

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        # one row changes the joint counts by 1 in L1 and the product of margins over n by at most 3
        # each gap is the correctly rounded float of the exact one (independence_gap): within 2n·2**-53 of it, at
        # most 2**-19 for tables under 2**MAX_ROWS_BITS rows, so two neighbours' floats differ by 2**-18 more
        m, rounding, theta = len(self.pairs), 2.0 ** (MAX_ROWS_BITS - 51), unit.theta
        return Sensitivity(m * (4 * theta + rounding), math.sqrt(m) * (4 * theta + rounding),
                           f"independence gaps of {m} pairs: one record moves a gap by at most 4 (1 in the joint "
                           f"counts, 3 in the product of margins over n), one individual by 4*theta={4 * theta}, "
                           f"plus {rounding:.3g} for the rounding of each gap to a float; L2 over all pairs "
                           f"(4*theta + {rounding:.3g})*sqrt({m})")

    def describe(self) -> str:
        return f"dependency scores ({len(self.pairs)} pairs)"


def independence_gap(joint: np.ndarray) -> float:
    """InDif of a 2-way count table: sum |joint - outer(row sums, column sums)/n|, computed exactly: n times it
    is the integer sum |n·joint - outer(row sums, column sums)| (Python integers past int64's range), then one
    correctly rounded division, so the float is a fixed rounding of the exact gap (PRIVACY.md)."""
    joint = np.asarray(joint)
    if not np.issubdtype(joint.dtype, np.integer):
        joint = np.rint(joint).astype(np.int64)  # counts held as floats
    n = int(joint.sum())
    if n == 0:
        return 0.0
    if n >= 1 << 31:  # n² past int64: Python integers
        joint = joint.astype(object)
    scaled = np.abs(n * joint - np.outer(joint.sum(axis=1), joint.sum(axis=0)))
    return int(scaled.sum()) / n


@dataclass(frozen=True)
class CellHistogram:
    """For each cell g of the encoded columns ``by``: the number of rows of that cell whose raw
    value of numeric ``column`` lies in each right-closed bin (edges[g][k], edges[g][k+1]]; every
    cell has its own edges, all with the same number of bins.  Shape: by's cells × bins.  Rows
    whose value is null or outside their cell's edges count nowhere."""

    column: str
    by: tuple[str, ...]
    edges: tuple[tuple[float, ...], ...]
    integer = True

    @property
    def raw_columns(self) -> tuple[str, ...]:
        """The numeric columns whose raw values the query reads."""
        return (self.column,)

    def validate(self, domain: Domain) -> None:
        _check_columns(domain, (self.column,), True, f"cell histogram of {self.column}")
        _check_columns(domain, self.by, None, f"cell histogram by {self.by}")
        edges = np.asarray(self.edges, dtype=np.float64)
        if edges.ndim != 2 or edges.shape[0] != domain.size(self.by) or edges.shape[1] < 2:
            raise ValueError(f"a cell histogram needs one row of at least two edges per cell of {self.by}")
        if not np.isfinite(edges).all() or (np.diff(edges, axis=1) <= 0).any():
            raise ValueError("cell histogram edges must be finite and strictly increasing")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return (domain.size(self.by), len(self.edges[0]) - 1)

    def answer(self, records: DomainRecords) -> np.ndarray:
        edges = np.asarray(self.edges, dtype=np.float64)
        bins = edges.shape[1] - 1
        cells = records.cells(self.by)
        values = np.asarray(records.numeric[self.column], dtype=np.float64)
        out = np.zeros((edges.shape[0], bins), dtype=np.int64)
        order = np.argsort(cells, kind="stable")  # one pass: rows grouped by cell, then one slice per cell
        starts = np.searchsorted(cells[order], np.arange(edges.shape[0] + 1))
        for g in np.flatnonzero(np.diff(starts)):
            v = values[order[starts[g]:starts[g + 1]]]
            k = np.searchsorted(edges[g], v[~np.isnan(v)], side="left") - 1
            out[g] = np.bincount(k[(k >= 0) & (k < bins)], minlength=bins)
        return out

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        return per_row(self.describe(), 1, 1, "each row counts in at most one bin of its own cell", unit, self.by)

    def describe(self) -> str:
        return f"histogram of {self.column} per cell of {' × '.join(self.by)} ({len(self.edges[0]) - 1} bins each)"


@dataclass(frozen=True)
class Intervals:
    """Rows per cell of the encoded columns ``by`` and per interval of the projection w·x (x: the
    scaled numeric ``columns``, w: ``direction``) cut at the increasing ``cuts``: intervals
    (-inf, c_1], (c_1, c_2], ..., (c_k, inf), then one slot for rows with a null in any of the
    columns.  Shape: by's cells × (k + 2).  Every row is in exactly one slot, so prefix counts
    (w·x <= c_i, the threshold queries of mixed marginals) are sums of these, without the
    sqrt(k) L2 sensitivity of measuring the k prefixes themselves."""

    columns: tuple[str, ...]
    direction: tuple[float, ...]
    cuts: tuple[float, ...]
    by: tuple[str, ...] = ()
    integer = True

    @property
    def raw_columns(self) -> tuple[str, ...]:
        """The numeric columns whose raw values the query reads."""
        return self.columns

    def validate(self, domain: Domain) -> None:
        _check_columns(domain, self.columns, True, f"interval counts on {self.columns}")
        _check_columns(domain, self.by, None, f"interval counts by {self.by}")
        if not self.columns or len(self.direction) != len(self.columns):
            raise ValueError("interval counts need numeric columns and one direction weight per column")
        cuts = np.asarray(self.cuts, dtype=float)
        if not np.isfinite(np.asarray(self.direction, dtype=float)).all() or not np.isfinite(cuts).all():
            raise ValueError("directions and cuts must be finite numbers")
        if (np.diff(cuts) <= 0).any():
            raise ValueError("interval cuts must be strictly increasing")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return (domain.size(self.by), len(self.cuts) + 2)

    def answer(self, records: DomainRecords) -> np.ndarray:
        x = records.scaled(self.columns)
        null = np.isnan(x).any(axis=1)
        slot = np.searchsorted(np.asarray(self.cuts, dtype=np.float64),
                               row_dot(np.nan_to_num(x), self.direction)[:, 0], side="left")
        slot[null] = len(self.cuts) + 1
        width = len(self.cuts) + 2
        n_cells = records.domain.size(self.by)
        return np.bincount(records.cells(self.by) * width + slot, minlength=n_cells * width).reshape(n_cells, width)

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        return per_row(self.describe(), 1, 1, "each row is in exactly one slot, changing one count by 1", unit,
                       self.by)

    def describe(self) -> str:
        by = f" by {' × '.join(self.by)}" if self.by else ""
        axis = self.columns[0] if len(self.columns) == 1 and self.direction == (1.0,) else \
            "w·(" + ", ".join(self.columns) + ")"
        return f"interval counts of {axis} ({len(self.cuts) + 1} intervals + null){by}"


@dataclass(frozen=True)
class Moments:
    """Per cell of the encoded columns ``by``: the number of rows, the sums of x_i and the sums of
    x_i x_j (i <= j, row-major), x the scaled numeric ``columns`` with nulls as 0.  Shape: by's
    cells × (1 + p + p(p+1)/2).  Means and the covariance (so the correlation matrix) of the
    columns are ratios of these."""

    columns: tuple[str, ...]
    by: tuple[str, ...] = ()
    bounds: tuple[tuple[float, float], ...] = ()  # public clipping bounds per column; () for their ranges
    integer = False

    @property
    def raw_columns(self) -> tuple[str, ...]:
        """The numeric columns whose raw values the query reads."""
        return self.columns

    def validate(self, domain: Domain) -> None:
        _check_columns(domain, self.columns, True, f"moments of {self.columns}")
        _check_columns(domain, self.by, None, f"moments by {self.by}")
        if not self.columns:
            raise ValueError("moments need at least one numeric column")
        if self.bounds and (len(self.bounds) != len(self.columns) or not all(
                math.isfinite(lo) and math.isfinite(hi) and lo < hi for lo, hi in self.bounds)):
            raise ValueError(f"moments of {self.columns}: bounds must be one finite (low < high) per column")

    def width(self) -> int:
        p = len(self.columns)
        return 1 + p + p * (p + 1) // 2

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return (domain.size(self.by), self.width())

    def row_values(self, x: np.ndarray) -> np.ndarray:
        """n × width: (1, x_i, x_i x_j for i <= j) of each row of the scaled values ``x`` (NaN as 0)."""
        x = np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0)
        i, j = np.triu_indices(x.shape[1])
        return np.column_stack([np.ones(len(x)), x, x[:, i] * x[:, j]])

    def answer(self, records: DomainRecords) -> np.ndarray:
        values = self.row_values(records.scaled(self.columns, self.bounds))
        # every value in [0, 1], and rounding to multiples of 2**-20 keeps it there: the bound holds exactly
        return exact_cell_sums(records.cells(self.by), values, records.domain.size(self.by), 1.0)

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        k = self.width()
        return per_row(self.describe(), k, math.sqrt(k), f"one row adds a vector of {k} values in [0, 1] (1, x_i, "
                       f"x_i x_j, each x clipped to its public bounds and scaled by them) to its cell, at most {k} "
                       f"in L1 and sqrt({k}) in L2", unit, self.by)

    def describe(self) -> str:
        by = f" by {' × '.join(self.by)}" if self.by else ""
        columns = [f"{c}[{lo:g},{hi:g}]" for c, (lo, hi) in zip(self.columns, self.bounds)] if self.bounds \
            else self.columns
        return f"first and second moments of {', '.join(columns)}{by}"


@dataclass(frozen=True)
class LogisticGradients:
    """The sum over rows of the multinomial logistic loss's gradient at public ``weights``, for the
    categorical ``label`` from the one-hot codes of ``columns`` plus an intercept: row x (1, then one
    1 per column at its code) with label y adds (softmax(W x) - e_y) ⊗ x.  ``weights`` holds W, one
    row per label value, 1 + the columns' code counts entries each.  Shape: labels × that.  A DP
    logistic regression is noisy gradient descent on these (method/superquail.py)."""

    columns: tuple[str, ...]
    label: str
    weights: tuple[tuple[float, ...], ...]
    integer = False
    raw_columns = ()  # no raw numeric value is read: codes only

    def validate(self, domain: Domain) -> None:
        _check_columns(domain, self.columns + (self.label,), None, f"logistic gradients of {self.label}")
        w = np.asarray(self.weights, dtype=float)
        if w.shape != self.shape(domain) or not np.isfinite(w).all():
            raise ValueError(f"logistic gradients need finite weights of shape {self.shape(domain)}")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return (domain.size((self.label,)), 1 + sum(domain.shape(self.columns)))

    def answer(self, records: DomainRecords) -> np.ndarray:
        domain, codes = records.domain, records.codes
        w = np.asarray(self.weights, dtype=np.float64)
        offsets = 1 + np.concatenate([[0], np.cumsum(domain.shape(self.columns))[:-1]]).astype(np.int64)
        positions = codes[:, domain.indices(self.columns)] + offsets
        logits = w[:, 0] + w[:, positions].sum(axis=2).T
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        residual = p / p.sum(axis=1, keepdims=True)
        residual[np.arange(len(codes)), codes[:, domain.index(self.label)]] -= 1.0
        # each residual in [-1, 1]: exact_cell_sums rounds it to multiples of 2**-20 (still in [-1, 1]) and adds exactly
        out = np.zeros(w.shape)
        out[:, 0] = exact_cell_sums(np.zeros(len(codes), dtype=np.int64), residual, 1, 1.0)[0]
        spread = np.repeat(residual, positions.shape[1], axis=0)
        out[:, 1:] = exact_cell_sums(positions.ravel() - 1, spread, w.shape[1] - 1, 1.0).T
        return out

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        ones, labels = len(self.columns) + 1, len(self.weights)
        q = fixed_point_step(1.0)
        # p - e_y in floats (each entry in [-1, 1], off by far less than q/2) rounded to multiples of q: within
        # labels·q (L1), sqrt(labels)·q (L2) of the exact vector, whose norms are at most 2 and sqrt(2)
        l1, l2 = 2 + labels * q, math.sqrt(2) + math.sqrt(labels) * q
        return per_row(self.describe(), ones * l1, math.sqrt(ones) * l2,
                       f"one row adds (p - e_y) ⊗ x with ||p - e_y||_2 <= sqrt(2) (L1 <= 2; each entry rounded to "
                       f"a multiple of {q:.3g}: plus sqrt(labels)·q) and x holding {ones} ones, at most "
                       f"sqrt({ones}) * {l2:.9g} in L2", unit, ())

    def describe(self) -> str:
        return f"logistic-loss gradient sums for {self.label} from {len(self.columns)} columns"


def _individuals(records: DomainRecords, what: str) -> np.ndarray:
    """Each row's individual as an integer (equal for two rows exactly when their individuals are), refusing
    records whose individuals are unknown."""
    if records.individuals is None:
        raise ValueError(f"{what} needs each row's individual (an id column)")
    if isinstance(records.individuals, np.ndarray) and records.individuals.dtype.kind in "iu":
        return records.individuals.astype(np.int64)
    return individual_codes(records.individuals)


def _check_clock(domain: Domain, clock: str, ranks: tuple[int, ...], what: str) -> None:
    _check_columns(domain, (clock,), None, what)
    if domain.is_numeric(clock):
        raise ValueError(f"{what}: the clock {clock} must be a categorical column")
    if sorted(ranks) != list(range(domain.sizes[domain.index(clock)])):
        raise ValueError(f"{what}: ranks must order every code of {clock} once")


def _one_count(query: "IndividualSpans | IndividualPatterns", unit: PrivacyUnit, cell: str) -> Sensitivity:
    """The sensitivity of counts of individuals, each one count in one cell (``cell`` says which): adding or
    removing one changes one count by 1, L1 = L2 = 1 whatever theta (the query's theta must be the unit's)."""
    if unit.theta != query.theta:
        raise ValueError(f"{query.describe()} is for theta {query.theta}, the unit's is {unit.theta}")
    return Sensitivity(1.0, 1.0, f"{query.describe()}: one individual is one count, in one cell ({cell}), so adding "
                                 f"or removing one changes one count by 1")


@dataclass(frozen=True)
class IndividualSpans:
    """The number of individuals by the code of ``clock`` on their first row (first in the order ``ranks``,
    rank of each code of the clock) and by how many rows they have (1 to ``theta``, the unit's theta).
    Shape: clock codes × theta.  Reads each row's individual: records without one are refused."""

    clock: str
    ranks: tuple[int, ...]
    theta: int
    integer = True
    raw_columns = ()  # no raw numeric value is read: codes only

    def validate(self, domain: Domain) -> None:
        _check_clock(domain, self.clock, self.ranks, f"individual spans by {self.clock}")
        if self.theta < 1:
            raise ValueError("individual spans need theta >= 1")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return (domain.sizes[domain.index(self.clock)], self.theta)

    def answer(self, records: DomainRecords) -> np.ndarray:
        individuals = _individuals(records, self.describe())
        rank = np.asarray(self.ranks, dtype=np.int64)[records.codes[:, records.domain.index(self.clock)]]
        order = np.lexsort((rank, individuals))  # by individual, then by clock
        people, starts, rows = np.unique(individuals[order], return_index=True, return_counts=True)
        rows = np.minimum(rows, self.theta)  # bounding keeps at most theta; each individual stays one count either way
        first = records.codes[order[starts], records.domain.index(self.clock)].astype(np.int64)
        n_codes = records.domain.sizes[records.domain.index(self.clock)]
        return np.bincount(first * self.theta + rows - 1, minlength=n_codes * self.theta).reshape(n_codes, self.theta)

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        return _one_count(self, unit, "its first row and its number of rows after bounding to theta")

    def describe(self) -> str:
        return f"individuals by first {self.clock} and rows (1 to {self.theta})"


def clock_patterns(positions: int, theta: int) -> tuple[tuple[int, ...], ...]:
    """Every set of 1 to ``theta`` of ``positions`` clock positions (sorted tuples), by size, then in
    lexicographic order: the cells of ``IndividualPatterns``.  Public."""
    return tuple(c for k in range(1, min(theta, positions) + 1) for c in itertools.combinations(range(positions), k))


def clock_pattern_count(positions: int, theta: int) -> int:
    """len(clock_patterns(positions, theta)), counted rather than listed (a long clock has too many sets to
    list).  Public."""
    return sum(math.comb(positions, k) for k in range(1, min(theta, positions) + 1))


@dataclass(frozen=True)
class IndividualPatterns:
    """The number of individuals by the set of positions their rows hold on the clock (a code's position: its
    rank in ``ranks``), of 1 to ``theta`` positions (the unit's theta), in the order ``clock_patterns`` gives:
    an individual with rows in 2015, 2016 and 2018 counts in the cell of those three positions, where
    ``IndividualSpans`` counts it as three rows from 2015.  An individual with more rows than theta (never so
    after bounding) counts by its first theta in clock order.  Shape: (number of patterns,).  Reads each row's
    individual: records without one are refused."""

    clock: str
    ranks: tuple[int, ...]
    theta: int
    integer = True
    raw_columns = ()  # no raw numeric value is read: codes only

    def patterns(self) -> tuple[tuple[int, ...], ...]:
        return clock_patterns(len(self.ranks), self.theta)

    def validate(self, domain: Domain) -> None:
        _check_clock(domain, self.clock, self.ranks, f"individual patterns by {self.clock}")
        if self.theta < 1:
            raise ValueError("individual patterns need theta >= 1")
        if len(self.ranks) > 62:
            raise ValueError(f"individual patterns by {self.clock}: at most 62 clock values")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        return (len(self.patterns()),)

    def answer(self, records: DomainRecords) -> np.ndarray:
        individuals = _individuals(records, self.describe())
        rank = np.asarray(self.ranks, dtype=np.int64)[records.codes[:, records.domain.index(self.clock)]]
        order = np.lexsort((rank, individuals))  # by individual, then by clock
        people, index = np.unique(individuals[order], return_inverse=True)
        starts = np.searchsorted(index, np.arange(len(people)))
        kept = np.arange(len(order)) - starts[index] < self.theta  # each individual's first theta rows
        masks = np.zeros(len(people), dtype=np.int64)
        np.bitwise_or.at(masks, index[kept], np.left_shift(1, rank[order][kept]))
        known = np.array([sum(1 << t for t in p) for p in self.patterns()], dtype=np.int64)
        sort = np.argsort(known)
        ordered = known[sort]
        at = np.searchsorted(ordered, masks)
        assert (ordered[np.minimum(at, len(known) - 1)] == masks).all(), "every kept row set is a cell"
        cell = sort[at]
        return np.bincount(cell, minlength=len(known))

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        return _one_count(self, unit, "the positions of its rows after bounding to theta")

    def describe(self) -> str:
        return f"individuals by the {self.clock} values of their rows (1 to {self.theta})"


@dataclass(frozen=True)
class Transitions:
    """For each pair of consecutive rows of one individual (its rows in the order ``ranks`` of ``clock``'s
    codes; rows alike in the clock in their original order), the count per cell (the first row's clock code,
    the first row's code of ``column``, the second row's code); with ``stays`` (for columns with many codes)
    the count per cell (the first row's clock code, whether the second row's code equals the first's: 0 it
    does, 1 it does not).  Shape: clock codes × column codes × column codes, or clock codes × 2 with
    ``stays``.  An individual with at most
    theta rows gives at most theta - 1 pairs.  Reads each row's individual: records without one are refused."""

    column: str
    clock: str
    ranks: tuple[int, ...]
    stays: bool = False
    integer = True
    raw_columns = ()  # no raw numeric value is read: codes only

    def validate(self, domain: Domain) -> None:
        _check_clock(domain, self.clock, self.ranks, f"transitions of {self.column}")
        _check_columns(domain, (self.column,), None, f"transitions of {self.column}")
        if self.column == self.clock:
            raise ValueError(f"transitions of {self.column}: the column is the clock")

    def shape(self, domain: Domain) -> tuple[int, ...]:
        k = domain.sizes[domain.index(self.column)]
        clocks = domain.sizes[domain.index(self.clock)]
        return (clocks, 2) if self.stays else (clocks, k, k)

    def answer(self, records: DomainRecords) -> np.ndarray:
        individuals = _individuals(records, self.describe())
        domain = records.domain
        clock = records.codes[:, domain.index(self.clock)].astype(np.int64)
        value = records.codes[:, domain.index(self.column)].astype(np.int64)
        order = np.lexsort((np.asarray(self.ranks, dtype=np.int64)[clock], individuals))
        same = individuals[order][1:] == individuals[order][:-1]  # consecutive rows of one individual
        first, second = order[:-1][same], order[1:][same]
        shape = self.shape(domain)
        if self.stays:
            cells = clock[first] * 2 + (value[second] != value[first])
        else:
            cells = (clock[first] * shape[1] + value[first]) * shape[2] + value[second]
        return np.bincount(cells, minlength=int(np.prod(shape))).reshape(shape)

    def sensitivity(self, unit: PrivacyUnit) -> Sensitivity:
        pairs = unit.theta - 1
        what = self.describe()
        if pairs == 0:
            raise ValueError(f"{what}: with theta 1 an individual has no two rows (nothing to measure)")
        if unit.separates((self.clock,)):
            return Sensitivity(pairs, math.sqrt(pairs),
                               f"{what}: one individual (theta={unit.theta} rows) gives at most {pairs} pairs of "
                               f"consecutive rows, each one count; no two of its rows share {self.clock}, so its "
                               f"pairs lie in distinct cells (the first row's {self.clock}): sqrt({pairs}) in L2")
        return Sensitivity(pairs, pairs, f"{what}: one individual (theta={unit.theta} rows) gives at most {pairs} "
                                         f"pairs of consecutive rows, each one count, possibly in one cell")

    def describe(self) -> str:
        return f"{'stays' if self.stays else 'transitions'} of {self.column} between consecutive {self.clock}"


BY_INDIVIDUAL = (IndividualSpans, IndividualPatterns, Transitions)  # the kinds that read each row's individual

QUERY_KINDS = (Marginal, Thresholds, LinearSums, DependencyScores, CellHistogram, Intervals, Moments,
               LogisticGradients, IndividualSpans, IndividualPatterns, Transitions)
Query = (Marginal | Thresholds | LinearSums | DependencyScores | CellHistogram | Intervals | Moments
         | LogisticGradients | IndividualSpans | IndividualPatterns | Transitions)
