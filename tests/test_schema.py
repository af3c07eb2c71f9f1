"""Parsing and validating parameters files."""
import json

import pytest

from dpsyn.dataloader.schema import CATEGORICAL, NUMERIC, SchemaError, load_schema, parse_schema
from helpers import SPRINT2_PARAMS

UNBOUNDED_SPRINT2 = ["HHWT", "PERWT", "INCTOT", "INCWAGE", "INCWELFR", "INCINVST", "INCEARN"]


def test_sprint2_parameters_parse_unchanged():
    schema = load_schema(SPRINT2_PARAMS)
    assert len(schema.columns) == 35
    assert [r.epsilon for r in schema.runs] == [0.1, 1.0, 10.0]
    assert all(r.max_records_per_individual == 7 and r.max_records == 1_350_000 for r in schema.runs)
    assert schema.column("PUMA").kind == CATEGORICAL and len(schema.column("PUMA").values) == 181
    age = schema.column("AGE")
    assert (age.kind, age.integral, age.low, age.high) == (NUMERIC, True, 0, 135)
    assert schema.unbounded() == UNBOUNDED_SPRINT2
    assert schema.column("YEAR").values == tuple(range(2012, 2019))


def test_unbounded_numeric_needs_a_range_naming_each_column():
    schema = load_schema(SPRINT2_PARAMS)
    with pytest.raises(SchemaError) as err:
        schema.require_ranges()
    assert len(err.value.problems) == len(UNBOUNDED_SPRINT2)
    assert all(name in line for name, line in zip(UNBOUNDED_SPRINT2, err.value.problems))
    filled = schema.with_public_ranges({name: (0, 100) for name in UNBOUNDED_SPRINT2})
    filled.require_ranges()
    assert filled.column("HHWT").high == 100


def test_a_precision_finer_than_float64_holds_is_refused():
    """A grid float64 cannot count (|value|·10^precision beyond 2^50 with decimals, 2^53 without) gave empty or split
    bins: refused in one line, naming the most decimals that fit, where the range is declared and where a public
    file gives it."""
    runs = [{"epsilon": 1, "delta": 1e-9, "max_records": 10, "max_records_per_individual": 1}]
    with pytest.raises(SchemaError) as err:
        parse_schema({"runs": runs, "schema": {
            "R": {"dtype": "float", "min": 227.0, "max": 480144.5, "precision": 13},
            "Z": {"dtype": "float", "min": 1e15, "max": 1e15, "precision": 9},
            "OK": {"dtype": "float", "min": 227.0, "max": 480144.5, "precision": 9}}})
    assert [line.split(":")[0] for line in err.value.problems] == ["column R", "column Z"]
    assert "at most 9 decimals" in err.value.problems[0] and "at most 0 decimals" in err.value.problems[1]
    schema = parse_schema({"runs": runs, "schema": {"U": {"dtype": "float", "precision": 13}}})
    with pytest.raises(SchemaError) as err:
        schema.with_public_ranges({"U": (0.0, 1e6)}).require_ranges()
    assert err.value.problems == ["column U: precision 13 is finer than float64 holds for values up to 1e+06 "
                                  "(at most 9 decimals there)"]
    schema.with_public_ranges({"U": (0.0, 50.0)}).require_ranges()


def test_range_bins_and_null_in_schema_entry():
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10, "max_records_per_individual": 3}],
                           "schema": {"INC": {"dtype": "int32", "min": -10, "max": 1000, "bins": [0, 100, 500],
                                              "null": "N"},
                                      "W": {"dtype": "float", "min": 0, "max": 1, "bins": 4}}})
    inc = schema.column("INC")
    assert (inc.low, inc.high, inc.bins, inc.null) == (-10, 1000, (0.0, 100.0, 500.0), "N")
    assert schema.column("W").bins == 4
    assert schema.runs[0].max_records_per_individual == 3


def test_a_run_without_max_records_per_individual_is_an_error():
    """It sets every noise scale, so it has no silent default (it once became 1)."""
    with pytest.raises(SchemaError, match="runs\\[0\\]: missing \"max_records_per_individual\""):
        parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10}],
                      "schema": {"A": {"values": [1, 2]}}})


def test_every_problem_is_reported_at_once():
    raw = {"runs": [{"epsilon": 0, "delta": 1.5, "max_records": 10, "max_records_per_individual": 1},
                    {"epsilon": 1, "delta": 1e-9, "max_records": 0, "max_records_per_individual": 0}],
           "schema": {"A": {"values": []}, "B": {"dtype": "float", "min": 5}, "C": {"dtype": "weird"},
                      "D": {"values": [1, "x"]}, "E": {"dtype": "int", "min": 0, "max": 5, "bins": [3, 2]},
                      "F": {"values": [1, 2], "colour": "red"}}}
    with pytest.raises(SchemaError) as err:
        parse_schema(raw)
    text = "\n".join(err.value.problems)
    for needle in ["runs[0]: epsilon", "runs[0]: delta", "runs[1]: max_records must",
                   "runs[1]: max_records_per_individual", "column A", "column B: give both", "column C",
                   "column D", "column E: bin edges", "column F: unknown key \"colour\""]:
        assert needle in text, needle
    assert len(err.value.problems) == 10


def test_malformed_json_and_missing_file(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"runs": [}')
    with pytest.raises(SchemaError, match="not valid JSON"):
        load_schema(bad)
    with pytest.raises(SchemaError, match="cannot read parameters file"):
        load_schema(tmp_path / "missing.json")


def test_an_unknown_top_level_key_is_an_error_one_line_exit_2(tmp_path, capsys):
    """A misspelt declaration ("distinct_per_individuals") would otherwise vanish without a word."""
    raw = {"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10, "max_records_per_individual": 1}],
           "schema": {"A": {"values": [1, 2]}}, "distinct_per_individuals": ["A"]}
    with pytest.raises(SchemaError) as err:
        parse_schema(raw)
    assert err.value.problems == ['parameters: unknown key "distinct_per_individuals" (known: constraints, '
                                  'distinct_per_individual, individual, review, runs, schema)']
    params = tmp_path / "params.json"
    params.write_text(json.dumps(raw))
    from dpsyn.main import main
    assert main(["plan", "--params", str(params)]) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1 and 'unknown key "distinct_per_individuals"' in err_lines[0]
