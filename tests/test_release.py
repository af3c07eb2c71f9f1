"""End-to-end releases through main.py: output shape, ledgers, determinism, bad input."""
import json

import numpy as np
import pandas as pd
import pytest

from dpsyn import main
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import load_schema
from helpers import run_method, write_params


def run_main(argv, capsys):
    code = main.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def release_args(params, private, public, out, *extra):
    # unbounded Sprint-2 columns take their range from the public file: clip private values to it
    return ["--params", params, "--private", private, "--public", public, "--output", out, "--quiet",
            "--on-invalid", "clip", "--method", "histogram", *extra]


def test_sprint2_shaped_release_end_to_end(sprint2_files, tmp_path, capsys):
    params, private, public = sprint2_files
    out = tmp_path / "out" / "sub.csv"
    code, err = run_main(release_args(params, private, public, out, "--seed", "3"), capsys)
    assert code == 0, err
    assert "seeded noise is not private" in err
    df = pd.read_csv(out)
    schema = load_schema(params)
    assert list(df.columns) == ["epsilon"] + schema.names + ["sim_individual_id"]
    assert sorted(df["epsilon"].unique()) == [0.1, 1.0, 10.0]
    assert df.groupby("epsilon").size().max() <= 5000
    for eps in (0.1, 1, 10):
        ledger = json.loads((out.parent / f"sub.ledger.eps{eps:g}.json").read_text())
        total = sum(c["rho"] for c in ledger["charges"])
        assert ledger["rho_spent"] == pytest.approx(total, rel=1e-12)
        assert ledger["rho_spent"] <= ledger["rho_budget"] and ledger["epsilon_spent"] <= eps  # exactly, no slack
        assert all(c["sensitivity"] == 7 for c in ledger["charges"])  # theta = 7 in Sprint 2
    code, err = run_main(["validate", "--params", params, "--submission", out], capsys)
    assert code == 0, err


def test_same_seed_gives_identical_bytes_and_jobs_do_not_matter(sprint2_files, tmp_path, capsys):
    params, private, public = sprint2_files
    outs = []
    for i, jobs in enumerate([1, 1, 3]):
        out = tmp_path / f"run{i}.csv"
        assert run_main(release_args(params, private, public, out, "--seed", "11", "--jobs", jobs), capsys)[0] == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    other = tmp_path / "other.csv"
    assert run_main(release_args(params, private, public, other, "--seed", "12"), capsys)[0] == 0
    assert other.read_bytes() != outs[0]


def test_dpsyn_release_is_valid_deterministic_and_independent_of_jobs(sprint2_files, tmp_path, capsys):
    params, private, public = sprint2_files
    outs = []
    for jobs in (1, 2):
        out = tmp_path / f"dpsyn{jobs}.csv"
        code, err = run_main(release_args(params, private, public, out, "--seed", "4", "--jobs", jobs,
                                          "--method", "dpsyn", "--group-columns", "YEAR"), capsys)
        assert code == 0, err
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert run_main(["validate", "--params", params, "--submission", tmp_path / "dpsyn1.csv"], capsys)[0] == 0
    for eps in (0.1, 1, 10):
        ledger = json.loads((tmp_path / f"dpsyn1.ledger.eps{eps:g}.json").read_text())
        assert ledger["rho_spent"] <= ledger["rho_budget"] and ledger["epsilon_spent"] <= eps
        assert ledger["rho_spent"] == pytest.approx(ledger["rho_budget"], rel=1e-9)


def test_validate_rejects_a_bad_submission(sprint2_files, tmp_path, capsys):
    params, private, public = sprint2_files
    out = tmp_path / "sub.csv"
    run_main(release_args(params, private, public, out, "--seed", "1"), capsys)
    df = pd.read_csv(out, dtype=str)
    df.loc[0, "AGE"] = "200"
    df = df[pd.to_numeric(df["epsilon"]) != 10]
    df.to_csv(tmp_path / "bad.csv", index=False)
    code, err = run_main(["validate", "--params", params, "--submission", tmp_path / "bad.csv"], capsys)
    assert code == 1
    assert "no rows for epsilon 10" in err and "AGE: 1 above max 135" in err


def sprint2_encoder(params):
    schema = load_schema(params)
    schema = schema.with_public_ranges({name: (0.0, 1e6) for name in schema.unbounded()})
    return schema, Encoder.fit(schema)


def test_noise_scale_grows_with_theta(sprint2_files):
    schema, encoder = sprint2_encoder(sprint2_files[0])
    codes = np.zeros((50, len(schema.columns)), dtype=np.int32)
    sigmas = {}
    for theta in (1, 7):
        _, ledger = run_method("histogram", encoder, codes, theta=theta, groups=("PUMA", "YEAR"), max_records=1000)
        assert ledger.spent == pytest.approx(ledger.budget, rel=1e-12)
        assert all(c.sensitivity == theta for c in ledger.charges)
        sigmas[theta] = np.array([c.noise_scale for c in ledger.charges])
    assert np.allclose(sigmas[7], 7 * sigmas[1])


def test_histogram_without_groups_spends_whole_budget_on_marginals(sprint2_files):
    schema, encoder = sprint2_encoder(sprint2_files[0])
    codes = np.zeros((500, len(schema.columns)), dtype=np.int32)
    out, ledger = run_method("histogram", encoder, codes, epsilon=10.0, max_records=10_000)
    inside_bins = [c for c in ledger.charges if "inside its bins" in c.step]  # numeric columns: no public values
    assert len(ledger.charges) - len(inside_bins) == len(schema.columns)
    assert ledger.spent == pytest.approx(ledger.budget, rel=1e-12)
    assert abs(len(out) - 500) < 50 and (out == 0).mean() > 0.9


GOOD_SCHEMA = {"G": {"dtype": "str", "values": ["x", "y"]}, "AGE": {"dtype": "int", "min": 0, "max": 99},
               "INC": {"dtype": "float", "min": 0, "max": 1000}}


def write_private(path, rows=None):
    rows = rows or "G,AGE,INC\nx,30,10.5\ny,40,200\nx,50,0\n"
    path.write_text(rows)
    return path


def bad_input_cases(tmp_path):
    """(name, argv, expected text in the one error line)."""
    good = write_params(tmp_path / "good.json", GOOD_SCHEMA)
    priv = write_private(tmp_path / "priv.csv")
    out = tmp_path / "out" / "sub.csv"
    args = lambda params=good, private=priv, output=out: [
        "--params", params, "--private", private, "--output", output, "--group-columns", "G"]
    malformed = tmp_path / "malformed.json"
    malformed.write_text('{"runs": [{"epsilon": 1,}]')
    eps0 = write_params(tmp_path / "eps0.json", GOOD_SCHEMA,
                        [{"epsilon": 0, "delta": 1e-9, "max_records": 10, "max_records_per_individual": 1}])
    delta1 = write_params(tmp_path / "delta1.json", GOOD_SCHEMA,
                          [{"epsilon": 1, "delta": 1.0, "max_records": 10, "max_records_per_individual": 1}])
    unbounded = write_params(tmp_path / "unbounded.json", {**GOOD_SCHEMA, "INC": {"dtype": "float"}})
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    return [
        ("malformed JSON", args(params=malformed), "not valid JSON"),
        ("missing column", args(private=write_private(tmp_path / "p1.csv", "G,AGE\nx,3\n")), "missing column(s) INC"),
        ("unknown category", args(private=write_private(tmp_path / "p2.csv", "G,AGE,INC\nz,3,1\n")),
         "G: unknown or missing categories (fix the data"),
        ("NaN", args(private=write_private(tmp_path / "p3.csv", "G,AGE,INC\nx,3,NaN\nx,4,\n")),
         "INC: missing or non-numeric (fix the data"),
        ("ragged row", args(private=write_private(tmp_path / "p6.csv", "G,AGE,INC\nx,3,1,secret\n")),
         "got 4 (row text withheld: private data)"),
        ("empty CSV", args(private=write_private(tmp_path / "p4.csv", " ")), "private file"),
        ("header only", args(private=write_private(tmp_path / "p5.csv", "G,AGE,INC\n")), "no rows"),
        ("eps <= 0", args(params=eps0), "epsilon must be a number > 0"),
        ("delta not in (0,1)", args(params=delta1), "delta must be a number in (0, 1)"),
        ("unbounded numeric without range", args(params=unbounded), "column INC: numeric with no range"),
        ("unwritable output path", args(output=blocker / "sub.csv"), "cannot create output folder"),
        ("unreadable private path", args(private=tmp_path / "nope.csv"), "not found"),
        ("blank individual id", args(private=write_private(tmp_path / "p7.csv", "G,AGE,INC,pid\nx,3,1,a\nx,4,2, \n"))
         + ["--id-column", "pid"], "column pid has blank individual ids"),
        ("option of another method", args() + ["--method", "histogram", "--regime", "two-way"],
         "--regime is an option of --method dpsyn, not of --method histogram"),
        ("bad method option value", args() + ["--group-round", "0"], "--group-round must be >= 1, got 0"),
    ]


def test_bad_input_matrix(tmp_path, capsys):
    for name, argv, expected in bad_input_cases(tmp_path):
        code, err = run_main(argv, capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code != 0, name
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, err)
        assert expected in lines[0], (name, lines[0])
        assert "secret" not in lines[0], name
        if "outside the schema" in lines[0]:  # names columns and problems, never a private count
            assert not any(ch.isdigit() for ch in lines[0].split("outside the schema")[1]), name
        out_dir = tmp_path / "out"
        assert not out_dir.exists() or list(out_dir.iterdir()) == [], name


def test_failure_midway_leaves_no_partial_files(sprint2_files, tmp_path, capsys, monkeypatch):
    params, private, public = sprint2_files
    from dpsyn.dataloader import writing

    def explode(*args, **kwargs):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(writing.SubmissionWriter, "write", explode)
    out = tmp_path / "out" / "sub.csv"
    code, err = run_main(release_args(params, private, public, out, "--seed", "1"), capsys)
    assert code != 0 and "disk full" in err
    assert list(out.parent.iterdir()) == []


def _crashing_group(state, args):
    raise RuntimeError("worker crashed (simulated)")


def test_a_failing_worker_process_leaves_no_files_and_one_error_line(sprint2_files, tmp_path, capsys,
                                                                      monkeypatch):
    params, private, public = sprint2_files
    import dpsyn.method.groups as groups
    monkeypatch.setattr(groups, "_one_group", _crashing_group)  # forked workers inherit the patch
    out = tmp_path / "out" / "sub.csv"
    code, err = run_main(release_args(params, private, public, out, "--seed", "1", "--jobs", "2",
                                      "--method", "dpsyn"), capsys)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(lines) == 1 and "RuntimeError" in lines[0] and "worker crashed" not in lines[0]
    assert list(out.parent.iterdir()) == []
    code, err = run_main(release_args(params, private, public, out, "--seed", "1", "--jobs", "2",
                                      "--method", "dpsyn", "--show-private-counts"), capsys)
    assert code == 1 and "worker crashed" in err  # the message, for the curator's eyes only
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_midway_leaves_no_files_and_exits_130(sprint2_files, tmp_path, capsys, monkeypatch, sig):
    import os
    import signal

    from dpsyn.stages import run as run_module
    params, private, public = sprint2_files
    real_run = run_module.synthesize_run

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, sig))  # SIGTERM's handler and SIGINT both raise KeyboardInterrupt
        return real_run(*args, **kwargs)
    monkeypatch.setattr(run_module, "synthesize_run", signalled)
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a runner started in the background may ignore it
    out = tmp_path / "out" / "sub.csv"
    try:
        code, err = run_main(release_args(params, private, public, out, "--seed", "1"), capsys)
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    assert code == 130 and "interrupted; no output written" in err
    assert list(out.parent.iterdir()) == []


def test_quiet_and_verbose_together_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main.main(["--params", "p.json", "--private", "x.csv", "--output", str(tmp_path / "o" / "s.csv"),
                   "--quiet", "--verbose"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
