"""Edit rules that compare two numeric columns: parsing, the codes they forbid, decoding inside one interval,
and releases that never break them."""
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsyn.api import draft_schema, release
from dpsyn.dataloader.comparisons import failing_pairs, settle_comparisons
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.rules import violations
from dpsyn.dataloader.schema import SchemaError, parse_schema
from dpsyn.dataloader.reading import validate
from dpsyn.dataloader.structure import PublicViews, comparison_rules, detect, rule_boxes

ROOT = Path(__file__).resolve().parent.parent
RUNS = [{"epsilon": 1.0, "delta": 1e-9, "max_records": 5000, "max_records_per_individual": 1}]
# children (0-12, null outside families) below family size (2-14, null outside families), each in coarse bins
# whose edges differ, so that some pairs of bins overlap
COLUMNS = {"KIDS": {"dtype": "int", "min": 0, "max": 12, "null": "N", "bins": [-1, 2, 5, 12]},
           "SIZE": {"dtype": "int", "min": 2, "max": 14, "null": "N", "bins": [1, 3, 7, 14]},
           "HOME": {"values": ["family", "other"]},
           "W": {"dtype": "float", "min": 0, "max": 10, "precision": 1, "bins": 3},
           "V": {"dtype": "float", "min": 0, "max": 10, "precision": 2, "bins": 4}}
RULES = ["KIDS != N and SIZE != N => KIDS < SIZE", "HOME = family <=> SIZE != N", "HOME = family <=> KIDS != N",
         "W <= V"]


def schema_of(columns=COLUMNS, rules=RULES):
    return parse_schema({"runs": RUNS, "schema": columns, "constraints": rules})


def table(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Records that meet every rule."""
    rng = np.random.default_rng(seed)
    family = rng.random(n) < 0.8
    size = rng.integers(2, 15, n)
    kids = np.minimum(rng.integers(0, 13, n), size - 1)
    v = np.round(rng.uniform(0, 10, n), 2)
    w = np.floor(rng.uniform(0, 1, n) * v * 10) / 10
    return pd.DataFrame({"KIDS": np.where(family, kids.astype(str), "N"),
                         "SIZE": np.where(family, size.astype(str), "N"), "HOME": np.where(family, "family", "other"),
                         "W": w.astype(str), "V": v.astype(str)})


def test_a_comparison_parses_and_names_both_columns():
    rule = schema_of().rules[0]
    (atom,) = rule.conclusion
    assert (atom.column, atom.op, atom.other, str(atom)) == ("KIDS", "<", "SIZE", "KIDS < SIZE")
    assert rule.columns() == {"KIDS", "SIZE"}


@pytest.mark.parametrize("rule, message", [
    ("KIDS != N => KIDS < HOME", "HOME is categorical"),
    ("KIDS != N => KIDS = SIZE", "only <, <=, > and >= compare two columns"),
    ("KIDS != N => KIDS < NOPE", "'NOPE' is neither a number nor a column"),
    ("KIDS < SIZE => HOME = family", "write it only as what a => rule concludes"),
    ("HOME = family <=> KIDS < SIZE", "write it only as what a => rule concludes"),
    ("KIDS != N => KIDS < KIDS", "compares a column with itself"),
])
def test_bad_comparisons_are_one_line_each(rule, message):
    with pytest.raises(SchemaError) as err:
        schema_of(rules=[rule])
    assert len(err.value.problems) == 1 and message in err.value.problems[0]


@pytest.mark.parametrize("columns, rules, message", [
    (COLUMNS, ["KIDS != N and SIZE != N => KIDS < SIZE", "W <= KIDS"], "KIDS is compared twice"),
    (COLUMNS, ["HOME = family => KIDS < SIZE and W <= KIDS"], "KIDS is compared twice"),
    ({**COLUMNS, "W": dict(COLUMNS["W"], constant_within=["HOME"])}, ["W <= V"], "constant within HOME"),
    ({**COLUMNS, "5": {"values": ["a"]}}, ["W < 5"], "'5' is both a column and a number"),
    ({**COLUMNS, "N": {"values": ["a"]}}, ["KIDS != N => KIDS < N"], "'N' is both a column and a null token"),
])
def test_comparisons_that_settling_could_not_keep_or_that_read_two_ways_are_one_line_each(columns, rules, message):
    with pytest.raises(SchemaError) as err:
        schema_of(columns, rules)
    assert len(err.value.problems) == 1 and message in err.value.problems[0]


def test_a_comparison_no_values_in_the_ranges_can_meet_is_refused_before_any_data_is_read():
    schema = schema_of({"A": {"dtype": "int", "min": 10, "max": 20}, "B": {"dtype": "int", "min": 0, "max": 9}},
                       ["A < B"])
    with pytest.raises(SchemaError, match="no values of A and B in their ranges meet A < B"):
        rule_boxes(schema.rules, Encoder.fit(schema))


def test_a_bad_comparison_on_the_command_line_exits_2_and_writes_nothing(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"runs": RUNS, "schema": COLUMNS,
                                                 "constraints": ["KIDS != N => KIDS < HOME"]}))
    table().to_csv(tmp_path / "private.csv", index=False)
    proc = subprocess.run([sys.executable, "main.py", "--params", tmp_path / "p.json", "--private",
                           tmp_path / "private.csv", "--output", tmp_path / "out.csv"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "HOME is categorical" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "private.csv"]


def test_compared_columns_are_cut_at_each_others_edges():
    enc = Encoder.fit(schema_of())
    kids, size = enc.coder("KIDS").edges, enc.coder("SIZE").edges
    assert {3, 7} <= set(kids) and {2, 5} <= set(size)  # each other's declared edges, inside the range
    assert set(kids) >= {-1, 2, 5, 12} and set(size) >= {1, 3, 7, 14}  # their own kept


def test_failing_pairs_are_exactly_the_bins_where_no_pair_of_values_meets_the_comparison():
    """Brute force over every value each bin decodes to, for each order and both directions."""
    for op in ("<", "<=", ">", ">="):
        schema = schema_of(rules=[f"KIDS != N and SIZE != N => KIDS {op} SIZE", f"W {op} V"])
        enc = Encoder.fit(schema)
        coders = {c.column.name: c for c in enc.coders}
        for rule in schema.rules:
            (atom,) = rule.conclusion
            a, b = coders[atom.column], coders[atom.other]
            fails = failing_pairs(atom, coders)
            values = [_values(a, i) for i in range(a.size)], [_values(b, j) for j in range(b.size)]
            for i, j in itertools.product(range(a.size), range(b.size)):
                pairs = [(x, y) for x in values[0][i] for y in values[1][j]]
                brute = not any(atom.holds_pair([x], [y])[0] for x, y in pairs)
                assert fails[i, j] == brute, (op, atom, i, j)


def _values(coder, code: int) -> list[float]:
    """Every value ``code`` decodes to (NaN for the null code), as the decoder draws them."""
    drawn = coder.decode(np.full(4000, code), np.random.default_rng(code))
    return list(np.unique(drawn)) if not np.isnan(drawn).all() else [np.nan]


def test_settling_moves_values_only_inside_their_bins_and_only_where_the_comparison_breaks():
    schema = schema_of()
    enc = Encoder.fit(schema)
    coders = {c.column.name: c for c in enc.coders}
    rng = np.random.default_rng(1)
    codes = np.column_stack([rng.integers(0, s, 20_000) for s in enc.sizes]).astype(np.int32)
    codes = codes[~rule_boxes(schema.rules, enc).forbidden(codes)]  # what synthesis leaves: no failing pair
    typed = enc.decode(codes, np.random.default_rng(2))
    columns = {c.name: c for c in schema.columns}
    before = violations(typed, schema.rules, columns)
    assert before["KIDS != N and SIZE != N => KIDS < SIZE"] > 0 and before["W <= V"] > 0  # overlapping bins
    settled = settle_comparisons(typed, schema.rules, coders)
    assert set(violations(settled, schema.rules, columns).values()) == {0}
    assert (enc.encode(settled) == codes).all()  # every value stays in its bin
    for name, decimals in (("W", 1), ("V", 2), ("KIDS", 0), ("SIZE", 0)):  # and on its column's grid
        values = settled[name].astype(float).dropna().to_numpy()
        assert np.allclose(values, np.round(values, decimals)), name
    broke = np.zeros(len(typed), dtype=bool)
    for name in ("KIDS", "SIZE", "W", "V"):
        broke |= settled[name].astype(float).fillna(-99).to_numpy() != typed[name].astype(float).fillna(-99).to_numpy()
    kids, size = typed.KIDS.astype(float).to_numpy(), typed.SIZE.astype(float).to_numpy()
    w, v = typed.W.to_numpy(), typed.V.to_numpy()
    assert not (broke & (kids < size) & (w <= v)).any()  # records that met both comparisons are untouched


@pytest.mark.parametrize("seed", [0, 1])
def test_comparisons_across_grids_hold_and_keep_each_columns_grid(seed):
    """An integer column against a one-decimal one, and a column whose min lies off its grid."""
    columns = {"I": {"dtype": "int", "min": 0, "max": 20, "bins": 3},
               "F": {"dtype": "float", "min": 0.05, "max": 20, "precision": 1, "bins": 4}}
    rng = np.random.default_rng(seed)
    f = np.round(rng.uniform(0.05, 20, 2000), 1).clip(0.1)
    frame = pd.DataFrame({"I": np.floor(f * rng.random(2000)).astype(int).astype(str), "F": f.astype(str)})
    params = {"runs": [dict(RUNS[0], epsilon=eps) for eps in (0.5, 5.0)], "schema": columns,
              "constraints": ["F > I"]}
    schema = parse_schema(params)
    for run in release(frame, params, None, "dpsyn", seed=seed, group_columns=()):
        t = run.table
        assert violations(t, schema.rules, {c.name: c for c in schema.columns}) == {"F > I": 0}
        i, f = t["I"].astype(float).to_numpy(), t["F"].astype(float).to_numpy()
        assert np.allclose(i, np.round(i))
        assert (np.isclose(f, np.round(f, 1)) | (f == 0.05)).all()  # the grid, or the min decoding clips to
        assert f.min() >= 0.05 and i.min() >= 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_releases_never_break_a_comparison(seed):
    schema = schema_of()
    runs = [dict(RUNS[0], epsilon=eps) for eps in (0.3, 3.0)]
    params = {"runs": runs, "schema": COLUMNS, "constraints": RULES}
    for method, options in (("dpsyn", {}), ("histogram", {}), ("superquail", {"target": "HOME"}),
                            ("rap", {"rows": 300, "rounds": 2, "steps": 5, "target": "HOME"})):
        for run in release(table(seed=seed), params, None, method, options, seed=seed, group_columns=()):
            assert len(run.table) > 0
            assert set(violations(run.table, schema.rules, {c.name: c for c in schema.columns}).values()) == {0}


def test_a_draft_proposes_comparisons_and_category_null_rules_the_public_file_never_breaks():
    """From public material only: KIDS < SIZE and the home type that makes both null, marked for review; none of
    them once the public file breaks it."""
    public = table(2000, seed=4)
    dictionary = {"KIDS": {"values": {"N": "no family", "min": 0, "max": 12}},
                  "SIZE": {"values": {"N": "no family", "min": 2, "max": 14}}}
    suggested = " ".join(r for r in draft_schema(public, dictionary)["review"] if "suggests edit rules" in r)
    assert '"KIDS != N and SIZE != N => KIDS < SIZE"' in suggested
    assert '"HOME = other <=> KIDS = N"' in suggested and '"HOME = other <=> SIZE = N"' in suggested
    declared = dict(draft_schema(public, dictionary))
    declared["constraints"] = ["SIZE != N and KIDS != N => SIZE > KIDS"]  # the same comparison, the other way round
    schema = parse_schema({k: v for k, v in declared.items() if k != "review"})
    typed = validate(public, schema, "public", public=True)
    assert not [r for r in comparison_rules(schema, typed) if "KIDS" in r and "SIZE" in r]
    broken = public.copy()
    first = np.flatnonzero(broken.KIDS != "N")[:3]
    broken.loc[first, "KIDS"], broken.loc[first, "SIZE"] = "12", "3"  # three families with more children
    broken.loc[np.flatnonzero(broken.HOME == "other")[:1], "HOME"] = "family"  # one family without size
    suggested = " ".join(r for r in draft_schema(broken, dictionary)["review"] if "suggests edit rules" in r)
    assert "KIDS < SIZE" not in suggested and "HOME" not in suggested


def test_a_compared_column_is_never_taken_as_group_level():
    """W holds one value per HOME in the public file, but a comparison moves it row by row."""
    schema = schema_of(rules=["W <= V"])
    public = table(400, seed=5)
    public["W"] = np.where(public.HOME == "family", "1.0", "2.0")
    public["V"] = "9.5"
    typed = validate(public, schema, "public", public=True)
    enc = Encoder.fit(schema, typed)
    found = detect(schema, enc, PublicViews(typed, enc.encode(typed), public), ("HOME",), [])
    assert "W" not in dict(found.group_level)
    unruled = schema_of(rules=[])
    assert "W" in dict(detect(unruled, enc, PublicViews(typed, enc.encode(typed), public), ("HOME",), []).group_level)


def test_a_comparison_whose_own_column_has_one_value_is_met_through_the_other():
    """``C >= X`` with C of one value (0): repair cannot move C, so it moves X (into its bin holding 0), even where
    every record starts out breaking the rule (it raised 'the edit rules leave no record that satisfies all of
    them')."""
    columns = {"C": {"dtype": "int", "min": 0, "max": 0}, "X": {"dtype": "float", "min": 0.0, "max": 10.0},
               "K": {"values": ["a", "b"]}}
    schema = schema_of(columns, ["C >= X"])
    enc = Encoder.fit(schema)
    boxes = rule_boxes(schema.rules, enc)
    codes = np.column_stack([np.zeros(50), np.full(50, enc.sizes[1] - 1), np.zeros(50)]).astype(np.int32)
    from dpsyn.lib.records.constraints import repair
    from dpsyn.lib.tuning import T
    with T.overridden({"constraints_repair_passes": 1}):  # the first pass already moves X, not C
        out = repair(codes, boxes, np.random.default_rng(0))
    assert not boxes.forbidden(out).any() and (out[:, 0] == 0).all()
    rng = np.random.default_rng(6)
    private = pd.DataFrame({"C": "0", "X": np.round(rng.uniform(4, 6, 300), 2).astype(str),
                            "K": rng.choice(["a", "b"], 300)})
    parameters = {"runs": RUNS, "schema": columns, "constraints": ["C >= X"]}
    (run,) = release(private, parameters, None, "dpsyn", {}, seed=2, group_columns=())
    assert len(run.table) and (run.table.X.astype(float) <= 0).all()


def test_every_box_mask_has_one_entry_per_code():
    """A numeric column without a null token has no null code, though its atoms answer for a null too: a box's mask
    on it keeps one entry per code, so that repair's values outside a box (its uniform fallback) are codes the
    column has (the extra entry let it write one past the last, which the GUM kernel read out of bounds)."""
    columns = {"C": {"dtype": "int", "min": 0, "max": 0}, "X": {"dtype": "float", "min": 0.0, "max": 10.0},
               "A": {"dtype": "int", "min": 0, "max": 90}, "M": {"values": ["x", "y"], "null": "N"}}
    schema = schema_of(columns, ["C >= X", "A < 15 <=> M = N"])
    enc = Encoder.fit(schema)
    boxes = rule_boxes(schema.rules, enc)
    assert all(len(m) == enc.sizes[c] for box in boxes.boxes for c, m in zip(box.columns, box.masks))
    from dpsyn.lib.records.constraints import repair
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, s, 500) for s in enc.sizes]).astype(np.int32)
    out = repair(codes, boxes, rng)
    assert (out < np.asarray(enc.sizes)).all() and not boxes.forbidden(out).any()
