"""No private count reaches the log, stdout or the ledgers, even at debug level (--verbose).

The private table is built so that its true counts are distinctive integers (rows read,
invalid rows, individuals, rows kept after contribution bounding, per-category counts
before and after bounding); the test looks for each of them as a whole number anywhere
in what a release prints or writes beside the synthetic table.  The release is seeded:
unseeded, a noisy figure (the synthetic row count, say) equals a true count now and then
by chance, which is no leak but would fail the check at random.
"""
import re

import numpy as np
import pandas as pd
import pytest

from dpsyn import main
from helpers import write_params

SCHEMA = {"G": {"dtype": "str", "values": ["x", "y", "z"]}, "AGE": {"dtype": "int", "min": 0, "max": 99},
          "INC": {"dtype": "float", "min": 0, "max": 1000}}
RUNS = [{"epsilon": 1.0, "delta": 1e-9, "max_records": 5000, "max_records_per_individual": 2}]


def private_table(rng) -> pd.DataFrame:
    g = np.repeat(["x", "y", "z"], [611, 402, 224])
    valid = pd.DataFrame({"G": g, "AGE": rng.integers(0, 100, len(g)).astype(str),
                          "INC": rng.uniform(0, 1000, len(g)).round(2).astype(str)})
    invalid = pd.DataFrame({"G": ["x"] * 59, "AGE": ["40"] * 59, "INC": ["n/a"] * 59})
    df = pd.concat([valid, invalid], ignore_index=True).sample(frac=1, random_state=1).reset_index(drop=True)
    df["pid"] = rng.integers(0, 517, len(df))  # individuals with 1 to ~8 rows; theta = 2
    return df


def true_counts(df: pd.DataFrame) -> set[int]:
    valid = df[df["INC"] != "n/a"]
    kept = valid.groupby("pid", group_keys=False).head(2)  # sizes only: which rows does not matter
    counts = {len(df), len(valid), len(df) - len(valid), df["pid"].nunique(), valid["pid"].nunique(), len(kept)}
    counts |= set(valid["G"].value_counts().tolist()) | set(kept["G"].value_counts().tolist())
    return {c for c in counts if c >= 100 or c == 59}


def release_output(tmp_path, capsys, method, *extra) -> str:
    params = write_params(tmp_path / "params.json", SCHEMA, RUNS)
    private = tmp_path / "private.csv"
    private_table(np.random.default_rng(0)).to_csv(private, index=False)
    out = tmp_path / method / "sub.csv"
    code = main.main(["--params", str(params), "--private", str(private), "--output", str(out), "--method", method,
                      "--id-column", "pid", "--group-columns", "none", "--on-invalid", "drop", "--verbose",
                      "--seed", "3", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    ledgers = "".join(p.read_text() for p in out.parent.glob("*.ledger.*.json"))
    # without the paths, whose pytest-N folder counts this machine's test sessions (pytest-59 once failed it)
    return (captured.out + captured.err + ledgers).replace(str(tmp_path), "<tmp>")


@pytest.mark.parametrize("method", ["dpsyn", "histogram"])
def test_debug_log_and_ledgers_hold_no_true_count(tmp_path, capsys, method):
    df = private_table(np.random.default_rng(0))
    counts = true_counts(df)
    assert {1237, 402, 224, 59} <= counts
    text = release_output(tmp_path, capsys, method)
    assert "measured" in text and "INC: missing or non-numeric" in text  # debug lines and the (count-free) warning
    numbers = {int(m) for m in re.findall(r"(?<![\d.])\d+(?![\d.])", text)}
    assert not counts & numbers, sorted(counts & numbers)


def test_the_check_sees_counts_when_the_curator_asks_for_them(tmp_path, capsys):
    text = release_output(tmp_path, capsys, "histogram", "--show-private-counts")
    assert "INC: 59 missing or non-numeric" in text and "59 row(s) dropped" in text
