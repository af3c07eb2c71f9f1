"""Exchanging a column's values among records that agree on others (lib/records/exchange.py) and the adaptive
model's use of it (method/adaptive.py ``Model.exchange_unmeasured``)."""
import itertools

import numpy as np

from dpsyn.lib.records.constraints import Box, Boxes
from dpsyn.lib.records.exchange import exchange_within
from dpsyn.lib.records.marginals import count_marginal
from dpsyn.method.adaptive import Model

SIZES = (3, 4, 2, 5)


def clumped(n: int = 3000, seed: int = 0) -> np.ndarray:
    """Codes where column 3 copies column 0 (as GUM's duplicates copy whole records) and column 1
    copies column 2's parity."""
    rng = np.random.default_rng(seed)
    a, c = rng.integers(0, 3, n), rng.integers(0, 2, n)
    b = 2 * rng.integers(0, 2, n) + c
    d = np.where(rng.random(n) < 0.9, a, rng.integers(0, 5, n))
    return np.column_stack([a, b, c, d]).astype(np.int32)


def marginal(records, cols):
    return count_marginal(records[:, list(cols)], tuple(SIZES[c] for c in cols))


def test_exchange_keeps_every_marginal_over_the_column_and_its_blocks_and_those_without_it():
    records = clumped()
    before = records.copy()
    moved = exchange_within(records, 3, [1, 2], np.random.default_rng(1))
    assert moved > 0 and moved == np.count_nonzero(records[:, 3] != before[:, 3])
    for r in (1, 2, 3):
        for cols in itertools.combinations(range(4), r):
            if 3 not in cols or set(cols) - {3} <= {1, 2}:
                assert np.array_equal(marginal(records, cols), marginal(before, cols)), cols
    # column 3's copy of column 0 is gone: 0.9 before, about a random match after
    assert np.mean(records[:, 3] == records[:, 0]) < 0.4 < np.mean(before[:, 3] == before[:, 0])


def test_exchange_among_many_wide_columns_keeps_each_block_whole():
    """The blocks' one-integer key (radices 1000 ** 8 pass int64) is ranked on the way, not overflowed."""
    rng = np.random.default_rng(4)
    records = np.column_stack([rng.integers(0, 2, (4000, 8)) * 999, rng.integers(0, 5, 4000)]).astype(np.int32)
    before = records.copy()
    assert exchange_within(records, 8, list(range(8)), np.random.default_rng(5)) > 0
    rows = lambda r: sorted(map(tuple, r.tolist()))  # noqa: E731
    assert rows(records) == rows(before)  # every value stayed in its block: the same multiset of records


def test_exchange_without_blocks_permutes_the_whole_column_under_a_seed():
    records, again = clumped(), clumped()
    exchange_within(records, 3, [], np.random.default_rng(2))
    exchange_within(again, 3, [], np.random.default_rng(2))
    assert np.array_equal(records, again)
    assert np.array_equal(np.sort(records[:, 3]), np.sort(clumped()[:, 3]))


def test_the_model_exchanges_only_what_was_not_measured_and_keeps_records_out_of_boxes():
    records = clumped()
    box = Box(columns=(0, 3), masks=(np.array([True, False, False]), np.array([False, False, False, False, True])),
              fix=3, label="no a=0 with d=4")
    records[box.contains(records), 3] = 0
    model = Model(("a", "b", "c", "d"), SIZES, (), boxes=Boxes((box,)))
    model.records = records.copy()
    for cols in [(0,), (1,), (2,), (3,), (1, 2)]:
        model.noisy[cols] = (marginal(records, cols).astype(float), 1.0)
    model.exchange_unmeasured([0, 1, 2, 3], np.random.default_rng(3))
    for cols in [(0,), (1,), (2,), (3,), (1, 2), (0, 3)]:  # every measured marginal, and a+d: box mates
        assert np.array_equal(marginal(model.records, cols), marginal(records, cols)), cols
    assert not box.contains(model.records).any()
    # b and c were measured together: their association stays; b with d (unmeasured) goes
    assert np.array_equal(model.records[:, 1] % 2, model.records[:, 2])
    assert not np.array_equal(model.records[:, 1], records[:, 1])
