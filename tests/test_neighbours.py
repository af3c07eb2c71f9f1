"""Neighbouring tables: for every kind of query the private table answers, the exact change of the
answer when one individual is added is within the sensitivity the table records for it.

D has 200 rows of 80 individuals; D' adds one individual with theta + 2 rows, which the table's
contribution bounding cuts to theta.  Their rows are either clustered (all in one cell, numeric
values at the extremes that meet every threshold and maximise the sums) or spread at random.
The exact answers are read from the table's records (a test's privilege; tests/test_boundary.py
keeps methods away from them); the recorded sensitivity from the ledger after a measurement.
"""
import numpy as np
import pytest

from dpsyn.lib.records.domain import Domain
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.private_table import PrivateRecords, PrivateTable
from dpsyn.lib.privacy.queries import (QUERY_KINDS, CellHistogram, DependencyScores, IndividualPatterns, IndividualSpans,
                                       Intervals, LinearSums, LogisticGradients, Marginal, Moments, Thresholds,
                                       Transitions)
from dpsyn.lib.privacy.unit import PrivacyUnit

DOMAIN = Domain(("A", "B", "G", "X", "Y"), (3, 4, 2, 5, 5), {"X": (0.0, 100.0), "Y": (-5.0, 5.0)})
QUERIES = [
    Marginal(()),
    Marginal(("A",)),
    Marginal(("A", "B")),
    Marginal(("G", "A", "B")),
    Marginal(("X", "Y")),
    Marginal(("X", "Y"), (2, 3)),
    Marginal(("A", "B"), (1, 2)),  # B coarsened: under distinct B (below) its cells no longer separate rows
    Thresholds(("X",), ((1.0,),), (0.1, 0.5, 0.9)),
    Thresholds(("X", "Y"), ((1.0, 0.5), (-1.0, 2.0), (0.3, -0.7)), (-0.5, 0.0, 0.25, 0.5, 1.0), by=("G",)),
    LinearSums(("X",), ((1.0,),)),
    LinearSums(("X", "Y"), ((1.0, 1.0), (2.0, -1.0), (-0.5, -0.5)), by=("A",)),
    DependencyScores((("A", "B"), ("A", "G"), ("B", "G"))),
    CellHistogram("X", ("G",), ((-1.0, 0.0, 30.0, 60.0, 100.0), (10.0, 20.0, 40.0, 50.0, 90.0))),
    CellHistogram("Y", ("A",), ((-5.0, 0.0, 5.0), (-6.0, -1.0, 1.0), (2.0, 3.0, 4.0))),
    Intervals(("X",), (1.0,), (0.1, 0.5, 0.9)),
    Intervals(("X", "Y"), (0.6, -0.8), (-0.5, 0.0, 0.3), by=("A", "G")),
    Moments(("X",)),
    Moments(("X", "Y"), by=("A", "G")),
    Moments(("X", "Y"), bounds=((10.0, 40.0), (-2.0, 3.0))),  # declared clipping bounds inside the ranges
    LogisticGradients(("A", "B", "X"), "G", ((0.0,) * 13, (0.0,) * 13)),
    LogisticGradients(("B",), "A", tuple(tuple(np.linspace(-3, 3, 5) * k) for k in (1.0, -2.0, 0.5))),
]
THETAS = range(1, 8)
B_RANKS = (2, 0, 3, 1)  # B's codes in an order of their own: the clock of the queries over an individual's rows


def by_individual(theta: int) -> list:
    """The queries over an individual's rows for ``theta`` (transitions need two rows)."""
    spans = [IndividualSpans("B", B_RANKS, theta), IndividualSpans("G", (0, 1), theta),
             IndividualPatterns("B", B_RANKS, theta), IndividualPatterns("G", (0, 1), theta)]
    return spans + ([Transitions("A", "B", B_RANKS), Transitions("X", "B", B_RANKS, stays=True),
                     Transitions("A", "G", (1, 0))] if theta > 1 else [])
BASE_ROWS, INDIVIDUALS = 200, 80


def neighbours(theta: int, clustered: bool, seed: int):
    """(D, D') as (codes, numeric, ids): D' = D plus one individual with theta + 2 rows."""
    rng = np.random.default_rng(seed)

    def rows(n):
        codes = np.column_stack([rng.integers(0, s, n) for s in DOMAIN.sizes]).astype(np.int32)
        x = rng.uniform(0, 100, n)
        y = np.where(rng.random(n) < 0.1, np.nan, rng.uniform(-5, 5, n))
        return codes, x, y
    codes, x, y = rows(BASE_ROWS)
    ids = rng.integers(0, INDIVIDUALS, BASE_ROWS).astype(str).astype(object)
    extra_codes, extra_x, extra_y = rows(theta + 2)
    if clustered:
        extra_codes[:] = 0
        extra_x[:] = 0.0   # scaled 0: meets every threshold >= 0
        extra_y[:] = 5.0   # scaled 1
    d = (codes, {"X": x, "Y": y}, ids)
    d2 = (np.vstack([codes, extra_codes]), {"X": np.r_[x, extra_x], "Y": np.r_[y, extra_y]},
          np.r_[ids, np.full(theta + 2, "newcomer", dtype=object)])
    return d, d2


def table(data, theta, seed=0) -> PrivateTable:
    codes, numeric, ids = data
    return PrivateTable(PrivateRecords(codes, numeric, ids, by_individual=True), DOMAIN, PrivacyUnit(theta),
                        Ledger(1.0, 1e-9), np.random.default_rng(seed), np.random.default_rng(99))


def exact(private: PrivateTable, query) -> np.ndarray:
    return np.asarray(private._answer(query), dtype=np.float64)


def recorded_sensitivity(private: PrivateTable, query) -> float:
    private.measure(query, 5e-4)
    return private._ledger.charges[-1].sensitivity


def test_every_query_kind_is_covered():
    assert {type(q) for q in QUERIES + by_individual(2)} == set(QUERY_KINDS)


@pytest.mark.parametrize("theta", THETAS)
@pytest.mark.parametrize("clustered", [True, False], ids=["clustered", "spread"])
def test_one_individual_moves_each_answer_by_at_most_its_recorded_sensitivity(theta, clustered):
    for seed in range(3):
        d, d2 = neighbours(theta, clustered, seed)
        small, large = table(d, theta), table(d2, theta)
        for query in QUERIES + by_individual(theta):
            change = exact(large, query) - exact(small, query)
            declared = query.sensitivity(PrivacyUnit(theta))
            assert np.abs(change).sum() <= declared.l1 + 1e-9, (query, seed)
            assert np.sqrt((change ** 2).sum()) <= declared.l2 + 1e-9, (query, seed)
            assert declared.l2 <= recorded_sensitivity(large, query) + 1e-12, query


@pytest.mark.parametrize("theta", THETAS)
def test_the_bounds_are_reached_where_they_are_exact(theta):
    """Clustered rows reach theta on a marginal and theta*sqrt(k) on k prefix thresholds: a table that
    scaled noise for one row (or ignored the thresholds' count) would be caught."""
    d, d2 = neighbours(theta, True, 0)
    small, large = table(d, theta), table(d2, theta)
    for query, bound in ((Marginal(("A", "B")), theta), (Thresholds(("X",), ((1.0,),), (0.1, 0.5, 0.9)),
                                                          theta * np.sqrt(3)), (QUERIES[12], theta),
                          (QUERIES[14], theta)):
        change = exact(large, query) - exact(small, query)
        assert np.sqrt((change ** 2).sum()) == pytest.approx(bound)


@pytest.mark.parametrize("theta", THETAS)
@pytest.mark.parametrize("clustered", [True, False], ids=["clustered", "spread"])
def test_selection_scores_move_by_at_most_the_recorded_sensitivity(theta, clustered):
    candidates = [Marginal(("A",)), Marginal(("A", "B")), QUERIES[8], QUERIES[7], QUERIES[-1]]
    weights, penalties = [1.0, 2.0, 0.5, 3.0, 1.5], [0.0, 3.0, 1.0, 2.5, 0.5]
    for seed in range(3):
        d, d2 = neighbours(theta, clustered, seed)
        small, large = table(d, theta), table(d2, theta)
        rng = np.random.default_rng(seed)
        references = [rng.uniform(0, 30, q.shape(DOMAIN)) for q in candidates]

        def scores(private):
            return np.array([w * (np.abs(exact(private, q) - r).sum() - p)
                             for q, r, w, p in zip(candidates, references, weights, penalties)])
        large.select(candidates, references, 1e-3, weights=weights, penalties=penalties)
        recorded = large._ledger.charges[-1].sensitivity
        assert np.abs(scores(large) - scores(small)).max() <= recorded


def test_bounding_keeps_theta_rows_of_each_individual():
    theta = 3
    _, d2 = neighbours(theta, True, 0)
    kept = exact(table(d2, theta), Marginal(()))
    ids = d2[2]
    expected = sum(min(count, theta) for count in np.unique(ids, return_counts=True)[1])
    assert kept == expected


def test_queries_and_selections_are_recorded_in_order():
    d, _ = neighbours(2, False, 0)
    private = table(d, 2)
    first = private.measure(Marginal(("A",)), 1e-3)
    chosen = private.select([Marginal(("A",)), Marginal(("B",))], [np.zeros(3), np.zeros(4)], 1e-3, k=2)
    assert private.released == (first, chosen) and sorted(chosen.chosen) == [0, 1]
    assert [c.step for c in private._ledger.charges] == ["1-way marginal A", "selection of 2 of 2 candidates"]


# Distinct columns (e.g. Sprint 2's YEAR): one individual's rows never share B after bounding.
BY_B = [
    Marginal(("B",)),
    Marginal(("A", "B")),
    Marginal(("G", "A", "B")),
    Thresholds(("X", "Y"), ((1.0, 0.5), (-1.0, 2.0)), (-0.5, 0.0, 0.5, 1.0), by=("B",)),
    LinearSums(("X", "Y"), ((1.0, 1.0), (2.0, -1.0)), by=("A", "B")),
    CellHistogram("X", ("B",), ((-1.0, 0.0, 50.0, 100.0),) * 4),
    Intervals(("X", "Y"), (1.0, 1.0), (0.5, 1.0, 1.5), by=("B",)),
    Moments(("X", "Y"), by=("B",)),
    Moments(("X", "Y"), by=("B",), bounds=((10.0, 40.0), (-2.0, 3.0))),
]


def distinct_neighbours(theta: int, seed: int):
    """(D, D') where the newcomer's theta + 2 rows are clustered except that B cycles through its
    values (so some repeat when theta + 2 > 4, and bounding must drop them)."""
    d, d2 = neighbours(theta, True, seed)
    codes = d2[0].copy()
    codes[-(theta + 2):, DOMAIN.index("B")] = np.arange(theta + 2) % 4
    return d, (codes, d2[1], d2[2])


def distinct_table(data, theta) -> PrivateTable:
    codes, numeric, ids = data
    return PrivateTable(PrivateRecords(codes, numeric, ids, by_individual=True), DOMAIN, PrivacyUnit(theta, ("B",)),
                        Ledger(10.0, 1e-9), np.random.default_rng(0), np.random.default_rng(99))


@pytest.mark.parametrize("theta", THETAS)
def test_distinct_columns_lower_the_l2_bound_of_queries_over_them(theta):
    for seed in range(3):
        d, d2 = distinct_neighbours(theta, seed)
        small, large = distinct_table(d, theta), distinct_table(d2, theta)
        for query in BY_B + QUERIES + by_individual(theta):
            change = exact(large, query) - exact(small, query)
            declared = query.sensitivity(PrivacyUnit(theta, ("B",)))
            assert np.abs(change).sum() <= declared.l1 + 1e-9, (query, seed)
            assert np.sqrt((change ** 2).sum()) <= declared.l2 + 1e-9, (query, seed)
            assert declared.l2 <= recorded_sensitivity(large, query) + 1e-12, query
        for query in BY_B:  # the lower bound applies exactly to the queries whose cells include B
            assert query.sensitivity(PrivacyUnit(theta, ("B",))).l2 < query.sensitivity(PrivacyUnit(theta)).l2 or theta == 1
    change = exact(large, Marginal(("A", "B"))) - exact(small, Marginal(("A", "B")))
    assert np.sqrt((change ** 2).sum()) == pytest.approx(np.sqrt(min(theta, 4)))  # reached while B has room
    assert Marginal(("A", "B"), (1, 2)).sensitivity(PrivacyUnit(theta, ("B",))).l2 == theta  # B in 2s: rows may share a cell


def test_bounding_keeps_one_row_per_individual_and_distinct_value():
    _, d2 = distinct_neighbours(7, 0)
    kept = exact(distinct_table(d2, 7), Marginal(()))
    codes, _, ids = d2
    pairs = {(i, b) for i, b in zip(ids, codes[:, DOMAIN.index("B")])}
    per_id = {}
    for i, _ in pairs:
        per_id[i] = per_id.get(i, 0) + 1
    assert kept == sum(min(n, 7) for n in per_id.values())


def test_real_valued_sums_are_exact_sums_of_fixed_point_rows_in_any_order():
    """exact_cell_sums rounds each row's values to multiples of q and adds them exactly: the float answer is
    the rational sum of the rounded rows (brute force with Fractions), whatever the order of the rows."""
    from fractions import Fraction

    from dpsyn.lib.privacy.queries import exact_cell_sums, fixed_point_step
    rng = np.random.default_rng(4)
    values = rng.uniform(-3.0, 3.0, (500, 2)) * np.array([1.0, 1e-7])
    cells = rng.integers(0, 3, 500)
    got = exact_cell_sums(cells, values, 3, 3.0)
    q = Fraction(fixed_point_step(3.0))
    assert q == Fraction(1, 2 ** 18)  # 2**2 >= 3, 20 bits below it
    for c in range(3):
        for k in range(2):
            exact = sum(round(Fraction(v) / q) * q for v in values[cells == c, k])
            assert Fraction(got[c, k]) == exact
    order = rng.permutation(500)
    assert np.array_equal(exact_cell_sums(cells[order], values[order], 3, 3.0), got)


def test_a_rows_w_dot_x_is_the_same_whatever_rows_come_before_it():
    """w·x decides a row's interval or threshold cell and its fixed-point value: it must be a function of that
    row alone.  A BLAS product rounds some rows differently when one row is put in front of them."""
    from dpsyn.lib.privacy.queries import row_dot
    rng = np.random.default_rng(0)
    x, w = rng.random((20011, 8)), rng.normal(size=(3, 8))
    alone = row_dot(x, w)
    for extra in (np.zeros((1, 8)), rng.random((7, 8))):
        assert np.array_equal(row_dot(np.vstack([extra, x]), w)[len(extra):], alone)
    assert np.array_equal(row_dot(x[::-1], w)[::-1], alone)


@pytest.mark.parametrize("theta", THETAS[1:])
def test_an_individuals_pairs_reach_the_transition_bounds(theta):
    """The newcomer's kept rows all alike in A: its theta - 1 pairs share a cell (L2 theta - 1) unless B, the
    clock, is distinct per individual, where they take distinct cells (L2 sqrt of the pairs, B's 4 codes
    allowing at most 3); its span is one count either way."""
    d, d2 = neighbours(theta, True, 0)
    plain = Transitions("A", "G", (1, 0))
    change = exact(table(d2, theta), plain) - exact(table(d, theta), plain)
    assert np.sqrt((change ** 2).sum()) == pytest.approx(theta - 1) == plain.sensitivity(PrivacyUnit(theta)).l2
    d, d2 = distinct_neighbours(theta, 0)
    by_b = Transitions("A", "B", B_RANKS)
    change = exact(distinct_table(d2, theta), by_b) - exact(distinct_table(d, theta), by_b)
    pairs = min(theta, 4) - 1
    assert np.sqrt((change ** 2).sum()) == pytest.approx(np.sqrt(pairs))
    assert by_b.sensitivity(PrivacyUnit(theta, ("B",))).l2 == pytest.approx(np.sqrt(theta - 1))
    for spans in (IndividualSpans("B", B_RANKS, theta), IndividualPatterns("B", B_RANKS, theta)):
        change = exact(distinct_table(d2, theta), spans) - exact(distinct_table(d, theta), spans)
        assert np.abs(change).sum() == 1


def test_queries_over_individuals_need_their_ids():
    d, _ = neighbours(3, False, 0)
    codes, numeric, ids = d
    no_ids = PrivateTable(PrivateRecords(codes, numeric), DOMAIN, PrivacyUnit(3), Ledger(1.0, 1e-9),
                          np.random.default_rng(0))
    ids_not_held = PrivateTable(PrivateRecords(codes, numeric, ids), DOMAIN, PrivacyUnit(3), Ledger(1.0, 1e-9),
                                np.random.default_rng(0), np.random.default_rng(99))
    for private in (no_ids, ids_not_held):  # refused before any charge
        for query in (IndividualSpans("B", B_RANKS, 3), IndividualPatterns("B", B_RANKS, 3),
                      Transitions("A", "B", B_RANKS)):
            with pytest.raises(ValueError, match="which this table does not hold"):
                private.measure(query, 1e-3)
        assert private._ledger.spent == 0.0 and not private._ledger.charges and not private.released
    with pytest.raises(ValueError, match="needs ids"):
        PrivateTable(PrivateRecords(codes, numeric, by_individual=True), DOMAIN, PrivacyUnit(3), Ledger(1.0, 1e-9),
                     np.random.default_rng(0))
    with pytest.raises(ValueError, match="theta 3, the unit's is 2"):
        table(d, 2).measure(IndividualSpans("B", B_RANKS, 3), 1e-3)


def test_spans_and_transitions_on_a_tiny_table():
    """Brute force: two individuals, B the clock in the order B_RANKS (codes 1, 3, 0, 2)."""
    codes = np.zeros((5, 5), dtype=np.int32)
    codes[:, DOMAIN.index("B")] = [0, 1, 3, 2, 1]
    codes[:, DOMAIN.index("A")] = [2, 0, 1, 1, 2]
    ids = np.array(["p", "p", "p", "q", "q"], dtype=object)
    private = table((codes, {"X": np.zeros(5), "Y": np.zeros(5)}, ids), 3)
    spans = exact(private, IndividualSpans("B", B_RANKS, 3))
    expected = np.zeros((4, 3))
    expected[1, 2] = 1  # p: B 1, 3, 0 in clock order, first B 1, three rows
    expected[1, 1] = 1  # q: B 1, 2, first B 1, two rows
    assert (spans == expected).all()
    moves = exact(private, Transitions("A", "B", B_RANKS))
    expected = np.zeros((4, 3, 3))
    expected[1, 0, 1] = 1  # p: (B 1, A 0) -> (B 3, A 1)
    expected[3, 1, 2] = 1  # p: (B 3, A 1) -> (B 0, A 2)
    expected[1, 2, 1] = 1  # q: (B 1, A 2) -> (B 2, A 1)
    assert (moves == expected).all()
    stays = exact(private, Transitions("A", "B", B_RANKS, stays=True))
    assert (stays == [[0, 0], [0, 2], [0, 0], [0, 1]]).all()  # every pair moves: two from B 1, one from B 3
    query = IndividualPatterns("B", B_RANKS, 3)
    patterns = query.patterns()
    assert len(patterns) == 4 + 6 + 4 and patterns[:4] == ((0,), (1,), (2,), (3,))
    counts = dict(zip(patterns, exact(private, query)))
    # positions are ranks: p holds B 0, 1, 3 (positions 2, 0, 1), q holds B 1, 2 (positions 0, 3: a gap)
    assert counts.pop((0, 1, 2)) == 1 and counts.pop((0, 3)) == 1 and not any(counts.values())
