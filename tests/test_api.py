"""The Python API: one table per run, options as a dict or dataclass, paths or DataFrames alike,
nothing on disk unless asked, the same bytes as the command line, and the README's example."""
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsyn import api
from dpsyn import main
from dpsyn.api import release
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.reading import DataError
from dpsyn.dataloader.schema import load_schema, parse_schema
from dpsyn.lib.records.constraints import NO_BOXES
from dpsyn.method.base import OptionError
from dpsyn.method.dpsyn import DpsynOptions
from dpsyn.stages.run import known_columns

ROOT = Path(__file__).resolve().parent.parent


def test_one_table_per_run_inside_the_schema_and_nothing_written(sprint2_files, tmp_path, monkeypatch):
    params, private, public = sprint2_files
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    runs = release(private, params, public, "dpsyn", {"regime": "two-way"}, seed=1, on_invalid="clip",
                   group_columns=["YEAR"])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    schema = load_schema(params)
    assert [r.epsilon for r in runs] == [0.1, 1.0, 10.0]
    for r in runs:
        assert list(r.table.columns) == schema.names and len(r.table) <= r.run.max_records
        assert r.ledger.spent <= r.ledger.budget and r.ledger.spent == pytest.approx(r.ledger.budget, rel=1e-12)
        assert [m.label for m in r.measurements] == [c.step for c in r.ledger.charges]
        assert r.table["PUMA"].dtype.name == "category" and str(r.table["AGE"].dtype) == "Int64"
        age = r.table["AGE"].to_numpy(dtype=float, na_value=np.nan)
        assert np.nanmin(age) >= 0 and np.nanmax(age) <= 135


SMALL = {"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10 ** 4, "max_records_per_individual": 1}],
         "schema": {"G": {"values": ["a", "b"]}, "X": {"values": [0, 1, 2]}, "Y": {"dtype": "int", "min": 0, "max": 9}}}


def small_table(n=600, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"G": rng.choice(["a", "b"], n), "X": rng.integers(0, 3, n), "Y": rng.integers(0, 10, n)})


@pytest.mark.parametrize("method", ["dpsyn", "histogram"])
def test_a_column_of_one_value_costs_nothing_and_every_record_holds_it(method):
    """K's one value is public: the release with K spends and releases what the one without it does, and K
    holds that value in every record."""
    with_k = {**SMALL, "schema": {**SMALL["schema"], "K": {"values": ["only"]}}}
    (run,) = release(small_table().assign(K="only"), with_k, None, method, {}, seed=3, group_columns=["G"])
    (without,) = release(small_table(), SMALL, None, method, {}, seed=3, group_columns=["G"])
    assert (run.table["K"] == "only").all()
    assert [(c.step, c.rho) for c in run.ledger.charges] == [(c.step, c.rho) for c in without.ledger.charges]
    pd.testing.assert_frame_equal(run.table.drop(columns="K"), without.table)


def test_only_a_column_of_one_value_with_another_column_left_to_synthesize_is_known():
    """One category is known, one bin of many numbers is not; with no other column left to the method (groups
    aside) nothing is known."""
    schema = parse_schema({**SMALL, "schema": {**SMALL["schema"], "K": {"values": ["only"]},
                                               "W": {"dtype": "float", "min": 0, "max": 100, "bins": 1}}})
    encoder = Encoder.fit(schema)
    assert known_columns(encoder, ("G",), NO_BOXES, ()) == ("K",)
    assert known_columns(encoder, ("G",), NO_BOXES, ("X", "Y", "W")) == ()


def test_options_as_dict_or_dataclass_and_bad_options_refused(sprint2_files):
    kwargs = dict(seed=2, group_columns=["G"])
    a = release(small_table(), SMALL, None, "dpsyn", {"group_round": 5, "regime": "two-way"}, **kwargs)
    b = release(small_table(), SMALL, None, "dpsyn", DpsynOptions(group_round=5, regime="two-way"), **kwargs)
    assert a[0].table.equals(b[0].table)
    params, private, public = sprint2_files
    with pytest.raises(OptionError, match="method dpsyn has no option 'regim'"):
        release(private, params, public, "dpsyn", {"regim": "two-way"})
    with pytest.raises(OptionError, match="method histogram has no option 'regime' .it takes none."):
        release(private, params, public, "histogram", {"regime": "two-way"})
    with pytest.raises(OptionError, match="--group-round must be int, got '5'"):
        release(private, params, public, "dpsyn", {"group_round": "5"})
    with pytest.raises(OptionError, match="unknown method 'magic'"):
        release(private, params, public, "magic")
    with pytest.raises(OptionError, match="--group-columns: NOPE is not a schema column"):
        release(private, params, public, group_columns=["NOPE"])


def test_a_dataframe_of_any_dtypes_releases_as_its_csv_does(sprint2_files):
    params, private, public = sprint2_files
    typed = pd.read_csv(private)  # ints, floats, strings as pandas guesses them
    from_frame = release(typed, params, pd.read_csv(public), "histogram", seed=3, on_invalid="clip")
    from_path = release(private, params, public, "histogram", seed=3, on_invalid="clip")
    assert all(x.table.equals(y.table) for x, y in zip(from_frame, from_path))
    broken = typed.assign(AGE=typed["AGE"].astype(float))
    broken.loc[0, "AGE"] = np.nan
    with pytest.raises(DataError, match="private table: values outside the schema: .*AGE: missing or non-numeric"):
        release(broken, params, pd.read_csv(public), on_invalid="error")


def test_the_command_line_writes_what_the_api_returns(sprint2_files, tmp_path):
    params, private, public = sprint2_files
    out = tmp_path / "cli" / "s.csv"
    assert main.main(["--params", str(params), "--private", str(private), "--public", str(public), "--output",
                      str(out), "--seed", "4", "--on-invalid", "clip", "--quiet", "--method", "histogram"]) == 0
    runs = release(private, params, public, "histogram", seed=4, on_invalid="clip", output=tmp_path / "api" / "s.csv")
    assert (tmp_path / "api" / "s.csv").read_bytes() == out.read_bytes()
    for r in runs:
        ledger = json.loads(api.ledger_path(out, r.epsilon).read_text())
        assert ledger == r.ledger.to_dict()
    written = pd.read_csv(out)
    assert (written.groupby("epsilon").size().to_numpy() == [len(r.table) for r in runs]).all()


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    return blocks[0]


def test_the_readme_example_runs_as_written(monkeypatch, capsys):
    """From the repo root, on the demo data: one DataFrame per epsilon.  The test fixes the fresh seed
    (the example, rightly, passes none) so that it cannot fail by chance."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(api, "seed_sequence", lambda seed: np.random.SeedSequence(0))
    namespace = {}
    exec(compile(readme_example(), "README.md", "exec"), namespace)
    runs = namespace["runs"]
    assert [r.epsilon for r in runs] == [0.1, 1.0, 10.0]
    assert all(isinstance(r.table, pd.DataFrame) and len(r.table) > 50_000 for r in runs)
    assert capsys.readouterr().out.count("rows, rho spent") == 3
