"""PrivSyn-style marginal selection: the score's sensitivity, the greedy rule, the budget split;
and reuse of work for equal rounded group sizes."""
import itertools

import numpy as np
import pytest

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import parse_schema
from dpsyn.lib.records.marginals import count_marginal
from dpsyn.lib.privacy.queries import independence_gap
from dpsyn.method.planner import ONE_WAY
from dpsyn.method.selection import allocate, greedy_pairs
from helpers import run_method

RUNS = [{"epsilon": 1, "delta": 1e-9, "max_records": 10 ** 5, "max_records_per_individual": 1}]


def gap(codes, sizes):
    return independence_gap(count_marginal(codes, sizes))


def test_one_record_moves_the_independence_gap_by_at_most_four():
    rng = np.random.default_rng(0)
    sizes = (3, 4)
    worst = 0.0
    for n in (1, 2, 3, 5, 20, 200):
        for _ in range(300):
            codes = np.column_stack([rng.integers(0, s, n) for s in sizes])
            if rng.random() < 0.5:  # skewed tables push the product term hardest
                codes[: n // 2] = 0
            extra = np.array([[rng.integers(0, 3), rng.integers(0, 4)]])
            change = abs(gap(np.vstack([codes, extra]), sizes) - gap(codes, sizes))
            worst = max(worst, change)
    assert 1.0 <= worst <= 4.0


def test_greedy_keeps_dependent_pairs_when_the_budget_allows_and_none_when_it_is_tiny():
    sizes = (2, 2, 2, 2)
    pairs = list(itertools.combinations(range(4), 2))
    scores = np.array([5000.0, 0, 0, 0, 0, 3000.0])  # (0,1) and (2,3) strongly dependent
    chosen = greedy_pairs(scores, pairs, sizes, [0, 1, 2, 3], theta=1, rho=1.0)
    assert chosen == [(0, 1), (2, 3)]
    assert greedy_pairs(scores, pairs, sizes, [0, 1, 2, 3], theta=1, rho=1e-9) == []
    assert greedy_pairs(-scores, pairs, sizes, [0, 1, 2, 3], theta=1, rho=1.0) == []


def test_allocation_is_proportional_to_cells_two_thirds_and_sums_exactly():
    rhos = allocate([(0,), (0, 1)], (8, 8), 0.3)
    assert sum(rhos) == 0.3
    assert rhos[1] / rhos[0] == pytest.approx(64 ** (2 / 3) / 8 ** (2 / 3))


def test_selection_measures_the_dependent_pair_on_real_structure():
    schema = parse_schema({"runs": RUNS, "schema": {c: {"dtype": "int", "values": list(range(4))} for c in "ABCD"}})
    encoder = Encoder.fit(schema)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 20_000)
    codes = np.column_stack([a, (a + (rng.random(20_000) < 0.1)) % 4, rng.integers(0, 4, 20_000),
                             rng.integers(0, 4, 20_000)]).astype(np.int32)
    _, ledger = run_method("dpsyn", encoder, codes, epsilon=0.1, max_records=10 ** 5, regime=ONE_WAY,
                           marginals="select")
    two_way = [c.step for c in ledger.charges if c.step.startswith("2-way")]
    assert two_way[0] == "2-way marginal A × B" and len(two_way) < 6  # the strongest first, not all


def test_equal_rounded_group_sizes_share_one_set_of_records():
    schema = parse_schema({"runs": RUNS,
                           "schema": {"G": {"dtype": "int", "values": list(range(6))},
                                      "X": {"dtype": "int", "values": list(range(5))},
                                      "Y": {"dtype": "int", "values": list(range(3))}}})
    encoder = Encoder.fit(schema)
    rng = np.random.default_rng(0)
    codes = np.column_stack([np.repeat(np.arange(6), 500), rng.integers(0, 5, 3000),
                             rng.integers(0, 3, 3000)]).astype(np.int32)
    out, _ = run_method("dpsyn", encoder, codes, epsilon=5.0, groups=("G",), max_records=10 ** 5, regime=ONE_WAY,
                        group_round=100)
    blocks = [out[out[:, 0] == g][:, 1:] for g in range(6)]
    assert all(len(b) == 500 for b in blocks)
    assert all(np.array_equal(blocks[0], b) for b in blocks[1:])


def test_the_independence_gap_is_the_exact_gap_correctly_rounded():
    from fractions import Fraction
    rng = np.random.default_rng(2)
    for _ in range(20):
        joint = rng.integers(0, 10 ** 6, (4, 7))
        n = int(joint.sum())
        exact = sum(abs(Fraction(int(joint[a, b])) - Fraction(int(joint[a].sum()) * int(joint[:, b].sum()), n))
                    for a in range(4) for b in range(7))
        assert independence_gap(joint) == float(exact)
        assert independence_gap(joint.astype(np.float64)) == float(exact)
