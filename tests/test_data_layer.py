"""Reading and validation, contribution bounding, and the encode/decode round trip."""
import numpy as np
import pandas as pd
import pytest

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.reading import DataError, as_text, individual_ids, read_table, validate
from dpsyn.dataloader.schema import parse_schema
from dpsyn.lib.privacy.bounding import bound_contributions

SCHEMA_RUNS = [{"epsilon": 1, "delta": 1e-9, "max_records": 100, "max_records_per_individual": 1}]
SCHEMA = parse_schema({
    "runs": SCHEMA_RUNS,
    "schema": {
        "CITY": {"dtype": "str", "values": ["a", "b", "c"]},
        "KIDS": {"dtype": "int", "values": [0, 1, 2], "null": "N"},
        "AGE": {"dtype": "int", "min": 0, "max": 99},
        "SMALL": {"dtype": "int", "min": 1, "max": 4},
        "INC": {"dtype": "int32", "null": "N"},
        "W": {"dtype": "float", "min": 0.5, "max": 2.5, "bins": [1.0, 2.0]},
    }})


def text_frame(**cols):
    return pd.DataFrame({k: [str(v) for v in vals] for k, vals in cols.items()})


def good_rows(n=6):
    return dict(CITY=["a", "b", "c", "a", "b", "c"][:n], KIDS=[0, 1, 2, "N", "1.0", 0][:n],
                AGE=[0, 5, 99, 40, 41, 42][:n], SMALL=[1, 2, 3, 4, 4, 1][:n],
                INC=[0, -50, 30000, "N", 7, 0][:n], W=[0.5, 1.0, 2.5, 1.5, 2.0, 0.7][:n])


def test_validate_types_values_and_null_tokens():
    typed = validate(text_frame(**good_rows()), SCHEMA, "test")
    assert list(typed["KIDS"].astype(object)) == [0, 1, 2, "N", 1, 0]  # "1.0" is category 1
    assert np.isnan(typed["INC"][3]) and typed["INC"][2] == 30000
    assert typed["CITY"].dtype.name == "category"


@pytest.mark.parametrize("column,value,reason", [
    ("CITY", "z", "unknown or missing categories"),
    ("KIDS", "", "unknown or missing categories"),
    ("AGE", "120", "above max 99"),
    ("AGE", "NaN", "missing or non-numeric"),
    ("AGE", "4.5", "non-integer"),
    ("W", "", "missing or non-numeric"),
])
def test_invalid_values_error_lists_column_and_count(column, value, reason):
    rows = good_rows()
    rows[column] = [value] * 2 + rows[column][2:]
    with pytest.raises(DataError) as err:
        validate(text_frame(**rows), SCHEMA, "private file")
    msg = str(err.value)
    assert f"{column}: 2 {reason}" in msg and "\n" not in msg


def test_clip_and_drop_policies():
    rows = good_rows()
    rows["AGE"] = [150, -3] + rows["AGE"][2:]
    rows["CITY"] = ["z"] + rows["CITY"][1:]
    clipped = validate(text_frame(**rows), SCHEMA, "test", on_invalid="clip")
    assert len(clipped) == 5 and clipped["AGE"][0] == 0  # row with CITY=z cannot be clipped: dropped
    dropped = validate(text_frame(**rows), SCHEMA, "test", on_invalid="drop")
    assert len(dropped) == 4


def test_read_table_header_problems(tmp_path):
    path = tmp_path / "x.csv"
    pd.DataFrame(good_rows()).drop(columns="AGE").assign(EXTRA=1).to_csv(path, index=False)
    with pytest.raises(DataError, match="missing column.*AGE"):
        read_table(path, SCHEMA, "private file")
    pd.DataFrame(good_rows()).assign(EXTRA=1).to_csv(path, index=False)
    with pytest.raises(DataError, match="not in the schema: EXTRA"):
        read_table(path, SCHEMA, "private file")
    assert list(read_table(path, SCHEMA, "public file", allow_extra=True).columns) == SCHEMA.names
    path.write_text("")
    with pytest.raises(DataError, match="empty file"):
        read_table(path, SCHEMA, "private file")
    path.write_text(",".join(SCHEMA.names) + "\n")
    with pytest.raises(DataError, match="no rows"):
        read_table(path, SCHEMA, "private file")


@pytest.mark.parametrize("theta", [1, 2, 3, 7])
def test_bounding_keeps_at_most_theta_rows_per_id(theta):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 300, size=3000)
    keep = bound_contributions(ids, theta, np.random.default_rng(1))
    kept_per_id = np.bincount(ids[keep], minlength=300)
    all_per_id = np.bincount(ids, minlength=300)
    assert (kept_per_id <= theta).all()
    assert (kept_per_id == np.minimum(all_per_id, theta)).all()  # keeps as many as allowed
    assert np.array_equal(keep, np.unique(keep))
    assert np.array_equal(keep, bound_contributions(ids, theta, np.random.default_rng(1)))


def test_bounding_choice_is_random_not_first_rows():
    ids = np.zeros(1000, dtype=int)
    keep = bound_contributions(ids, 5, np.random.default_rng(3))
    assert keep.max() > 100


def fitted_encoder():
    public = validate(text_frame(**good_rows()), SCHEMA, "public", public=True)
    schema = SCHEMA.with_public_ranges({"INC": (-50.0, 30000.0)})
    return Encoder.fit(schema, public, default_bins=4), schema


def test_encoder_domains_follow_schema_and_public_data():
    enc, _ = fitted_encoder()
    sizes = dict(zip(enc.names, enc.sizes))
    assert sizes["CITY"] == 3 and sizes["KIDS"] == 4  # 3 values + null token
    assert sizes["SMALL"] == 4  # no more integers than bins: one bin per integer
    assert sizes["W"] == 3  # schema edges 1.0, 2.0 cut [0.5, 2.5] into 3 bins
    assert enc.coder("INC").null_code == sizes["INC"] - 1


def test_encoder_needs_every_range():
    with pytest.raises(Exception, match="INC"):
        Encoder.fit(SCHEMA)


def test_encode_decode_round_trip_stays_inside_schema():
    enc, schema = fitted_encoder()
    rng = np.random.default_rng(5)
    codes = np.column_stack([rng.integers(0, size, 5000) for size in enc.sizes]).astype(np.int32)
    typed = enc.decode(codes, rng)
    assert np.array_equal(enc.encode(typed), codes)
    for col in schema.columns:
        if col.kind == "numeric":
            v = typed[col.name].to_numpy(dtype=np.float64, na_value=np.nan)
            v = v[~np.isnan(v)]
            assert v.min() >= col.low and v.max() <= col.high, col.name
            if col.integral:
                assert np.array_equal(v, np.round(v)), col.name
    # the decoded frame is valid input again
    text = pd.DataFrame({c: typed[c].astype(object).map(lambda x: "N" if pd.isna(x) else str(x)) for c in enc.names})
    validate(text, schema, "decoded")


def test_integer_spike_gets_its_own_bin():
    schema = parse_schema({"runs": SCHEMA_RUNS, "schema": {"INC": {"dtype": "int", "min": -100, "max": 10000}}})
    public = pd.DataFrame({"INC": np.r_[np.zeros(500), np.linspace(-100, 10000, 500)]})
    coder = Encoder.fit(schema, public, default_bins=10).coder("INC")
    zero_bin = coder.encode(np.array([0.0]))[0]
    decoded = coder.decode(np.full(100, zero_bin), np.random.default_rng(0))
    assert (decoded == 0).all()


def test_individual_ids_are_stripped_and_blank_ids_refused_without_a_count():
    ids = individual_ids(pd.Series([" 7", "7 ", "8"], name="pid"), "private file")
    assert ids.to_pylist() == ["7", "7", "8"]  # the text itself, never a hash of it
    keep = bound_contributions(ids, 1, np.random.default_rng(0))
    assert len(keep) == 2  # " 7" and "7 " are one individual
    with pytest.raises(DataError) as err:
        individual_ids(pd.Series(["1", " ", "", "2"], name="pid"), "private file")
    assert str(err.value) == "private file: column pid has blank individual ids; every row needs one"


def test_a_dataframe_reads_as_the_csv_text_would():
    df = pd.DataFrame({"A": [1, 2, None], "B": [1.5, 2.0, float("nan")], "C": ["x", None, "z"],
                       "D": pd.array([3, None, 4], dtype="Int64")})
    text = as_text(df)
    assert text.to_dict("list") == {"A": ["1", "2", ""], "B": ["1.5", "2", ""], "C": ["x", "", "z"],
                                    "D": ["3", "", "4"]}


def test_numbers_and_categories_read_as_pandas_reads_them():
    """Arrow's parser where every cell reads, pandas' cell by cell where one does not: the same numbers."""
    from dpsyn.dataloader.reading import _numbers, category_codes, column_text
    cells = ["1", "2.5", "1e3", ".5", "1.", "-0", "+1", "inf", "1e500", "0.1", "123456789012345678", "N"]
    for text in (cells, cells + ["x", "0x10", "1,5", ""]):
        series = pd.Series(text)
        null = (series == "N").to_numpy()
        expected = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
        np.testing.assert_array_equal(_numbers(series, null)[~null], expected[~null])  # the caller nulls the rest
    column = SCHEMA.columns[SCHEMA.names.index("KIDS")]
    assert category_codes(pd.Series([" 0", "1", "2 ", "N", "1.0", "3", "x"]), column).tolist() == [0, 1, 2, 3, 1, -1, -1]
    ints = pd.Series(np.array([0, -5, 2 ** 62], dtype=np.int64))
    assert column_text(ints).tolist() == ints.astype(str).tolist()


def test_parquet_files_and_folders_give_the_same_release_as_csv(tmp_path):
    from dpsyn.api import release
    from test_rap import data
    frame, params = data()
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    (tmp_path / "parts").mkdir()
    frame.iloc[:150].to_parquet(tmp_path / "parts" / "a.parquet", index=False)
    frame.iloc[150:].to_parquet(tmp_path / "parts" / "b.parquet", index=False)
    runs = [release(tmp_path / name, params, method="histogram", seed=1, group_columns=())
            for name in ("t.csv", "t.parquet", "parts")]
    for csv_run, parquet_run, folder_run in zip(*runs):
        pd.testing.assert_frame_equal(csv_run.table, parquet_run.table)
        pd.testing.assert_frame_equal(csv_run.table, folder_run.table)


def test_an_unreadable_parquet_file_is_one_line(tmp_path):
    from dpsyn.dataloader.reading import DataError, read_csv_text
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="cannot read as Parquet"):
        read_csv_text(tmp_path / "bad.parquet", "private file")


def test_a_run_written_in_slices_gives_the_same_csv(tmp_path, monkeypatch):
    from dpsyn.dataloader import writing
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 100,
                                     "max_records_per_individual": 1}],
                           "schema": {"A": {"dtype": "str", "values": ["x", "y,z"]},
                                      "N": {"dtype": "int", "min": 0, "max": 9, "null": "N/A"}}})
    typed = validate(pd.DataFrame({"A": ["x", "y,z", "x"] * 5, "N": ["1", "N/A", "7"] * 5}), schema, "t")
    texts = []
    for rows in (1 << 20, 4):
        monkeypatch.setattr(writing, "WRITE_ROWS", rows)
        writer = writing.SubmissionWriter(tmp_path / f"{rows}.csv", schema, "pid")
        writer.write(0.5, typed)
        writer.close()
        texts.append((tmp_path / f"{rows}.csv").read_text())
    assert texts[0] == texts[1] and texts[0].count("\n") == 16 and '"y,z"' in texts[0]


def test_the_parquet_bar_counts_row_groups_never_rows(tmp_path, monkeypatch):
    """A progress bar's total is on a terminal without --show-private-counts: for Parquet it is the number
    of row groups (as a CSV's is its bytes), never the exact row count."""
    from dpsyn.dataloader import reading
    totals = []

    def watched(total, *args, **kwargs):
        totals.append(total)
        return reading_progress(total, *args, **kwargs)
    reading_progress = reading.progress
    monkeypatch.setattr(reading, "progress", watched)
    frame = pd.DataFrame({"a": [str(i % 3) for i in range(1003)], "b": ["x"] * 1003})
    frame.to_parquet(tmp_path / "t.parquet", index=False, row_group_size=250)
    text = reading.read_csv_text(tmp_path / "t.parquet", "private file", private=True)
    assert len(text) == 1003 and text["a"].tolist() == frame["a"].tolist()
    assert totals == [5]


def test_a_private_files_read_errors_quote_nothing_of_it(tmp_path):
    """Readers' messages quote cells ("Failed to parse string: 'Jane Doe'"), bytes and offsets: for a private
    file the line names the kind of failure only (a public file keeps the reader's words)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpsyn.dataloader.reading import read_csv_text
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"pid": pa.array([1, 2]), "age": pa.array([1, 2])}), folder / "a.parquet")
    pq.write_table(pa.table({"pid": pa.array(["Jane Doe 1970"]), "age": pa.array([3])}), folder / "b.parquet")
    (tmp_path / "bad.csv").write_bytes(b"pid,age\n1,2\n\xffJane,3\n")
    for path in (folder, tmp_path / "bad.csv"):
        with pytest.raises(DataError) as caught:
            read_csv_text(path, "private file", private=True)
        message = str(caught.value)
        assert "withheld" in message and "Jane" not in message and "0xff" not in message, message
