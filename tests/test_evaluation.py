"""Evaluation: Sprint-2 score, workload TVD and classifier utility on hand-built tables."""
import json

import numpy as np
import pandas as pd
import pytest

from dpsyn import main
from dpsyn.dataloader.schema import parse_schema
from dpsyn.evaluation.binning import SPRINT2_EDGES, encode_for_evaluation, evaluation_coders
from dpsyn.evaluation.scoring import WARNING, EvaluationOptions, Evaluator
from dpsyn.evaluation.utility import UtilityTest, _rates
from helpers import write_params

SCHEMA_RAW = {"G": {"dtype": "str", "values": ["g1", "g2"]},
              "X": {"dtype": "str", "values": ["a", "b", "c"]},
              "AGE": {"dtype": "int", "min": 0, "max": 99}}
RUNS = [{"epsilon": 1, "delta": 1e-9, "max_records": 10 ** 5, "max_records_per_individual": 1}]
SCHEMA = parse_schema({"runs": RUNS, "schema": SCHEMA_RAW})
BY_G = EvaluationOptions(group_columns=("G",))


def table(g, x, age) -> pd.DataFrame:
    return pd.DataFrame({"G": g, "X": x, "AGE": [str(a) for a in age]})


def run(real, synth, options=BY_G) -> dict:
    return next(iter(Evaluator(SCHEMA, real, options).evaluate(synth)["runs"].values()))


def test_identical_tables_score_1000_and_tvd_0():
    real = table(["g1", "g1", "g2", "g2"], ["a", "b", "c", "a"], [10, 30, 50, 70])
    result = run(real, real.copy())
    assert result["sprint2_score"] == 1000
    assert all(part["mean"] == 0 and part["max"] == 0 for part in result["tvd"].values())


def test_disjoint_tables_score_0_and_tvd_1():
    real = table(["g1"] * 4, ["a"] * 4, [10] * 4)
    synth = table(["g1"] * 4, ["b"] * 4, [90] * 4)
    result = run(real, synth)
    assert result["sprint2_score"] == 0
    assert result["tvd"]["1-way"]["mean"] == 1 and result["tvd"]["2-way"]["mean"] == 1


def test_a_group_missing_on_one_side_counts_as_distance_two():
    real = table(["g1", "g1", "g2", "g2"], ["a", "b", "a", "b"], [10, 30, 10, 30])
    synth = real[real.G == "g1"].reset_index(drop=True)
    # g1 identical (0), g2 missing (2): mean 1 -> 1000 * (2 - 1) / 2
    assert run(real, synth)["sprint2_score"] == 500


@pytest.mark.parametrize("synthetic_rows,score", [(1249, 1000), (1250, 0)])
def test_bias_penalty_fires_at_250_rows_and_not_at_249(synthetic_rows, score):
    real = table(["g1"] * 1000, ["a"] * 1000, [40] * 1000)
    synth = table(["g1"] * synthetic_rows, ["a"] * synthetic_rows, [40] * synthetic_rows)
    assert run(real, synth)["sprint2_score"] == score


def test_a_value_on_a_bin_edge_falls_in_the_lower_right_closed_bin():
    real = table(["g1"], ["a"], [20])
    assert run(real, table(["g1"], ["a"], [19]))["tvd"]["1-way"]["max"] == 0  # (-inf, 20]
    assert run(real, table(["g1"], ["a"], [21]))["tvd"]["1-way"]["max"] == 1  # (20, 25]
    coder = evaluation_coders(SCHEMA, real)[2]
    assert list(coder.edges) == SPRINT2_EDGES["AGE"]


def test_hand_computed_tvd_and_score():
    real = table(["g1"] * 4, ["a", "a", "b", "b"], [10] * 4)
    synth = table(["g1"] * 4, ["a", "a", "a", "b"], [10] * 4)
    result = run(real, synth)
    # X: |0.5-0.75| + |0.5-0.25| = 0.5 -> TVD 0.25; AGE identical
    assert result["tvd"]["1-way"]["mean"] == pytest.approx(0.125)
    assert result["tvd"]["1-way"]["max"] == pytest.approx(0.25)
    # every drawn pair is (X, AGE): L1 0.5 -> 1000 * (2 - 0.5) / 2
    assert result["sprint2_score"] == pytest.approx(750)


def test_values_outside_the_schema_get_their_own_code_and_are_counted():
    coders = evaluation_coders(SCHEMA, table(["g1"], ["a"], [10]))
    codes, outside = encode_for_evaluation(coders, table(["g1", "g9"], ["a", "zz"], [10, 500]))
    assert outside == {"G": 1, "X": 1}
    assert codes[1, 0] == coders[0].size - 1 and codes[1, 1] == coders[1].size - 1
    assert codes[1, 2] == len(SPRINT2_EDGES["AGE"]) - 2  # (100, inf)


def test_submission_is_scored_per_epsilon_with_the_mean():
    real = table(["g1"] * 4, ["a", "a", "b", "b"], [10] * 4)
    synth = pd.concat([real.assign(epsilon="1"), table(["g1"] * 4, ["c"] * 4, [10] * 4).assign(epsilon="10")])
    result = Evaluator(SCHEMA, real, BY_G).evaluate(synth)
    assert result["warning"] == WARNING
    assert {k: r["sprint2_score"] for k, r in result["runs"].items()} == {"1": 1000, "10": pytest.approx(0)}
    assert result["sprint2_score_mean"] == pytest.approx(500)


def test_raw_value_errors_by_hand():
    """Mixed marginals pair X with AGE (G is the group column): each is the share with X = v and AGE <= t."""
    real = table(["g1"] * 4, ["a", "a", "b", "c"], [10, 20, 30, 40])
    errors = run(real, real.copy())["mixed_marginals"]
    assert errors["queries"] == 1000 and errors["mean"] == 0 and errors["max"] == 0
    workload = Evaluator(SCHEMA, real, BY_G).mixed
    shifted = real.assign(AGE=["99"] * 4)  # every threshold below 99: no synthetic row meets one
    real_answers = workload.real[0]
    assert run(real, shifted)["mixed_marginals"]["mean"] == pytest.approx(real_answers.mean())
    assert all(col == "X" and v in {"a", "b", "c"} and col2 == "AGE" and 10 <= t <= 40
               for (col, v), (col2, t) in workload.marginals)


def test_linear_thresholds_need_a_target_and_numeric_columns():
    schema = parse_schema({"runs": RUNS, "schema": {"Y": {"dtype": "str", "values": ["n", "y"]},
                                                    "A": {"dtype": "int", "min": 0, "max": 9},
                                                    "B": {"dtype": "float", "min": 0, "max": 1, "null": "N"}}})
    rng = np.random.default_rng(1)
    real = pd.DataFrame({"Y": rng.choice(["n", "y"], 200), "A": rng.integers(0, 10, 200).astype(str),
                         "B": np.where(rng.random(200) < 0.1, "N", rng.random(200).round(3).astype(str))})
    result = next(iter(Evaluator(schema, real, EvaluationOptions(target="Y")).evaluate(real.copy())["runs"].values()))
    assert result["linear_thresholds"]["mean"] == 0 and result["linear_thresholds"]["queries"] == 1000
    no_target = next(iter(Evaluator(schema, real, EvaluationOptions()).evaluate(real)["runs"].values()))
    assert "linear_thresholds" not in no_target and "mixed_marginals" in no_target


def test_group_rates_by_hand():
    y = np.array(["1", "1", "0", "0"])
    pred = np.array(["1", "0", "1", "0"])
    assert _rates(y, pred, "1") == {"rows": 4, "accuracy": 0.5, "false_negative_rate": 0.5,
                                    "false_positive_rate": 0.5}


def test_classifier_learns_a_determined_target_from_synthetic_data():
    schema = parse_schema({"runs": RUNS,
                           "schema": {"S": {"dtype": "str", "values": ["m", "f"]},
                                      "X": {"dtype": "str", "values": ["a", "b"]},
                                      "Y": {"dtype": "int", "values": [0, 1]}}})
    rng = np.random.default_rng(0)
    x = rng.choice(["a", "b"], 400)
    real = pd.DataFrame({"S": rng.choice(["m", "f"], 400), "X": x, "Y": np.where(x == "a", "1", "0")})
    flipped = real.assign(Y=np.where(x == "a", "0", "1"))
    test = UtilityTest(real, schema, "Y", "S")
    good, bad = test.score(real.copy()), test.score(flipped)
    assert good["trained_on_real"]["accuracy"] == 1 and good["trained_on_synthetic"]["accuracy"] == 1
    assert bad["trained_on_synthetic"]["accuracy"] == 0
    groups = good["trained_on_synthetic"]["by_group"]
    assert set(groups["groups"]) == {"m", "f"} and groups["largest_gap"]["accuracy"] == 0


def test_score_command_writes_json_and_says_it_is_not_dp(tmp_path, capsys):
    params = write_params(tmp_path / "params.json", SCHEMA_RAW)
    real = table(["g1", "g1", "g2", "g2"], ["a", "b", "c", "a"], [10, 30, 50, 70])
    real.to_csv(tmp_path / "real.csv", index=False)
    real.assign(epsilon=1.0)[["epsilon", "G", "X", "AGE"]].to_csv(tmp_path / "synth.csv", index=False)
    code = main.main(["score", "--params", str(params), "--real", str(tmp_path / "real.csv"),
                      "--synthetic", str(tmp_path / "synth.csv"), "--group-columns", "G"])
    out, err = capsys.readouterr()
    assert code == 0 and WARNING in err
    result = json.loads(out)
    assert result["runs"]["1"]["sprint2_score"] == 1000 and result["warning"] == WARNING
    base = ["score", "--params", str(params), "--real", str(tmp_path / "real.csv"),
            "--synthetic", str(tmp_path / "synth.csv")]
    capsys.readouterr()
    for bad, message in ((["--target", "NOPE"], "not a schema column"), (["--target", "AGE"], "categorical"),
                         (["--positive", "a"], "--positive needs --target"),
                         (["--target", "X", "--positive", "zz"], "not a value of X")):
        assert main.main(base + bad) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_report_command_writes_one_html_page_with_plots(tmp_path):
    params = write_params(tmp_path / "params.json", SCHEMA_RAW)
    rng = np.random.default_rng(1)
    real = table(rng.choice(["g1", "g2"], 200), rng.choice(["a", "b", "c"], 200), rng.integers(0, 99, 200))
    real.to_csv(tmp_path / "real.csv", index=False)
    for eps_list, name in (([0.5, 5], "m1"), ([0.5, 5], "m2")):
        pd.concat([real.sample(150, random_state=int(e * 10)).assign(epsilon=e) for e in eps_list])[
            ["epsilon", "G", "X", "AGE"]].to_csv(tmp_path / f"{name}.csv", index=False)
    out = tmp_path / "report.html"
    assert main.main(["report", "--params", str(params), "--real", str(tmp_path / "real.csv"), "--synthetic",
                      f"first={tmp_path / 'm1.csv'}", str(tmp_path / "m2.csv"), "--output", str(out),
                      "--target", "X", "--sensitive", "G", "--group-columns", "G"]) == 0
    page = out.read_text()
    assert WARNING in page and page.count("data:image/png;base64,") == 1 + 1 + 2 + 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_report_opens_with_the_releases_settings_and_a_single_epsilon_as_a_table(tmp_path):
    params = write_params(tmp_path / "params.json", SCHEMA_RAW)
    rng = np.random.default_rng(2)
    real = table(rng.choice(["g1", "g2"], 200), rng.choice(["a", "b", "c"], 200), rng.integers(0, 99, 200))
    real.to_csv(tmp_path / "real.csv", index=False)
    real.sample(150, random_state=1).assign(epsilon=1.0)[["epsilon", "G", "X", "AGE"]].to_csv(
        tmp_path / "s.csv", index=False)
    ledger = {"epsilon": 1.0, "delta": 1e-9, "rho_budget": 0.015, "rho_spent": 0.015, "epsilon_spent": 1.0,
              "charges": [{"step": "x"}], "plan": {"theta": 2, "nodes": [{"name": "method", "share": 1.0,
                                                                          "note": "dpsyn"}]}}
    (tmp_path / "s.ledger.eps1.json").write_text(json.dumps(ledger))
    out = tmp_path / "report.html"
    assert main.main(["report", "--params", str(params), "--real", str(tmp_path / "real.csv"), "--synthetic",
                      f"mine={tmp_path / 's.csv'}", "--output", str(out)]) == 0
    page = out.read_text()
    first_screen = page[:page.index("<h2>Scores</h2>")]
    assert WARNING in first_screen and "Releases (from their ledgers)" in first_screen
    assert "method 100%" in first_screen and ">1e-09<" in first_screen and str(tmp_path / "s.csv") in first_screen
    assert "Error against epsilon" not in page  # one epsilon: the scores table says it all
    assert "Sprint-2 score</b>:" in page and "TVD k-way</b>:" in page


def test_the_report_shows_and_links_sdnist_reports_and_refuses_a_folder_without_one(tmp_path, capsys):
    params = write_params(tmp_path / "params.json", SCHEMA_RAW)
    rng = np.random.default_rng(3)
    real = table(rng.choice(["g1", "g2"], 200), rng.choice(["a", "b", "c"], 200), rng.integers(0, 99, 200))
    real.to_csv(tmp_path / "real.csv", index=False)
    real.sample(150, random_state=1)[["G", "X", "AGE"]].to_csv(tmp_path / "s.csv", index=False)
    folder = tmp_path / "reports" / "ma2019_1"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({  # the fields of an SDNist 2.4 report.json that are read
        "data_description": {"target": {"filename": "ma2019"}},
        "k_marginal": {"k_marginal_synopsys": {"k_marginal_score": 884, "sub_sampling_equivalent": 20}},
        "propensity mean square error": {"pmse_score": 0.0224},
        "unique_exact_matches": {"records matched in target data": 1, "percent records matched in target data": 0.01},
        "inconsistencies": {"summary": [{"Inconsistency Group": g, "Number of Records Inconsistent": n}
                                        for g, n in (("Age", 0), ("Work", 2), ("Housing", 5))]}}))
    out = tmp_path / "report.html"
    base = ["report", "--params", str(params), "--real", str(tmp_path / "real.csv"), "--synthetic",
            f"mine={tmp_path / 's.csv'}", "--output", str(out)]
    assert main.main(base + ["--sdnist", f"mine eps 1={folder}"]) == 0
    page = out.read_text()
    assert '<a href="reports/ma2019_1/report.html">mine eps 1</a>' in page
    assert "<td>884</td>" in page and "<td>7 (0 / 2 / 5)</td>" in page
    capsys.readouterr()
    assert main.main(base + ["--sdnist", str(tmp_path / "reports")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no SDNist report.json there" in err[0]
