"""The budget plan (budget.py, lib/privacy/plan.py): built without private data, enforced by the ledger per node."""
from pathlib import Path

import pytest

from dpsyn import main
from dpsyn.api import plan, release
from dpsyn.budget import METHOD
from dpsyn.stages.pipeline import GROUP_VALUES, REWEIGHTING
from dpsyn.lib.privacy.accounting import BudgetExceeded, Ledger
from dpsyn.lib.privacy.plan import Node, Plan
from test_rap import data
from test_reliability import group_level_frame, group_level_schema, runs

ROOT = Path(__file__).resolve().parent.parent
PINNED = Path(__file__).parent / "fixtures" / "demo_plan.txt"


def test_main_plan_for_the_demo_parameters_is_pinned(capsys):
    """Reads parameters.json and the public file only; the printed tree is the one the fixture holds."""
    code = main.main(["plan", "--params", str(ROOT / "parameters.json"), "--public",
                      str(ROOT / "data" / "demo" / "public.csv"), "--quiet"])
    assert code == 0
    assert capsys.readouterr().out == PINNED.read_text()


def test_plan_refuses_what_a_release_would_refuse(capsys):
    code = main.main(["plan", "--params", str(ROOT / "parameters.json"), "--method", "superquail", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "needs --target" in err[0]


def test_a_plan_needs_no_private_file(tmp_path):
    frame, params = data()
    missing = tmp_path / "no-such-private.csv"
    plans = plan(params, None, "histogram", reweight="moments:AGE[20,60]", reweight_share=0.2)
    assert [p.epsilon for p in plans] == [1.0, 3.0] and not missing.exists()
    first = plans[0]
    assert [n.name for n in first.nodes] == ["values inside bins", REWEIGHTING, METHOD]
    assert first.node(REWEIGHTING).share == 0.2 and "AGE [20, 60] ±" in first.node(REWEIGHTING).note
    assert sum(n.share for n in first.nodes) == pytest.approx(1.0)


@pytest.mark.parametrize("method, options", [
    ("dpsyn", {}), ("dpsyn", {"regime": "public"}), ("dpsyn", {"regime": "one-way"}),
    ("dpsyn", {"regime": "two-way"}), ("dpsyn", {"regime": "adaptive"}), ("histogram", {}),
    ("rap", {"target": "LABEL", "rounds": 2, "per_round": 2, "rows": 100, "steps": 3}),
    ("superquail", {"target": "LABEL"}),
])
def test_every_charge_names_a_node_and_each_node_stays_within_its_rho(method, options):
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    (run,) = release(frame, params, None, method, options, seed=4, group_columns=("SEX",),
                     reweight="moments:AGE,HOURS", reweight_share=0.1)
    ledger = run.ledger
    names = {n.name for n in ledger.plan.nodes}
    assert all(c.node in names for c in ledger.charges)
    for name in names:
        assert ledger.node_spent(name) <= ledger.node_rho(name) * (1 + 1e-12)
        assert ledger.node_spent(name) == pytest.approx(ledger.node_rho(name), rel=1e-9)  # each node spends its rho
    assert ledger.spent <= ledger.budget and ledger.spent == pytest.approx(ledger.budget, rel=1e-9)
    assert ledger.to_dict()["plan"]["nodes"][-1]["spent"] == pytest.approx(ledger.node_rho(METHOD))


def test_group_level_values_are_one_node_with_a_child_per_column():
    (run,) = release(group_level_frame(6), {"runs": runs(1), "schema": group_level_schema(6)}, seed=1)
    node = run.ledger.plan.node(GROUP_VALUES)
    assert node.share == pytest.approx(0.2) and len(node.children) == 6
    assert run.ledger.node_spent(GROUP_VALUES) == pytest.approx(run.ledger.node_rho(GROUP_VALUES), rel=1e-9)


def two_node_ledger() -> Ledger:
    budget = Ledger(1.0, 1e-9).budget
    return Ledger(1.0, 1e-9, plan=Plan(1.0, 1e-9, 1, budget, (Node("a", 0.25), Node("b", 0.75))))


def test_a_charge_past_its_node_or_outside_every_node_is_refused():
    ledger = two_node_ledger()
    with pytest.raises(BudgetExceeded, match="outside every plan node"):
        ledger.charge("loose", "gaussian", 1.0, 1.0, 1e-6)
    with ledger.spending("a"):
        assert ledger.remaining == pytest.approx(0.25 * ledger.budget)
        with pytest.raises(BudgetExceeded, match="node 'a'"):
            ledger.charge("too much", "gaussian", 1.0, 1.0, 0.3 * ledger.budget)
        ledger.charge("all of a", "gaussian", 1.0, 1.0, ledger.remaining)
        assert ledger.remaining == 0.0
        with pytest.raises(BudgetExceeded, match="do not nest"):
            with ledger.spending("b"):
                pass
    with ledger.spending("b"):
        ledger.charge("all of b", "gaussian", 1.0, 1.0, ledger.grant(0.75 * ledger.budget, "b"))
    assert ledger.spent <= ledger.budget and ledger.spent == pytest.approx(ledger.budget, rel=1e-12)
    with pytest.raises(KeyError):
        with ledger.spending("c"):
            pass


def test_a_plan_refuses_shares_that_do_not_sum_to_one():
    with pytest.raises(ValueError, match="sum to 1"):
        Plan(1.0, 1e-9, 1, 0.01, (Node("a", 0.5), Node("b", 0.4)))
    with pytest.raises(ValueError, match="distinct names"):
        Plan(1.0, 1e-9, 1, 0.01, (Node("a", 0.5), Node("a", 0.5)))


def test_synthesize_help_lists_at_most_24_options_and_no_none_defaults(capsys):
    with pytest.raises(SystemExit):
        main.main(["synthesize", "--help"])
    text = capsys.readouterr().out
    options = [line for line in text.splitlines() if line.startswith("  -")]
    assert len(options) <= 24 and "(default: None)" not in text
    assert "--regime" not in text and "--target" in text and "also with --method superquail" in text


def test_plan_tuning_lists_the_table_and_the_expert_options(capsys):
    assert main.main(["plan", "--tuning"]) == 0
    out = capsys.readouterr().out
    assert "reweight_share = 0.1: default share of a run's rho for the reweighting measures" in out
    assert "expert options of --method dpsyn:" in out and "--regime (default None)" in out


def test_set_overrides_a_tuned_value_for_one_command_only(capsys):
    from dpsyn.lib.tuning import T
    assert main.main(["plan", "--params", str(ROOT / "parameters.json"), "--set", "group_values_share=0.1",
                      "--quiet"]) == 0
    assert "group-level values 10%" in capsys.readouterr().out
    assert main.main(["plan", "--params", str(ROOT / "parameters.json"), "--quiet"]) == 0
    assert "group-level values 5%" in capsys.readouterr().out and T.group_values_share == 0.05
    assert main.main(["plan", "--params", str(ROOT / "parameters.json"), "--set", "nope=1", "--set",
                      "reweight_share=x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --set nope: no tuned value of that name (main.py plan --tuning lists them)",
                   "error: --set reweight_share=x: expected float like 0.1"]


def test_the_release_holds_raw_values_only_of_columns_a_run_reads():
    from dpsyn.method import METHODS
    from dpsyn.stages.pipeline import GroupLevel, Pipeline
    from dpsyn.stages.reweight import ReweightSpec
    numeric = ("D", "W", "X", "Y", "Z")
    assert Pipeline().raw_columns(METHODS["dpsyn"], numeric) == ()
    pipeline = Pipeline((GroupLevel("D", ("G",), 0.0, 1.0, 0.1),), ("X",), ReweightSpec(moments=(("Z", "Y"),)))
    assert pipeline.raw_columns(METHODS["dpsyn"], numeric) == ("D", "X", "Y", "Z")
    assert Pipeline().raw_columns(METHODS["rap"], numeric) == numeric  # it synthesizes raw numbers


def test_without_groups_the_noisy_total_is_charged_as_its_plan_node_says():
    """The noisy total's share (method/planner.py total_share: from epsilon, theta, the method's rho and whether
    there are groups) is decided before the data is read, and the charge is that node's share of the method's
    rho, with values inside bins and reweighting around the method."""
    frame, params = data()
    params = dict(params, runs=params["runs"][:1])
    for reweight in ({}, {"reweight": "moments:AGE,HOURS", "reweight_share": 0.1}):
        (run,) = release(frame, params, None, "dpsyn", {}, seed=4, group_columns=(), **reweight)
        ledger = run.ledger
        child = next(c for c in ledger.plan.node(METHOD).children if c.name == "noisy total")
        charge = next(c for c in ledger.charges if c.step == "noisy total")
        assert charge.rho == pytest.approx(child.share * ledger.node_rho(METHOD), rel=1e-12)


def test_the_noisy_totals_share_brings_its_noise_to_the_stated_rows_within_its_cap():
    from dpsyn.lib.tuning import T
    from dpsyn.method.planner import total_share
    write_up = total_share(0.1, 1, True)
    assert total_share(0.1, 1, False) == write_up  # no rho (the write-up planner): the write-up's share
    assert total_share(0.1, 1, False, rho=1.7e-4) == T.planner_total_cap  # the cap
    share = total_share(1.0, 1, False, rho=0.0126)  # noise sd planner_total_rows rows
    assert (1 / (2 * share * 0.0126)) ** 0.5 == pytest.approx(T.planner_total_rows)
    assert total_share(10.0, 1, False, rho=10.0) == total_share(10.0, 1, True)  # never below the write-up's
