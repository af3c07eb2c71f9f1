"""The parameters' ``individual`` section and the scores of synthetic individuals (rows linked by an id)."""
import json

import numpy as np
import pandas as pd
import pytest

from dpsyn.dataloader.schema import SchemaError, parse_schema
from dpsyn.evaluation.individuals import margins_floor
from dpsyn.evaluation.scoring import EvaluationOptions, Evaluator
from dpsyn.main import main

RUNS = [{"epsilon": 1.0, "delta": 1e-9, "max_records": 100, "max_records_per_individual": 3}]
SCHEMA = {"YEAR": {"values": [2012, 2013, 2014, 2015]}, "AGE": {"dtype": "int", "min": 0, "max": 99},
          "SEX": {"values": [1, 2]}, "EMP": {"values": [0, 1]}, "LABEL": {"values": ["a", "b"]}}
DECLARED = {"stable": ["SEX"], "advances": {"AGE": "YEAR"}, "follow": ["EMP"]}


def params(individual=DECLARED, distinct=("YEAR",)) -> dict:
    out = {"runs": RUNS, "schema": SCHEMA, "distinct_per_individual": list(distinct)}
    if individual is not None:
        out["individual"] = individual
    return out


def test_a_declaration_parses_with_its_clock():
    individual = parse_schema(params()).individual
    assert (individual.stable, individual.advances, individual.follow, individual.clock) == (
        ("SEX",), (("AGE", "YEAR"),), ("EMP",), "YEAR")
    assert parse_schema(params(None)).individual is None


@pytest.mark.parametrize("individual, distinct, message", [
    ({**DECLARED, "stabel": ["SEX"]}, ("YEAR",), "unknown key 'stabel'"),
    ({"stable": ["NOPE"]}, ("YEAR",), "'NOPE' is not a schema column"),
    ({"advances": {"SEX": "YEAR"}}, ("YEAR",), "SEX must be a numeric column"),
    ({"advances": {"AGE": "LABEL"}}, ("YEAR",), "not a distinct_per_individual column"),
    ({"advances": {"AGE": "LABEL"}}, ("LABEL",), "LABEL's values must be numbers"),
    ({"stable": ["SEX"], "follow": ["SEX"]}, ("YEAR",), "SEX is named more than once"),
    ({"advances": {"AGE": "YR"}}, ("YEAR", "YR"), "'YR' is not a schema column"),
    ({"follow": ["YEAR"]}, ("YEAR",), "YEAR orders an individual's rows"),
    ({"follow": ["EMP"]}, (), "need a distinct_per_individual column"),
    ({"stable": "SEX"}, ("YEAR",), "must be a list of column names"),
    (["SEX"], ("YEAR",), "must be an object"),
])
def test_bad_declarations_are_one_line_each(individual, distinct, message):
    with pytest.raises(SchemaError) as err:
        parse_schema(params(individual, distinct))
    assert len(err.value.problems) == 1 and message in err.value.problems[0]


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "YEAR", "AGE", "SEX", "EMP", "LABEL"]).astype(str)


# a: three years, ageing, leaves work; b: two years with a gap, stays at work; c: one row
REAL = frame([("a", 2012, 30, 1, 1, "a"), ("a", 2013, 31, 1, 1, "a"), ("a", 2014, 32, 1, 0, "b"),
              ("b", 2012, 50, 2, 1, "a"), ("b", 2014, 52, 2, 1, "b"), ("c", 2015, 70, 1, 0, "a")])


def scores(synthetic: pd.DataFrame) -> dict:
    evaluator = Evaluator(parse_schema(params()), REAL, EvaluationOptions(group_columns=(), id_column="id"))
    return next(iter(evaluator.evaluate(synthetic)["runs"].values()))["individuals"]


def test_the_real_table_scores_itself_perfectly():
    s = scores(REAL)
    assert s["rows_per_individual_tvd"] == 0 and s["transitions_tvd"] == {"EMP": 0.0}
    assert (s["individuals"], s["rows_per_individual"], s["stable_agree"], s["advance"]) == (3, 2.0, 1.0, 1.0)


def test_unlinked_rows_score_as_the_brute_force_says():
    """Every row its own individual (what the release writes today): rows per individual {1: 1} against
    {3: 1/3, 2: 1/3, 1: 1/3}, no pair of consecutive rows to compare."""
    unlinked = REAL.assign(id=[f"s{i}" for i in range(len(REAL))])
    s = scores(unlinked)
    assert s["rows_per_individual_tvd"] == pytest.approx(2 / 3)
    assert s["stable_agree"] is None and s["advance"] is None and s["transitions_tvd"] == {"EMP": 1.0}


def test_linked_rows_that_break_the_declaration_are_counted():
    """x: SEX changes and AGE jumps two in one year; y: consistent, but EMP 0 -> 1 where the real pairs have
    1 -> 1 twice and 1 -> 0 once."""
    synthetic = frame([("x", 2012, 30, 1, 1, "a"), ("x", 2013, 32, 2, 1, "a"),
                       ("y", 2013, 40, 2, 0, "a"), ("y", 2015, 42, 2, 1, "b")])
    s = scores(synthetic)
    assert s["stable_agree"] == 0.5 and s["advance"] == 0.5
    # real transitions 1->1: 2/3, 1->0: 1/3; synthetic 1->1: 1/2, 0->1: 1/2
    assert s["transitions_tvd"]["EMP"] == pytest.approx(0.5 * (abs(2 / 3 - 1 / 2) + 1 / 3 + 1 / 2))
    assert s["rows_per_individual_tvd"] == pytest.approx(2 / 3)  # {2: 1} against thirds of 3, 2 and 1


def test_the_margins_floor_is_the_brute_force_least_tvd():
    """One step: 2 x 2 tables with the synthetic margins (rows 1/4, 3/4; columns 1/2, 1/2) have one free cell x in
    [0, 1/4]; the least TVD to the real table over a fine grid of x is the floor."""
    real = {(0, 0): 3, (0, 1): 1, (1, 1): 2}
    synthetic = {(0, 1, 0, 0): 1, (0, 1, 1, 0): 1, (0, 1, 1, 1): 2}
    r = np.array([[3, 1], [0, 2]]) / 6
    brute = min(0.5 * np.abs(np.array([[x, 0.25 - x], [0.5 - x, 0.25 + x]]) - r).sum()
                for x in np.linspace(0, 0.25, 25_001))
    assert margins_floor(real, synthetic) == pytest.approx(brute, abs=1e-5)
    assert margins_floor(real, {(0, 1, a, b): n for (a, b), n in real.items()}) == pytest.approx(0.0, abs=1e-9)
    assert margins_floor(real, {}) == 1.0 and margins_floor({}, {}) == 0.0
    # a code the real pairs never start from: its margin cannot overlap at all
    assert margins_floor({(0, 0): 1}, {(0, 1, 0, 0): 1, (0, 1, 2, 0): 1}) == pytest.approx(0.5)
    # pooled, 0 -> 1 and 1 -> 0 have the margins of 0 -> 0 and 1 -> 1, but not at each step: one pair a step
    # starts from 0 and ends at 1, the other starts from 1 and ends at 0, so no linking of them overlaps the real
    assert margins_floor({(0, 0): 1, (1, 1): 1}, {(0, 1, 0, 1): 1, (1, 2, 1, 0): 1}) == pytest.approx(1.0)


def _least_tvd(real: dict, synthetic: dict, codes: int) -> float:
    """The least TVD over tables Q[g] >= 0 with each step's synthetic margins, directly: minimise
    1/2 sum |P - sum_g Q[g]| with slacks (a linear program over the tables, not over overlaps)."""
    from scipy.optimize import linprog
    steps = sorted({(s, t) for s, t, _, _ in synthetic})
    total_s, total_r = sum(synthetic.values()), sum(real.values())
    k, n = codes * codes, len(steps) * codes * codes
    p = np.zeros(k)
    for (a, b), c in real.items():
        p[a * codes + b] = c / total_r
    eq, rhs = [], []
    for g, step in enumerate(steps):
        q = np.zeros((codes, codes))
        for (s, t, a, b), c in synthetic.items():
            if (s, t) == step:
                q[a, b] += c / total_s
        for axis in (0, 1):
            for v in range(codes):
                row = np.zeros(n + k)
                block = np.zeros((codes, codes))
                if axis == 0:
                    block[v, :] = 1
                else:
                    block[:, v] = 1
                row[g * k:(g + 1) * k] = block.ravel()
                eq.append(row)
                rhs.append(q.sum(axis=1)[v] if axis == 0 else q.sum(axis=0)[v])
    ub, ub_rhs = [], []
    for cell in range(k):  # slack >= +-(p - sum_g Q[g])
        for sign in (1, -1):
            row = np.zeros(n + k)
            row[[g * k + cell for g in range(len(steps))]] = sign
            row[n + cell] = -1
            ub.append(row)
            ub_rhs.append(sign * p[cell])
    cost = np.r_[np.zeros(n), 0.5 * np.ones(k)]
    return linprog(cost, A_ub=np.array(ub), b_ub=ub_rhs, A_eq=np.array(eq), b_eq=rhs, method="highs").fun


def test_the_margins_floor_is_the_least_tvd_over_tables_with_each_steps_margins():
    rng = np.random.default_rng(0)
    for _ in range(20):
        real = {(int(a), int(b)): int(rng.integers(0, 6)) for a in range(3) for b in range(3)}
        real = {c: n for c, n in real.items() if n} or {(0, 0): 1}
        synthetic = {(s, s + 1, int(a), int(b)): int(rng.integers(0, 4)) for s in range(2) for a in range(3)
                     for b in range(3)}
        synthetic = {c: n for c, n in synthetic.items() if n} or {(0, 1, 0, 0): 1}
        assert margins_floor(real, synthetic) == pytest.approx(_least_tvd(real, synthetic, 3), abs=1e-7)


def test_the_score_command_reports_individuals(tmp_path, capsys):
    (tmp_path / "p.json").write_text(json.dumps(params()))
    REAL.to_csv(tmp_path / "real.csv", index=False)
    REAL.assign(epsilon=1).to_csv(tmp_path / "synthetic.csv", index=False)
    code = main(["score", "--params", str(tmp_path / "p.json"), "--real", str(tmp_path / "real.csv"),
                 "--synthetic", str(tmp_path / "synthetic.csv"), "--id-column", "id", "--group-columns", "none"])
    out = capsys.readouterr()
    assert code == 0 and "individuals: 3 with 2.00 rows each" in out.err
    assert "EMP 0.000 (margins floor 0.000)" in out.err
    assert json.loads(out.out)["runs"]["1"]["individuals"]["advance"] == 1.0
    code = main(["score", "--params", str(tmp_path / "p.json"), "--real", str(tmp_path / "real.csv"),
                 "--synthetic", str(tmp_path / "synthetic.csv"), "--id-column", "nope"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--id-column nope" in err[0]


def test_a_release_with_the_section_links_its_rows_and_scores_them():
    """The section's release names synthetic individuals (tests/test_linking.py checks how); its scores read them."""
    from dpsyn.api import release
    rng = np.random.default_rng(0)
    private = frame([(f"p{i // 3}", 2012 + i % 3, 20 + i % 3 + (i // 3) % 50, 1 + (i // 3) % 2, rng.integers(0, 2),
                      "ab"[i % 2]) for i in range(300)])
    (run,) = release(private, params(), None, "histogram", seed=1, group_columns=("YEAR",), id_column="id")
    synthetic = run.table.astype(str).assign(id=run.individuals.astype(str))
    evaluator = Evaluator(parse_schema(params()), private, EvaluationOptions(group_columns=(), id_column="id"))
    people = next(iter(evaluator.evaluate(synthetic)["runs"].values()))["individuals"]
    assert people["rows_per_individual"] > 1.5 and people["stable_agree"] == people["advance"] == 1.0


def test_rows_follow_the_clocks_order_whatever_the_file_order():
    """A declaration with follow only (the clock is the first distinct column): the real table reversed scores
    perfectly against itself."""
    schema = parse_schema(params({"follow": ["EMP"]}))
    evaluator = Evaluator(schema, REAL, EvaluationOptions(group_columns=(), id_column="id"))
    run = next(iter(evaluator.evaluate(REAL.iloc[::-1].reset_index(drop=True))["runs"].values()))
    assert run["individuals"]["transitions_tvd"] == {"EMP": 0.0}
    assert "stable_agree" not in run["individuals"]  # nothing declared to agree or advance
