"""Large columns split into coarse code and offset (method/split_columns.py) and the adaptive rounds
that measure them coarsely."""
import itertools

import numpy as np
import pandas as pd
import pytest

from dpsyn.api import release
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import parse_schema
from dpsyn.lib.records.constraints import Box, Boxes, repair
from dpsyn.lib.records.marginals import coarse_matrix, count_marginal
from dpsyn.lib.tuning import T
from dpsyn.method.adaptive import Model, candidate_keys
from dpsyn.method.split_columns import SplitColumns
from helpers import noisy_pairs, run_method, with_rounds

SIZES = (85, 3, 40, 99)  # columns 0, 2 and 3 are split (widths 10, 7 and 10); column 1 is not


def layout() -> SplitColumns:
    return SplitColumns.choose(SIZES, [0, 1, 2, 3])


def records(n=2000, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, s, n) for s in SIZES]).astype(np.int32)


def test_only_columns_of_many_codes_are_split_in_widths_of_about_their_square_root():
    split = layout()
    assert split.split == (0, 2, 3) and SIZES[1] <= T.split_columns_split_above < SIZES[2]
    assert split.widths == (10, 1, 7, 10)
    assert split.model_sizes == (9, 3, 6, 10, 10, 7, 10)
    assert SplitColumns.choose(SIZES, [1, 2]).split == (2,)  # only among the candidates


def test_records_survive_the_split_and_impossible_offsets_wrap_within_the_last_coarse_code():
    split, codes = layout(), records()
    np.testing.assert_array_equal(split.decode(split.encode(codes)), codes)
    model = split.encode(codes[:3])
    model[:, 0], model[:, split.offset(0)] = 8, [4, 5, 9]  # age codes 84 (the last), 85 and 89 do not exist
    np.testing.assert_array_equal(split.decode(model)[:, 0], [84, 80, 84])


@pytest.mark.parametrize("cols", [(0,), (1,), (0, 1), (0, 3), (1, 2, 3), (2, 0)])
def test_every_reading_of_a_marginal_matches_the_private_query_and_counts_from_model_records(cols):
    split, codes = layout(), records()
    model_records = split.encode(codes)
    splits = [j for j in cols if split.widths[j] > 1]
    for coarse in (c for r in range(len(splits) + 1) for c in itertools.combinations(splits, r)):
        key = split.key(cols, coarse)
        widths = np.array(split.query_widths(key))
        query = count_marginal(codes[:, list(cols)] // widths, split.query_shape(key))  # what the table answers
        model = count_marginal(model_records[:, list(key)], tuple(split.model_sizes[c] for c in key))
        np.testing.assert_array_equal(split.from_query(key, query), model)
        np.testing.assert_array_equal(split.to_query(key, model), query)
        assert split.coarse(key) == tuple(j for j in cols if j in coarse)


def test_rounds_measure_a_pair_of_large_columns_coarsely_and_the_release_keeps_its_dependence():
    """A and B have 64 codes each and B follows A: the exact pair (4,096 cells) is mostly noise at
    this budget, the coarse one (8 × 8) is not, so a round measures it and the release correlates them."""
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10_000,
                                     "max_records_per_individual": 1}],
                           "schema": {"A": {"dtype": "int", "values": list(range(64))},
                                      "B": {"dtype": "int", "values": list(range(64))},
                                      "C": {"dtype": "int", "values": [0, 1]}}})
    rng = np.random.default_rng(0)
    n = 5000
    a = rng.integers(0, 64, n)
    b = np.clip(a + rng.integers(-3, 4, n), 0, 63)
    codes = np.column_stack([a, b, rng.integers(0, 2, n)]).astype(np.int32)
    out, ledger = run_method("dpsyn", Encoder.fit(schema), codes, epsilon=1.0, seed=2, regime="adaptive")
    measured = [c.step.split(": ", 1)[1] for c in ledger.charges
                if c.step.startswith("adaptive round") and not c.mechanism.startswith("exponential")]
    assert "2-way marginal A (codes in 8s) × B (codes in 8s)" in measured
    assert "2-way marginal A × B" not in measured
    assert np.corrcoef(out[:, 0], out[:, 1])[0, 1] > 0.9  # 0.99 in the private table, 0 if independent
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    assert ((out >= 0) & (out < np.array([64, 64, 2]))).all()


def test_the_model_answers_coarse_readings_in_a_batch_as_it_answers_each():
    split = layout()
    model = Model(("a", "b", "c", "d"), SIZES, (), layout=split)
    model.records, model.total = split.encode(records()), 2000.0
    model.noisy = {split.key((0, 2)): (None, 1.0)}  # a measured pair: its triples are candidates
    candidates = candidate_keys(model, [0, 1, 2, 3], 20_000)
    assert split.key((0, 2, 3), coarse=(0, 2, 3)) in candidates and split.key((0, 3), coarse=(3,)) in candidates
    for key, batch in zip(candidates, model.answers(candidates)):
        np.testing.assert_allclose(batch, model.answer(key), rtol=1e-12)


def test_a_split_column_by_the_group_columns_is_a_candidate_coarsely_and_the_model_answers_and_fits_it():
    """G (3 groups) × A (40 codes, split in 7s): with room for 50 cells only the coarse reading G × A (3 × 6) is a
    candidate; the model answers it as its per-group model of A summed over the offsets, and once measured each
    group's A follows it."""
    split = SplitColumns.choose((3, 40), [1])
    model = Model(("G", "A"), (3, 40), (0,), layout=split)
    rng = np.random.default_rng(4)
    codes = np.column_stack([rng.integers(0, 3, 600), rng.integers(0, 40, 600)]).astype(np.int32)
    model.records, model.total = split.encode(codes), 600.0
    a = split.key((1,))
    model.consistent = {(0,): np.array([100.0, 200.0, 300.0]),
                        a: split.from_query(a, np.bincount(codes[:, 1], minlength=40).astype(float))}
    coarse, exact = split.key((0, 1), coarse=(1,)), split.key((0, 1))
    candidates = candidate_keys(model, [1], 50)
    assert coarse in candidates and exact not in candidates
    for key, batch in zip(candidates, model.answers(candidates)):
        np.testing.assert_allclose(batch, model.answer(key), rtol=1e-12)
    np.testing.assert_allclose(model.answer(coarse), model.per_group_model(1).sum(axis=2), rtol=1e-12)
    measured = np.array([[100.0, 0, 0, 0, 0, 0], [0, 0, 200.0, 0, 0, 0], [0, 0, 0, 0, 150.0, 150.0]])
    model.consistent[coarse] = measured
    assert model.group_parts(1) == [coarse] and list(model.per_group_marginals()) == [1]
    np.testing.assert_allclose(model.per_group_model(1).sum(axis=2), measured, atol=1e-2)


def test_groups_keep_their_own_distribution_of_a_split_column():
    """G × A with A of 40 codes (split in 7s) and G's three groups far apart on A: the rounds measure
    G × A (exactly or by coarse code) and each group of the release keeps its own range of A."""
    schema = parse_schema({"runs": [{"epsilon": 4, "delta": 1e-9, "max_records": 10_000,
                                     "max_records_per_individual": 1}],
                           "schema": {"G": {"dtype": "str", "values": ["a", "b", "c"]},
                                      "A": {"dtype": "int", "values": list(range(40))},
                                      "C": {"dtype": "int", "values": [0, 1]}}})
    rng = np.random.default_rng(1)
    n = 6000
    g = rng.integers(0, 3, n)
    a = np.clip(g * 15 + rng.integers(0, 10, n), 0, 39)
    codes = np.column_stack([g, a, rng.integers(0, 2, n)]).astype(np.int32)
    out, ledger = run_method("dpsyn", Encoder.fit(schema), codes, epsilon=4.0, seed=3, groups=("G",),
                             regime="adaptive")
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    assert any(c.step.endswith((": 2-way marginal G × A", ": 2-way marginal G × A (codes in 7s)"))
               for c in ledger.charges)
    assert ((out >= 0) & (out < np.array([3, 40, 2]))).all()
    for group in range(3):
        inside = (out[out[:, 0] == group, 1] >= group * 15) & (out[out[:, 0] == group, 1] < group * 15 + 10)
        assert inside.mean() > 0.8  # 1.0 in the private table; about 0.25 if groups shared A's distribution


def test_the_estimation_probe_reads_coarse_marginals_as_the_private_table_does():
    """A coarse reading as a matrix over the exact cells (lib/records/marginals.coarse_matrix, which
    bench/estimation_probe.py hands to private-pgm) gives the counts of code // width (the Marginal's
    coarsening), last coarse cell short."""
    codes = records()[:, [0, 1, 3]]
    sizes, widths = [85, 3, 99], (10, 1, 10)
    exact = count_marginal(codes, tuple(sizes)).ravel()
    coarse_sizes = tuple(-(-s // w) for s, w in zip(sizes, widths))
    expected = count_marginal(codes // np.array(widths), coarse_sizes).ravel()
    assert np.array_equal(coarse_matrix(sizes, widths) @ exact, expected)


def test_a_column_with_a_null_token_is_split_at_it_only_when_asked():
    sizes = (21, 3, 85)  # 20 bins and null; three categories; 85 codes
    split = SplitColumns.choose(sizes, [0, 1, 2], at_null=[0])
    assert split.widths == (20, 1, 10) and split.at_null(0) and not split.at_null(2)
    codes = np.array([[0, 0, 0], [19, 1, 5], [20, 2, 84]], dtype=np.int32)
    np.testing.assert_array_equal(split.encode(codes)[:, 0], [0, 0, 1])  # its coarse code: null or not
    np.testing.assert_array_equal(split.decode(split.encode(codes)), codes)
    assert SplitColumns.choose(sizes, [0, 1, 2]).widths == (1, 1, 10)
    assert SplitColumns.choose((2, 3), [0, 1], at_null=[0]).split == ()  # one bin and null: nothing to split


def test_where_pairs_are_noisy_rounds_read_a_column_as_null_or_not_and_the_release_keeps_where_it_is_null(
        monkeypatch):
    """K (20 bins and null) is null exactly where T is c.  With the plan's noisy pairs (coarse reads) K is
    split at its null token, a round measures K as null or not by T (4 cells against the exact pair's 63),
    and the release keeps K null where T is c."""
    with_rounds(monkeypatch, **noisy_pairs())
    schema = parse_schema({"runs": [{"epsilon": 0.5, "delta": 1e-9, "max_records": 10_000,
                                     "max_records_per_individual": 1}],
                           "schema": {"K": {"dtype": "int", "min": 0, "max": 19, "null": "N"},
                                      "T": {"dtype": "str", "values": ["a", "b", "c"]},
                                      "C": {"dtype": "int", "values": [0, 1]}}})
    encoder = Encoder.fit(schema)
    null = encoder.sizes[0] - 1
    rng = np.random.default_rng(4)
    n = 5000
    t = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    k = np.where(t == 2, null, rng.integers(0, null, n))
    codes = np.column_stack([k, t, rng.integers(0, 2, n)]).astype(np.int32)
    out, ledger = run_method("dpsyn", encoder, codes, epsilon=0.5, seed=1, regime="adaptive")
    measured = [c.step.split(": ", 1)[1] for c in ledger.charges
                if c.step.startswith("adaptive round") and not c.mechanism.startswith("exponential")]
    assert f"2-way marginal K (codes in {null}s) × T" in measured
    assert sum(c.rho for c in ledger.charges) == pytest.approx(ledger.budget, rel=1e-9)
    assert ((out >= 0) & (out < np.array(encoder.sizes))).all()
    assert np.mean(out[out[:, 1] == 2, 0] == null) > 0.8  # 1.0 in the private table, 0.2 if independent
    assert np.mean(out[out[:, 1] != 2, 0] == null) < 0.1  # 0.0 in the private table


def test_rules_boxes_over_the_split_layout_forbid_exactly_the_records_whose_decoded_record_they_forbid():
    """Every model record, impossible offsets in a short last coarse code included: in a translated box
    exactly when its decoded record is in an original one; and repair over the layout leaves no decoded
    record in a box."""
    split = layout()
    rng = np.random.default_rng(7)
    boxes = Boxes(tuple(Box(cols, tuple(rng.random(SIZES[c]) < 0.3 for c in cols), fix, "rule")
                        for cols, fix in [((0, 1), 0), ((2, 3), 3), ((1, 3), 1)])
                  + (Box((0,), (np.arange(85) == 84,), 0, "no 84"),))
    model = np.column_stack([rng.integers(0, s, 20_000) for s in split.model_sizes]).astype(np.int32)
    translated = split.boxes(boxes)
    np.testing.assert_array_equal(translated.forbidden(model), boxes.forbidden(split.decode(model)))
    assert len(translated.boxes) > len(boxes.boxes)  # a mask over a split column becomes a few boxes
    fixed = repair(model, translated, np.random.default_rng(8))
    assert not boxes.forbidden(split.decode(fixed)).any()
    witness = split.decode(fixed[:1])[0]  # a domain record in no box: its encoding is in no translated box
    carried = split.boxes(Boxes(boxes.boxes, witness)).witness
    assert carried is not None and not translated.forbidden(carried[None]).any()
    np.testing.assert_array_equal(split.decode(carried[None])[0], witness)


@pytest.mark.parametrize("noisy", [False, True])
def test_a_column_an_edit_rule_reads_is_read_coarsely_where_pairs_are_affordable_and_the_release_keeps_the_rule(
        monkeypatch, noisy):
    """K (60 categories, so split in 8s) is v00 exactly where T is c, by a declared rule; otherwise its lower
    half goes with T = a.  Where the plan finds the pairs affordable the rounds read K coarsely by T; where it
    finds them noisy (coarse reads) K stays whole.  Either way the release keeps the rule and the dependence."""
    if noisy:
        with_rounds(monkeypatch, **noisy_pairs())
    rng = np.random.default_rng(5)
    n = 4000
    t = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    k = np.where(t == "c", 0, rng.integers(1, 30, n) + np.where(t == "a", 0, 30))
    values = [f"v{i:02d}" for i in range(60)]
    private = pd.DataFrame({"T": t, "K": np.asarray(values)[k], "C": rng.integers(0, 2, n).astype(str)})
    params = {"runs": [{"epsilon": 1.0, "delta": 1e-9, "max_records": 10 ** 6, "max_records_per_individual": 1}],
              "schema": {"T": {"dtype": "str", "values": ["a", "b", "c"]}, "K": {"dtype": "str", "values": values},
                         "C": {"dtype": "int", "values": [0, 1]}},
              "constraints": ["T = c <=> K = v00"]}
    (run,) = release(private, params, None, "dpsyn", {"regime": "adaptive"}, seed=2)
    assert any("K (codes in 8s)" in c.step for c in run.ledger.charges) != noisy
    assert sum(c.rho for c in run.ledger.charges) == pytest.approx(run.ledger.budget, rel=1e-9)
    table = run.table
    assert ((table["T"] == "c") == (table["K"] == "v00")).all()
    lower = table["K"].str[1:].astype(int) < 30
    assert lower[table["T"] == "a"].mean() > 0.8 and lower[table["T"] == "b"].mean() < 0.2  # 1.0 / 0.0 in private
