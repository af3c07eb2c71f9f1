"""schema draft (dataloader/draft.py, api.draft_schema): a parameters.json from public material only."""
import json
from pathlib import Path

import pandas as pd

from dpsyn import main
from dpsyn.dataloader.draft import from_dictionary, from_public
from dpsyn.dataloader.schema import parse_schema

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "data" / "demo" / "public.csv"


def demo_dictionary() -> dict:
    """The demo's schema written as a NIST-style data dictionary (codes and labels, min and max)."""
    out = {}
    for name, entry in json.loads((ROOT / "parameters.json").read_text())["schema"].items():
        values = {str(v): "" for v in entry.get("values", [])}
        if "min" in entry:
            values.update(min=entry["min"], max=entry["max"])
        if "null" in entry:
            values[entry["null"]] = "not applicable"
        out[name] = {"description": name, "values": values}
    return out


def test_entries_from_a_public_column():
    assert from_public("A", pd.Series(["1", "2", "N", "2"]), []) == {"dtype": "int", "values": [1, 2], "null": "N"}
    notes = []
    entry = from_public("X", pd.Series([f"{v / 10:.1f}" for v in range(300)]), notes)
    assert entry == {"dtype": "float", "min": 0.0, "max": 29.9, "precision": 1} and "X: range" in notes[0]
    assert from_public("S", pd.Series(["b", "a", "b"]), []) == {"dtype": "str", "values": ["a", "b"]}


def test_no_precision_is_proposed_that_a_schema_would_refuse():
    """Public values written with more digits than float64 keeps (16 decimals; 13 decimals on values near 480,000)
    give no precision, and a note says so: the draft stays a schema the release accepts."""
    for name, texts in (("H", ["1.2345678901234567", "2000.5"]), ("R", ["227.0", "480144.4728571428571"])):
        notes: list[str] = []
        entry = from_public(name, pd.Series(texts), notes)
        assert "precision" not in entry and any(n.startswith(f"{name}: its values are written with") for n in notes)
        parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10, "max_records_per_individual": 1}],
                      "schema": {name: entry}})
    assert from_public("P", pd.Series(["227.25", "480144.5"]), [])["precision"] == 2


def test_entries_from_a_dictionary():
    numeric = from_dictionary("NOC", {"values": {"N": "n/a", "0": "none", "min": 1, "max": 19}}, [])
    assert numeric == {"dtype": "int", "min": 0, "max": 19, "null": "N"}
    codes = from_dictionary("MSP", {"values": {"N": "n/a", "1": "married", "2": "widowed"}}, [])
    assert codes == {"dtype": "int", "values": [1, 2], "null": "N"}
    assert from_dictionary("D", {"values": {"min": 16.3, "max": 52864.7}}, [])["precision"] == 1


def test_a_draft_reads_no_private_file_and_a_release_runs_on_it(tmp_path, capsys):
    (tmp_path / "dictionary.json").write_text(json.dumps(demo_dictionary()))
    draft = tmp_path / "draft.json"
    assert main.main(["schema", "draft", "--public", str(PUBLIC), "--dictionary", str(tmp_path / "dictionary.json"),
                      "--output", str(draft)]) == 0
    params = json.loads(draft.read_text())
    assert params["schema"]["PUMA"]["values"] == json.loads((ROOT / "parameters.json").read_text())["schema"]["PUMA"][
        "values"]
    assert any("DENSITY holds one value per PUMA" in line for line in params["review"])
    assert any("null link" in line for line in params["review"])
    private = tmp_path / "private.csv"
    pd.read_csv(ROOT / "data" / "demo" / "private.csv", dtype=str, keep_default_na=False).head(3000).to_csv(
        private, index=False)
    code = main.main(["--params", str(draft), "--private", str(private), "--public", str(PUBLIC), "--output",
                      str(tmp_path / "out" / "s.csv"), "--on-invalid", "drop", "--method", "histogram", "--seed", "1",
                      "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert main.main(["validate", "--params", str(draft), "--submission", str(tmp_path / "out" / "s.csv")]) == 0


def test_bad_draft_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    cases = [([], "needs --public CSV or --dictionary JSON"),
             (["--public", str(tmp_path / "missing.csv")], "not found or not a file"),
             (["--dictionary", str(tmp_path / "bad.json")], "is not valid JSON")]
    for argv, message in cases:
        code = main.main(["schema", "draft", "--output", str(tmp_path / "out" / "p.json")] + argv)
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and message in err[0], (argv, err)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_public_file_with_ids_proposes_the_clock_theta_and_the_individual_section():
    """30 people over 2015-2017 (person k: 1 to 3 years): SEX never changes, AGE (many values: a range) moves
    with YEAR, EMP keeps its value in most pairs, NOISE alternates; the draft proposes θ 3, YEAR as the clock
    and those roles, and leaves the ids out of the schema."""
    from dpsyn.api import draft_schema
    rows = [(f"p{k}", 2015 + j, 1 + k % 2, 20 + 2 * k + j, int(j < 2 or k % 4 == 0), j % 2)
            for k in range(30) for j in range(1 + k % 3)]
    public = pd.DataFrame(rows, columns=["pid", "YEAR", "SEX", "AGE", "EMP", "NOISE"]).astype(str)
    params = draft_schema(public, id_column="pid")
    assert "pid" not in params["schema"] and params["runs"][0]["max_records_per_individual"] == 3
    assert params["distinct_per_individual"] == ["YEAR"]
    assert params["individual"] == {"stable": ["SEX"], "advances": {"AGE": "YEAR"}, "follow": ["EMP"]}
    assert any(line.startswith("individual: stable SEX") for line in params["review"])
    assert "individual" not in draft_schema(public.drop(columns="pid"))


def test_a_draft_id_column_the_public_file_lacks_is_one_line(tmp_path, capsys):
    public = tmp_path / "public.csv"
    pd.DataFrame({"A": ["1", "2"]}).to_csv(public, index=False)
    out = tmp_path / "draft.json"
    assert main.main(["schema", "draft", "--public", str(public), "--id-column", "pid", "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--id-column pid: not a column of the public file" in err[0] and not out.exists()
