"""All-or-nothing commits, refusals before any measurement, and inputs that used to crash."""
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsyn import api
from dpsyn.api import release
from dpsyn.stages.pipeline import group_value_share as group_value_shares
from helpers import write_params
from dpsyn.dataloader import writing
from dpsyn.dataloader.reading import DataError
from dpsyn.dataloader.writing import StagedFiles, check_writable
from dpsyn.method.base import OptionError
from test_release import release_args, run_main

ROOT = Path(__file__).resolve().parent.parent


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---- the commit ---------------------------------------------------------------------------------------------


@pytest.fixture
def stop_handlers():
    """SIGINT raising KeyboardInterrupt for the test (a runner in the background may ignore it); restored after."""
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGTERM, previous[0])
    signal.signal(signal.SIGINT, previous[1])


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_the_commit_completes_it_and_exits_0(sprint2_files, tmp_path, capsys, monkeypatch,
                                                             stop_handlers, sig):
    params, private, public = sprint2_files
    real_replace = os.replace
    moves = []

    def signalled_replace(src, dst):
        if not moves:
            os.kill(os.getpid(), getattr(signal, sig))  # arrives between the first and second move
        moves.append(dst)
        return real_replace(src, dst)
    monkeypatch.setattr(writing.os, "replace", signalled_replace)
    out = tmp_path / "out" / "sub.csv"
    code, err = run_main(release_args(params, private, public, out, "--seed", "1"), capsys)
    names = sorted(p.name for p in out.parent.iterdir())
    assert code == 0, err
    assert names == ["sub.csv", "sub.ledger.eps0.1.json", "sub.ledger.eps1.json", "sub.ledger.eps10.json"]
    assert len(moves) == 4
    assert "stop signal arrived while the output was being committed" in err and "error" not in err


def test_a_signal_after_the_commit_says_the_output_is_complete(sprint2_files, tmp_path, capsys, monkeypatch,
                                                               stop_handlers):
    params, private, public = sprint2_files
    real_commit = api.ReleaseFiles.commit

    def then_stopped(*args, **kwargs):
        paths = real_commit(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return paths
    monkeypatch.setattr(api.ReleaseFiles, "commit", then_stopped)
    out = tmp_path / "out" / "sub.csv"
    code, err = run_main(release_args(params, private, public, out, "--seed", "1"), capsys)
    assert code == 0 and "interrupted after the output was committed; it is complete" in err
    assert "no output written" not in err
    assert len(list(out.parent.iterdir())) == 4


def test_an_error_before_the_commit_leaves_nothing_at_all(sprint2_files, tmp_path, capsys, monkeypatch):
    params, private, public = sprint2_files

    def broken(*args, **kwargs):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(writing.os, "rename", broken)  # the one atomic step
    out = tmp_path / "out" / "sub.csv"
    code, err = run_main(release_args(params, private, public, out, "--seed", "1"), capsys)
    assert code != 0 and "disk full" in err
    assert list(out.parent.iterdir()) == []


def test_an_error_inside_the_commit_says_the_next_run_completes_it(tmp_path, monkeypatch):
    out = tmp_path / "s.csv"
    real_replace = os.replace

    def full_after_one(src, dst):
        if any(tmp_path.glob("s.*")):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)
    monkeypatch.setattr(writing.os, "replace", full_after_one)
    with StagedFiles(out) as staged:
        for name in ("s.csv", "s.ledger.eps1.json"):
            staged.path(tmp_path / name).write_text(name)
        with pytest.raises(OSError, match="cut short .*No space left.*the next release into .* completes it"):
            staged.commit()
    monkeypatch.setattr(writing.os, "replace", real_replace)
    check_writable(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.ledger.eps1.json"]


KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from dpsyn.dataloader import writing
    out = Path(sys.argv[1]); when = sys.argv[2]
    real = os.replace
    def killing_replace(src, dst):
        real(src, dst)
        os.kill(os.getpid(), signal.SIGKILL)  # after the first file is in place
    writing.os.replace = killing_replace
    staged = writing.StagedFiles(out)
    for name in ("s.csv", "s.ledger.eps1.json", "s.ledger.eps10.json"):
        staged.path(out.with_name(name)).write_text("new " + name)
    if when == "writing":
        os.kill(os.getpid(), signal.SIGKILL)
    staged.commit()
""")


def killed_writer(out: Path, when: str) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", KILLED_WRITER, str(out), when], env=env).returncode


def test_a_kill_during_the_commit_is_completed_by_the_next_run(tmp_path, caplog):
    out = tmp_path / "s.csv"
    for name in ("s.csv", "s.ledger.eps1.json", "s.ledger.eps10.json"):
        (tmp_path / name).write_text("old " + name)
    assert killed_writer(out, "commit") == -signal.SIGKILL
    assert hidden(tmp_path) == [".s.csv.commit"]  # the journal says the commit is under way
    check_writable(out)
    assert hidden(tmp_path) == []
    for name in ("s.csv", "s.ledger.eps1.json", "s.ledger.eps10.json"):  # every file new: none mixed
        assert (tmp_path / name).read_text() == "new " + name
    assert "its commit is now complete (2 file(s) moved)" in caplog.text


def test_a_kill_while_writing_leaves_a_staging_folder_the_next_run_removes(tmp_path, caplog):
    out = tmp_path / "s.csv"
    assert killed_writer(out, "writing") == -signal.SIGKILL
    assert [n.split("-")[0] for n in hidden(tmp_path)] == [".s.csv.staging"]
    (tmp_path / ".s.csv.x1y2.partial").write_text("an earlier version's temporary")
    with StagedFiles(out) as staged:
        staged.path(out).write_text("fresh")
        staged.commit()
    assert hidden(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]
    assert "removed 2 unfinished staging folder(s) or file(s)" in caplog.text


def test_a_live_writer_into_the_same_output_is_refused(tmp_path):
    out = tmp_path / "s.csv"
    other = tmp_path / ".s.csv.staging-abc"
    other.mkdir()
    (other / writing.OWNER).write_text(writing._owner(os.getppid()))  # a process that is running
    with pytest.raises(DataError, match="another release .* is writing"):
        check_writable(out)
    (other / writing.OWNER).write_text(f"{os.getppid()} 1")  # same id, another start time: a dead writer
    check_writable(out)
    assert not other.exists()


def test_staged_files_stay_in_the_outputs_folder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    with StagedFiles(tmp_path / "s.csv") as staged:
        with pytest.raises(ValueError, match="not in"):
            staged.path(tmp_path / "elsewhere" / "x.json")
    assert hidden(tmp_path) == []


# ---- refusals before any measurement ----------------------------------------------------------------------


def grouped_schema(extra: dict | None = None) -> dict:
    return {"PUMA": {"dtype": "str", "values": ["a", "b", "c"]}, "YEAR": {"dtype": "int", "values": [2018, 2019]},
            "A": {"dtype": "str", "values": ["x", "y"]}, "N": {"dtype": "int", "min": 0, "max": 9}, **(extra or {})}


def grouped_frame(n: int = 600, seed: int = 0, ids: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"PUMA": rng.choice(["a", "b", "c"], n), "YEAR": rng.choice([2018, 2019], n),
                          "A": rng.choice(["x", "y"], n), "N": rng.integers(0, 10, n)})
    if ids:
        frame["pid"] = np.arange(n) // 2
    return frame


def runs(theta: int, delta: float = 1e-9, max_records: int = 2000) -> list:
    return [{"epsilon": 1.0, "delta": delta, "max_records": max_records, "max_records_per_individual": theta}]


def test_distinct_per_individual_without_ids_is_refused_when_theta_exceeds_one(tmp_path, capsys):
    params = {"runs": runs(3), "schema": grouped_schema(), "distinct_per_individual": ["YEAR"]}
    (tmp_path / "p.json").write_text(json.dumps(params))
    grouped_frame().to_csv(tmp_path / "private.csv", index=False)
    out = tmp_path / "out" / "s.csv"
    code, err = run_main(["--params", tmp_path / "p.json", "--private", tmp_path / "private.csv", "--output", out],
                         capsys)
    lines = [line for line in err.splitlines() if line.startswith("error")]
    assert code == 2 and len(lines) == 1 and "needs an id column" in lines[0]
    assert list(out.parent.iterdir()) == []


def test_distinct_per_individual_with_ids_or_theta_one_releases():
    params = {"runs": runs(3), "schema": grouped_schema(), "distinct_per_individual": ["YEAR"]}
    (run,) = release(grouped_frame(ids=True), params, id_column="pid", seed=1)
    assert run.ledger.spent <= run.ledger.budget
    (run,) = release(grouped_frame(), dict(params, runs=runs(1)), seed=1)  # theta 1: sqrt(theta) = theta
    assert len(run.table) > 0


def test_a_release_runs_blas_on_one_thread(monkeypatch):
    """One --seed gives the same release on any machine: a multi-threaded BLAS sums in an order that depends on
    the machine's cores, so a release holds BLAS to one thread while it synthesizes (and gives the caller's
    counts back after it)."""
    from threadpoolctl import threadpool_info, threadpool_limits
    from dpsyn.stages import run as stages_run

    def blas_threads():  # each loaded BLAS library's threads (a single-threaded build says 1 whatever is asked)
        return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    seen = []
    real = stages_run.records_of

    def spy(*args, **kwargs):  # inside synthesize_run, after the method
        seen.append(set(blas_threads().values()))
        return real(*args, **kwargs)

    monkeypatch.setattr(stages_run, "records_of", spy)
    with threadpool_limits(2, user_api="blas"):  # the caller's: two threads, whatever the machine
        before = blas_threads()
        release(grouped_frame(), {"runs": runs(1), "schema": grouped_schema()}, seed=1)
        after = blas_threads()
    assert 2 in before.values()  # so the limit has something to change
    assert seen == [{1}] and {path: after[path] for path in before} == before


def test_refusals_come_before_the_private_file_is_opened(tmp_path):
    """The private path does not exist: each refusal must be raised before anything tries to read it."""
    missing = tmp_path / "no-such-private.csv"
    params = {"runs": runs(3), "schema": grouped_schema(), "distinct_per_individual": ["YEAR"]}
    with pytest.raises(OptionError, match="needs an id column"):
        release(missing, params)
    params = {"runs": runs(1), "schema": grouped_schema({"B": {"dtype": "int", "min": 0, "max": 39},
                                                         "C": {"dtype": "int", "min": 0, "max": 39}})}
    with pytest.raises(OptionError, match=r"marginals:B×C has 1600 cells; at most 1000"):
        release(missing, params, reweight="marginals:B×C", bins=40)
    with pytest.raises(OptionError, match="more than 75% together; lower --reweight-share"):
        release(missing, params, reweight="moments:B,C", reweight_share=0.8)


def group_level_schema(columns: int) -> dict:
    extra = {f"G{i}": {"dtype": "int", "min": 0, "max": 50, "constant_within": ["PUMA"]} for i in range(columns)}
    return grouped_schema(extra)


def group_level_frame(columns: int) -> pd.DataFrame:
    frame = grouped_frame()
    for i in range(columns):
        frame[f"G{i}"] = frame["PUMA"].map({"a": 3 + i, "b": 17, "c": 40 - i})
    return frame


def test_group_level_shares_are_capped():
    assert group_value_shares(0) == 0.0
    assert group_value_shares(1) == pytest.approx(0.05) and group_value_shares(4) == pytest.approx(0.05)
    for k in (5, 10, 20, 50):
        assert k * group_value_shares(k) == pytest.approx(0.2)


def test_twenty_group_level_columns_release_within_the_budget():
    (run,) = release(group_level_frame(20), {"runs": runs(1), "schema": group_level_schema(20)}, seed=1)
    spent = [c.rho for c in run.ledger.charges if c.step.startswith("G")]
    assert sum(spent) == pytest.approx(0.2 * run.ledger.budget, rel=1e-9)
    assert run.ledger.spent == pytest.approx(run.ledger.budget, rel=1e-9)
    assert (run.table.groupby("PUMA", observed=True)["G5"].nunique() == 1).all()


# ---- inputs that used to crash or pass silently -----------------------------------------------------------


@pytest.mark.parametrize("bad", ["inf", "-inf", "1e308"])
def test_non_finite_public_values_are_dropped_with_a_line_and_never_a_range(tmp_path, caplog, bad):
    caplog.set_level(logging.INFO)
    schema = {"A": {"dtype": "str", "values": ["x", "y"]}, "V": {"dtype": "float"}}
    rng = np.random.default_rng(0)
    public = pd.DataFrame({"A": rng.choice(["x", "y"], 200), "V": rng.uniform(0, 10, 200).round(2).astype(str)})
    public.loc[[3, 7], "V"] = bad
    private = pd.DataFrame({"A": rng.choice(["x", "y"], 300), "V": rng.uniform(0, 10, 300).round(2)})
    (run,) = release(private, {"runs": runs(1), "schema": schema}, public=public, seed=1, on_invalid="clip")
    values = run.table["V"].astype(float)
    assert np.isfinite(values).all() and values.max() <= 10
    assert "V: 2 not finite or beyond ±9.007e+15" in caplog.text


def test_non_finite_private_values_are_an_error_naming_the_column(tmp_path, capsys):
    write_params(tmp_path / "p.json", {"A": {"dtype": "str", "values": ["x", "y"]},
                                       "V": {"dtype": "float", "min": 0, "max": 10}})
    pd.DataFrame({"A": ["x", "y", "x"], "V": ["1.5", "inf", "2"]}).to_csv(tmp_path / "private.csv", index=False)
    out = tmp_path / "out" / "s.csv"
    code, err = run_main(["--params", tmp_path / "p.json", "--private", tmp_path / "private.csv", "--output", out],
                         capsys)
    assert code == 2 and "V: not finite or beyond ±9.007e+15" in err
    assert not out.exists()


def test_a_schema_range_beyond_two_to_the_53_is_refused(tmp_path):
    from dpsyn.dataloader.schema import SchemaError, parse_schema
    with pytest.raises(SchemaError, match="within ±9.007e\\+15"):
        parse_schema({"runs": runs(1), "schema": {"V": {"dtype": "float", "min": 0, "max": 1e308}}})


@pytest.mark.parametrize("regime", ["public", "one-way", "two-way", "adaptive"])
@pytest.mark.parametrize("groups", [("PUMA", "YEAR"), ()])
def test_one_valued_columns_release_under_every_regime(regime, groups):
    schema = {"PUMA": {"dtype": "str", "values": ["a", "b"]}, "YEAR": {"dtype": "int", "values": [2018, 2019]},
              "A": {"dtype": "str", "values": ["x"]}}
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"PUMA": rng.choice(["a", "b"], 400), "YEAR": rng.choice([2018, 2019], 400), "A": "x"})
    if not groups:
        schema, frame = {"A": schema["A"]}, frame[["A"]]
    (run,) = release(frame, {"runs": runs(1), "schema": schema}, options={"regime": regime}, group_columns=groups,
                     seed=3)
    assert len(run.table) > 0 and set(run.table["A"].astype(str)) == {"x"}
    assert run.ledger.spent == pytest.approx(run.ledger.budget, rel=1e-9)


DEGENERATE = {  # schema beside the group column G, and the frame's columns
    "a one-valued column beside the groups": ({"K": {"values": ["only"]}}, {"K": "only"}),
    "group columns only": ({"X": {"values": [0, 1, 2]}}, {"X": [0, 1, 2]}),
    "a float range of one value": ({"X": {"values": [0, 1, 2]}, "F": {"dtype": "float", "min": 2.5, "max": 2.5}},
                                   {"X": [0, 1, 2], "F": 2.5}),
}


@pytest.mark.parametrize("shape", DEGENERATE)
@pytest.mark.parametrize("method", ["dpsyn", "histogram", "rap"])
def test_every_method_spends_its_whole_budget_on_degenerate_schemas(method, shape):
    """Under the default options every method releases and spends exactly its budget, where its planner has a
    column of one value, no column of its own, or a float range of one value to measure."""
    extra, values = DEGENERATE[shape]
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"G": rng.choice(["a", "b"], 600)})
    for column, value in values.items():
        frame[column] = rng.choice(value, 600) if isinstance(value, list) else value
    groups = ("G", "X") if shape == "group columns only" else ("G",)
    (run,) = release(frame, {"runs": runs(1), "schema": {"G": {"values": ["a", "b"]}, **extra}}, None, method,
                     group_columns=groups, seed=3)
    assert len(run.table) > 0 and run.ledger.spent == pytest.approx(run.ledger.budget, rel=1e-9)
    if "F" in values:
        assert (run.table["F"] == 2.5).all()


def test_delta_above_one_over_max_records_is_warned(caplog):
    frame = grouped_frame()
    release(frame, {"runs": runs(1, delta=0.01, max_records=1000), "schema": grouped_schema()}, seed=1)
    assert "delta 0.01 is above 1/max_records = 0.001" in caplog.text
    caplog.clear()
    release(frame, {"runs": runs(1, delta=1e-9, max_records=1000), "schema": grouped_schema()}, seed=1)
    assert "above 1/max_records" not in caplog.text
