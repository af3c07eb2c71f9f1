"""Realistic records: decoding from public values, edit rules, derived and group-level columns."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsyn.api import release
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.rules import violations
from dpsyn.dataloader.schema import SchemaError, parse_schema
from dpsyn.dataloader.structure import PublicViews, detect, rule_boxes
from dpsyn.lib.records.constraints import repair
from dpsyn.lib.estimation.gum import gum
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.private_table import PrivateRecords, PrivateTable
from dpsyn.lib.privacy.unit import PrivacyUnit
from dpsyn.stages.group_values import measure_group_values

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "demo"
RUNS = [{"epsilon": 1.0, "delta": 1e-9, "max_records": 1000, "max_records_per_individual": 1}]


def schema_of(columns: dict, rules=None):
    raw = {"runs": RUNS, "schema": columns}
    if rules is not None:
        raw["constraints"] = rules
    return parse_schema(raw)


def test_decoding_stays_in_schema_and_on_the_grid_for_every_column_kind():
    schema = schema_of({"I": {"dtype": "int", "min": 0, "max": 1000, "bins": 8},
                        "F": {"dtype": "float", "min": 0.5, "max": 90.5, "bins": [0.5, 30, 60, 90.5]},
                        "P": {"dtype": "float", "min": 0, "max": 10, "precision": 2, "null": "N"},
                        "C": {"values": ["a", "b"]}})
    rng = np.random.default_rng(0)
    public = pd.DataFrame({"I": rng.choice([0, 10, 20, 500, 990], 400).astype(float),
                           "F": np.round(rng.uniform(0.5, 60, 400), 1),
                           "P": np.where(rng.random(400) < 0.2, np.nan, np.round(rng.uniform(0, 10, 400), 3)),
                           "C": pd.Categorical(rng.choice(["a", "b"], 400), categories=["a", "b"])})
    enc = Encoder.fit(schema, public)
    codes = np.column_stack([rng.integers(0, s, 20_000) for s in enc.sizes]).astype(np.int32)
    typed = enc.decode(codes, np.random.default_rng(1))
    assert (enc.encode(typed) == codes).all()
    i = typed["I"].to_numpy(dtype=float)
    assert np.isin(i, [0, 10, 20, 500, 990]).mean() > 0.5  # public values (heaping) where the bin has them
    assert (i == np.round(i)).all() and i.min() >= 0 and i.max() <= 1000
    f = typed["F"].to_numpy()
    assert (np.abs(f * 10 - np.round(f * 10)) < 1e-9).all()  # public precision: one decimal
    assert f.max() > 60  # bins above the public values fall back to the grid
    p = typed["P"].to_numpy()
    assert (np.abs(p[~np.isnan(p)] * 100 - np.round(p[~np.isnan(p)] * 100)) < 1e-9).all()  # declared: 2 decimals
    assert np.isnan(p).any() and set(typed["C"].astype(str)) == {"a", "b"}


def test_a_value_decodes_into_its_own_bin_at_any_magnitude():
    """A grid at large magnitudes (whole numbers near 10**12, one bin each; a declared bin of one value near 10**15;
    two decimals near 10**9): every code decodes to a value that encodes back to it, and each bin's grid values
    are counted right (rounding value/step to 6 decimals lost the units past 2^53 / 10^6)."""
    from dpsyn.stages.bin_values import _grid_points
    schema = schema_of({"T": {"dtype": "int", "min": 10 ** 12, "max": 10 ** 12 + 5},
                        "B": {"dtype": "int", "min": 10 ** 15, "max": 10 ** 15 + 100,
                              "bins": [10 ** 15, 10 ** 15 + 50, 10 ** 15 + 100]},
                        "M": {"dtype": "float", "min": 1e9, "max": 1e9 + 1000, "precision": 2}})
    enc = Encoder.fit(schema)
    codes = np.column_stack([np.arange(20_000) % s for s in enc.sizes]).astype(np.int32)
    assert (enc.encode(enc.decode(codes, np.random.default_rng(2))) == codes).all()
    t = enc.coder("T")
    assert (_grid_points(t.bin_edges[:-1], t.bin_edges[1:], t.step) == 1).all()


RULED = {"AGE": {"dtype": "int", "min": 0, "max": 90},
         "INC": {"dtype": "int", "min": 0, "max": 100000, "null": "N"},
         "MAR": {"values": [1, 2, 3], "null": "N"}}
RULES = ["AGE < 15 <=> INC = N", "AGE < 15 => MAR = N", "MAR in {2, 3} => AGE >= 18"]


def test_a_rules_threshold_on_a_grid_of_decimals_cuts_just_below_it():
    """``X < 277`` on a column of 6 decimals cuts at 276.999999, the last value below 277 the column holds (the float
    before 277 was floored back onto 277, the bin holding 277 then split by the rule: the release failed); so does
    ``Y < 1000050`` with 9 decimals, where counting steps errs by more than 5e-7."""
    schema = schema_of({"X": {"dtype": "float", "min": 227.0, "max": 327.0, "precision": 6},
                        "Y": {"dtype": "float", "min": 1e6, "max": 1000100.0, "precision": 9},
                        "Z": {"dtype": "float", "min": 0.0, "max": 3e14, "precision": 0},
                        "K": {"values": ["a", "b"]}},
                       ["X < 277.0 => K = b", "X >= 300 => K = a", "Y < 1000050.0 => K = a",
                        "Z < 200000000000000.2 => K = b"])
    enc = Encoder.fit(schema)
    assert {276.999999, 299.999999} <= set(enc.coder("X").edges)
    assert 1000049.999999999 in set(enc.coder("Y").edges)  # near 10**15 steps, float error beyond 5e-7 of one
    assert 2e14 in set(enc.coder("Z").edges)  # a threshold between grid points is not snapped onto one
    assert len(rule_boxes(schema.rules, enc).boxes) == 4


def test_repair_with_group_columns_returns_what_it_cannot_mend():
    """With kept (group) columns, records of cells the rules allow nothing in come back as they are, even where no
    record of the batch passes (the caller leaves them out); without them, G is mended, and rules no record meets
    still raise."""
    from dpsyn.lib.records.constraints import Box, Boxes
    boxes = Boxes((Box((0,), (np.array([True, False]),), 0, "G = 1 only"),))  # forbids G = 0 whatever X holds
    codes = np.array([[0, 1], [0, 2], [0, 0]], dtype=np.int32)
    out = repair(codes, boxes, np.random.default_rng(0), keep=(0,))
    assert (out == codes).all() and boxes.forbidden(out).all()
    assert not boxes.forbidden(repair(codes, boxes, np.random.default_rng(0))).any()
    nothing = Boxes((Box((0,), (np.array([True, True]),), 0, "no record"),))
    with pytest.raises(ValueError):
        repair(codes, nothing, np.random.default_rng(0))


def test_a_forbidden_record_never_appears_in_gum_output():
    schema = schema_of(RULED, RULES)
    enc = Encoder.fit(schema)
    boxes = rule_boxes(schema.rules, enc)
    rng = np.random.default_rng(3)
    records = np.column_stack([rng.integers(0, s, 100_000) for s in enc.sizes]).astype(np.int32)
    targets = [((0, 1), rng.random((enc.sizes[0], enc.sizes[1]))), ((0, 2), rng.random((enc.sizes[0], enc.sizes[2])))]
    out = gum(records, enc.sizes, [Target(*t) for t in targets], np.random.default_rng(4), boxes=boxes)
    assert not boxes.forbidden(out).any()
    typed = enc.decode(out, np.random.default_rng(5))
    assert violations(typed, schema.rules, {c.name: c for c in schema.columns}) == {r: 0 for r in RULES}


def test_rule_thresholds_become_bin_edges_so_atoms_are_whole_bins():
    schema = schema_of({"AGE": {"dtype": "int", "min": 0, "max": 90, "bins": [0, 10, 20, 90]},
                        "INC": RULED["INC"]}, ["AGE < 15 => INC = N"])
    edges = Encoder.fit(schema).coder("AGE").edges
    assert 14 in edges and 10 in edges and 20 in edges  # declared edges kept, the rule's cut added


def test_repair_changes_only_the_rules_column_when_a_donor_exists():
    schema = schema_of(RULED, RULES[:1])
    enc = Encoder.fit(schema)
    boxes = rule_boxes(schema.rules, enc)
    codes = np.array([[0, 3, 0], [5, 3, 0], [1, enc.coder("INC").null_code, 0]], dtype=np.int32)
    fixed = repair(codes, boxes, np.random.default_rng(0))
    assert not boxes.forbidden(fixed).any()
    assert (fixed[:, 0] == codes[:, 0]).all()


@pytest.mark.parametrize("bad, message", [
    (["AGE < 15 PINC = N"], "needs exactly one =>"),
    (["AGX < 15 => INC = N"], "unknown column AGX"),
    (["AGE < 15 => MAR = 7"], "'7' is not a value of MAR"),
    (["AGE < 500 => INC = N"], "outside AGE's range"),
    (["MAR < 2 => INC = N"], "needs a numeric column"),
    ("AGE < 15 => INC = N", "must be a list"),
])
def test_bad_rules_are_one_line_each(bad, message):
    """Each bad rule is one problem line naming it."""
    with pytest.raises(SchemaError) as err:
        schema_of(RULED, bad)
    assert len(err.value.problems) == 1 and message in err.value.problems[0]


@pytest.mark.parametrize("entry, message", [
    ({"values": [1, 2], "function_of": "NOPE"}, "function_of names 'NOPE'"),
    ({"dtype": "int", "min": 0, "max": 9, "precision": 1.5}, "precision must be an integer"),
    ({"dtype": "int", "min": 0, "max": 9, "constant_within": ["NOPE"]}, "constant_within names 'NOPE'"),
    ({"values": [1, 2], "precision": 2}, "does not apply to a categorical column"),
])
def test_bad_declarations_are_one_line_each(entry, message):
    with pytest.raises(SchemaError) as err:
        schema_of({**RULED, "X": entry})
    assert len(err.value.problems) == 1 and message in err.value.problems[0]


def test_a_bad_rule_on_the_command_line_exits_2_and_writes_nothing(tmp_path):
    params = json.loads((ROOT / "parameters.json").read_text())
    params["constraints"] = ["AGEP < 15 => PINCP = maybe"]
    (tmp_path / "p.json").write_text(json.dumps(params))
    proc = subprocess.run([sys.executable, "main.py", "--params", tmp_path / "p.json", "--private",
                           DEMO / "private.csv", "--output", tmp_path / "out.csv"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 2
    assert "'maybe' is not a number" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == [tmp_path / "p.json"]


def toy(deterministic: bool, n: int = 600, seed: int = 0):
    rng = np.random.default_rng(seed)
    parent = rng.integers(0, 12, n)
    child = parent // 3 if deterministic else np.where(rng.random(n) < 0.05, rng.integers(0, 4, n), parent // 3)
    schema = schema_of({"P": {"values": list(range(12))}, "C": {"values": list(range(4))},
                        "X": {"values": [0, 1]}})
    public = pd.DataFrame({"P": pd.Categorical(parent, categories=range(12)),
                           "C": pd.Categorical(child, categories=range(4)),
                           "X": pd.Categorical(rng.integers(0, 2, n), categories=[0, 1])})
    enc = Encoder.fit(schema, public)
    return detect(schema, enc, PublicViews(public, enc.encode(public), public.astype(str)), (), [])


def test_a_function_is_detected_on_a_deterministic_pair_only():
    found = toy(True)
    assert [(d.parent, d.child) for d in found.derivations] == [(0, 1)]
    assert (found.derivations[0].mapping == np.arange(12) // 3).all()
    assert toy(False).derivations == ()


def test_a_group_level_value_is_measured_exactly_and_charged():
    from dpsyn.lib.records.domain import Domain
    rng = np.random.default_rng(0)
    group = rng.integers(0, 4, 4000)
    truth = np.array([16.3, 2731.2, 2731.3, 52864.7])
    domain = Domain(("G", "D"), (4, 3), {"D": (16.3, 52864.7)})
    ledger = Ledger(1.0, 1e-9)
    private = PrivateTable(PrivateRecords(np.column_stack([group, np.zeros(4000, int)]).astype(np.int32),
                                          {"D": truth[group]}), domain, PrivacyUnit(1), ledger, np.random.default_rng(1))
    values = measure_group_values(private, "D", ("G",), 16.3, 52864.7, 0.1, 0.01)
    assert np.allclose(values, truth)
    assert ledger.spent == pytest.approx(0.01) and len(ledger.charges) == 2


@pytest.fixture(scope="module")
def demo_release():
    private = pd.read_csv(DEMO / "private.csv", dtype=str).sample(6000, random_state=0)
    private = private[private.INDP.isin(pd.read_csv(DEMO / "public.csv", dtype=str).INDP.unique())]
    params = json.loads((ROOT / "parameters.json").read_text())
    params["runs"] = [dict(params["runs"][-1], max_records=20000)]
    return private, release(private, params, public=DEMO / "public.csv", seed=3)[0], params


def test_the_demo_release_meets_every_rule_and_derivation(demo_release):
    private, run, params = demo_release
    table = run.table
    schema = parse_schema(params)
    assert set(violations(table, schema.rules, {c.name: c for c in schema.columns}).values()) == {0}
    pairs = table[["INDP", "INDP_CAT"]].astype(str).drop_duplicates()
    assert pairs.INDP.is_unique  # INDP_CAT is a function of INDP
    assert ((table.PINCP.isna()) == (table.PINCP_DECILE.astype(str) == "N")).all()
    assert table.groupby("PUMA", observed=True).DENSITY.nunique().max() == 1
    real = private.groupby("PUMA").DENSITY.first().astype(float)
    synth = table.groupby("PUMA", observed=True).DENSITY.first()
    assert np.allclose(synth[real.index].to_numpy(), real.to_numpy())
    assert run.ledger.spent == pytest.approx(run.ledger.budget)
    income = table.PINCP.dropna().to_numpy(dtype=float)
    assert (income % 10 == 0).mean() > 0.95  # public heaping carried over



def test_without_the_public_file_the_demo_still_gives_each_puma_one_measured_density(demo_release):
    """parameters.json declares DENSITY constant within PUMA (one decimal): without the public file each
    PUMA still gets one value, measured (charged) and on the data's grid."""
    private, _, params = demo_release
    run = release(private, params, seed=3)[0]
    synth = run.table.groupby("PUMA", observed=True).DENSITY
    assert synth.nunique().max() == 1
    real = private.groupby("PUMA").DENSITY.first().astype(float)
    assert np.allclose(synth.first()[real.index].to_numpy(), real.to_numpy())
    assert any("DENSITY per" in c.step for c in run.ledger.charges)
    assert run.ledger.spent == pytest.approx(run.ledger.budget)

def test_no_derive_keeps_every_column_synthesized(demo_release):
    private, _, params = demo_release
    run = release(private, params, public=DEMO / "public.csv", seed=3, derive=False)[0]
    assert not any("DENSITY per" in c.step for c in run.ledger.charges)
    assert run.table.groupby("PUMA", observed=True).DENSITY.nunique().max() > 1


def test_rows_of_a_group_the_rules_forbid_are_left_out(caplog):
    """With group columns G and H and the rule ``G = 0 => H = a``, the group (G = 0, H = b) can hold no record, and
    neither can (G = 1, H = b), whose Y two rules want both p and q; their noisy counts give them rows all the same,
    which repair (keeping group columns) cannot mend: they are left out and the log says how many (the release
    failed: 'the edit rules leave no record that satisfies all of them' or '... while keeping the group columns')."""
    columns = {"G": {"values": [0, 1]}, "H": {"values": ["a", "b"]}, "X": {"dtype": "int", "min": 0, "max": 100},
               "Y": {"values": ["p", "q", "r"]}}
    rules = ["G = 0 => H = a", "X < 50 => H = b", "G = 1 => Y = p", "H = b => Y = q"]  # (1, b): two rules at once
    rng = np.random.default_rng(7)
    g = rng.integers(0, 2, 2000)
    x = rng.integers(0, 101, 2000)
    h = np.where(g == 0, "a", np.where(x < 50, "b", rng.choice(["a", "b"], 2000)))
    private = pd.DataFrame({"G": g, "H": h, "X": x, "Y": np.where(g == 1, "p", np.where(h == "b", "q", "r"))})
    parameters = {"runs": [{"epsilon": 1.0, "delta": 1e-9, "max_records": 10_000, "max_records_per_individual": 1}],
                  "schema": columns, "constraints": rules}
    with caplog.at_level("INFO", logger="dpsyn.stages.structure"):
        (run,) = release(private, parameters, None, "histogram", {}, seed=4, group_columns=("G", "H"))
    table = run.table
    g, h = table.G.astype(int), table.H.astype(str)
    assert len(table) and not ((g == 0) & (h == "b")).any() and not ((g == 1) & (h == "b")).any()
    schema = schema_of(columns, rules)
    assert set(violations(table, schema.rules, {c.name: c for c in schema.columns}).values()) == {0}
    assert "left out" in caplog.text and "G = 0 => H = a" in caplog.text  # (0, b) left out, not moved to (0, a)


def test_rules_no_record_meets_together_are_refused_before_any_data_is_read(tmp_path, capsys):
    """"C = 0 => D = 0" and "X < 5 => D = 9" where C has one value and every X is below 5: no record meets both, a
    fact of the parameters alone: one line, exit 2, nothing written (it stopped synthesis with exit 1)."""
    from dpsyn.main import main
    columns = {"C": {"values": [0]}, "D": {"values": [0, 9]}, "X": {"dtype": "int", "min": 0, "max": 4}}
    (tmp_path / "p.json").write_text(json.dumps({"runs": RUNS, "schema": columns,
                                                 "constraints": ["C = 0 => D = 0", "X < 5 => D = 9"]}))
    pd.DataFrame({"C": [0] * 20, "D": [0] * 20, "X": list(range(5)) * 4}).to_csv(tmp_path / "private.csv", index=False)
    code = main(["--params", str(tmp_path / "p.json"), "--private", str(tmp_path / "private.csv"),
                 "--output", str(tmp_path / "out" / "s.csv")])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("WARNING")]
    assert code == 2 and len(err) == 1 and "no record meets every edit rule together" in err[0], err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_rules_whose_fixes_undo_each_other_are_met_through_another_column():
    """"C = 0 => D = 0" (C of one value) and "X < 5 => D = 9": each fixes D, the one undoing the other; from the
    second pass on a box's other columns take turns, so records starting with X below 5 end with X of 5 or more
    and D = 0 (repair raised 'the edit rules leave no record that satisfies all of them')."""
    schema = schema_of({"C": {"values": [0]}, "D": {"values": [0, 9]}, "X": {"dtype": "int", "min": 0, "max": 9}},
                       ["C = 0 => D = 0", "X < 5 => D = 9"])
    enc = Encoder.fit(schema)
    boxes = rule_boxes(schema.rules, enc)
    rng = np.random.default_rng(1)
    codes = np.column_stack([np.zeros(300), rng.integers(0, 2, 300), rng.integers(0, 5, 300)]).astype(np.int32)
    out = repair(codes, boxes, rng)
    assert not boxes.forbidden(out).any() and (out[:, 1] == 0).all() and (out[:, 2] >= 5).all()


def test_repair_falls_back_on_the_rules_public_witness():
    """Where no record of a batch can be mended, repair copies the witness the setup found (a record in no box, from
    the rules and the domain alone), kept columns kept; without one it raises as before."""
    from dataclasses import replace as with_field
    from dpsyn.lib.tuning import T
    schema = schema_of({"C": {"values": [0]}, "D": {"values": [0, 9]}, "X": {"dtype": "int", "min": 0, "max": 9}},
                       ["C = 0 => D = 0", "X < 5 => D = 9"])
    boxes = rule_boxes(schema.rules, Encoder.fit(schema))
    codes = np.column_stack([np.zeros(50), np.ones(50), np.zeros(50)]).astype(np.int32)  # D = 9, X = 0: forbidden
    with T.overridden({"constraints_repair_passes": 0}):
        with pytest.raises(ValueError):
            repair(codes, boxes, np.random.default_rng(0))
        out = repair(codes, with_field(boxes, witness=np.array([0, 0, 7], dtype=np.int32)), np.random.default_rng(0))
    assert not boxes.forbidden(out).any() and (out == [0, 0, 7]).all()
