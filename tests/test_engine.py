"""The measuring engines agree: the Dask engine (an in-process LocalCluster: no network) keeps the same
rows, gives the same answers to every query kind and the same release bytes as the local engine; an
individual whose rows sit in different partitions keeps at most theta; a failing task writes nothing."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpsyn.lib.records.marginals import compact_codes, count_marginal, count_marginals
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.engine import DaskEngine, LocalEngine
from dpsyn.lib.privacy.private_table import PrivateRecords, PrivateTable
from dpsyn.lib.privacy.queries import Marginal
from dpsyn.lib.privacy.unit import PrivacyUnit

from helpers import worker_environ
from sprint2_generator import generate
from test_neighbours import DOMAIN, QUERIES, by_individual, neighbours

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        yield c


@pytest.fixture(scope="module")
def dask_engine(cluster):
    engine = DaskEngine(scheduler=cluster.scheduler_address, partitions=3)
    yield engine
    engine.close()


@pytest.mark.parametrize("batch_cells", [1 << 23, 64])
def test_count_marginals_matches_one_marginal_at_a_time(batch_cells, monkeypatch):
    monkeypatch.setattr("dpsyn.lib.records.marginals.BATCH_CELLS", batch_cells)  # 64: one pass per marginal
    rng = np.random.default_rng(0)
    sizes = (5, 300, 7, 2, 40)
    codes = np.column_stack([rng.integers(0, s, 5000) for s in sizes]).astype(np.int32)
    specs = [((0,), (1,), (5,)), ((1, 2), (10, 1), (30, 7)), ((0, 3, 4), (1, 1, 1), (5, 2, 40)), ((), (), ())]
    got = count_marginals(compact_codes(codes, sizes), specs)
    assert compact_codes(codes, sizes).dtype == np.uint16
    scaled = count_marginals(compact_codes(codes, sizes), specs, scale=0.3)
    for (cols, widths, shape), counts, times in zip(specs, got, scaled):
        coarse = codes[:, list(cols)] // np.asarray(widths, dtype=np.int32) if cols else codes[:, :0]
        assert np.array_equal(counts, count_marginal(coarse, shape).reshape(shape))
        assert times.dtype == np.float64 and np.array_equal(times, counts * 0.3)


def _table(data, theta, engine):
    codes, numeric, ids = data
    return PrivateTable(PrivateRecords(codes, numeric, ids, by_individual=True), DOMAIN,
                        PrivacyUnit(theta, ("B",) if theta > 1 else ()),
                        Ledger(1.0, 1e-9), np.random.default_rng(0), np.random.default_rng(99), engine)


@pytest.mark.parametrize("theta", [1, 3])
def test_both_engines_keep_the_same_rows_and_answer_alike(dask_engine, theta):
    _, data = neighbours(theta, clustered=False, seed=5)
    local, spread = _table(data, theta, LocalEngine()), _table(data, theta, dask_engine)
    # real-valued sums too (each row's part is on a fixed-point grid, so every sum is exact), and the queries over an
    # individual's rows (the Dask engine routes each individual's rows to one bucket first)
    for query in QUERIES + by_individual(theta):
        assert np.array_equal(local._answer(query), spread._answer(query)), query.describe()
    # same noise too: the noisy answer of a count is identical under one generator
    assert np.array_equal(local.measure(Marginal(("A", "B")), 0.01).noisy, spread.measure(Marginal(("A", "B")), 0.01).noisy)


def test_an_individual_spread_over_partitions_keeps_at_most_theta(dask_engine):
    n, theta = 600, 2
    ids = np.array([f"p{i % 50}" for i in range(n)], dtype=object)  # every id in every row partition
    priority = np.random.default_rng(3).random(n)
    kept = dask_engine.keep(ids, theta, priority, None)
    assert np.array_equal(kept, LocalEngine().keep(ids, theta, priority, None))
    _, counts = np.unique(ids[kept], return_counts=True)
    assert len(counts) == 50 and counts.max() == theta


def test_the_engines_own_workers_keep_the_c_librarys_memory_trimming():
    """dask's MALLOC_TRIM_THRESHOLD_ for its workers is left out of the ones the engine starts (it made the
    per-group synthesis take 1.5 times the CPU), and only there: dask's configuration is as it was."""
    import dask
    before = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    engine = DaskEngine(jobs=1)
    try:
        assert list(engine.client.run(worker_environ).values()) == [(None, "1")]
    finally:
        engine.close()
    assert dask.config.get("distributed.nanny.pre-spawn-environ") == before


def _release(tmp_path, sprint2_files, name, *extra):
    params, private, public = sprint2_files
    out = tmp_path / name / "submission.csv"
    proc = subprocess.run([sys.executable, "main.py", "--params", params, "--private", private, "--public", public,
                           "--output", out, "--seed", "1", "--on-invalid", "clip", "--group-columns", "YEAR", *extra],
                          cwd=ROOT, capture_output=True, text=True)
    return proc, out


@pytest.mark.parametrize("distinct", [(), ("--distinct-per-individual", "YEAR")])
def test_the_same_release_bytes_on_either_engine(tmp_path, sprint2_files, distinct):
    """With ids, and with ids and a column distinct per individual (Sprint 2: one row per person per YEAR)."""
    local, out_local = _release(tmp_path, sprint2_files, "local", *distinct)
    spread, out_dask = _release(tmp_path, sprint2_files, "dask", "--engine", "dask", "--jobs", "2", *distinct)
    assert local.returncode == 0, local.stderr
    assert spread.returncode == 0, spread.stderr
    assert "engine: dask" in spread.stderr
    assert out_local.read_bytes() == out_dask.read_bytes()
    for eps in ("0.1", "1", "10"):  # the same charges, node by node, summing to the same budget
        local_ledger = json.loads((out_local.parent / f"submission.ledger.eps{eps}.json").read_text())
        dask_ledger = json.loads((out_dask.parent / f"submission.ledger.eps{eps}.json").read_text())
        assert local_ledger == dask_ledger and local_ledger["plan"]


def test_the_same_linked_individuals_on_either_engine(tmp_path, sprint2_files):
    """With the parameters' individual section: the same ids, the same bytes, the same ledgers."""
    params, private, public = sprint2_files
    declared = json.loads(params.read_text())
    declared["distinct_per_individual"] = ["YEAR"]
    declared["individual"] = {"stable": ["SEX", "RACE"], "advances": {"AGE": "YEAR"}, "follow": ["PUMA", "EMPSTAT"]}
    params.write_text(json.dumps(declared))
    local, out_local = _release(tmp_path, sprint2_files, "local")
    spread, out_dask = _release(tmp_path, sprint2_files, "dask", "--engine", "dask", "--jobs", "2")
    assert local.returncode == 0, local.stderr
    assert spread.returncode == 0, spread.stderr
    assert out_local.read_bytes() == out_dask.read_bytes()
    ledger = json.loads((out_dask.parent / "submission.ledger.eps1.json").read_text())
    assert ledger == json.loads((out_local.parent / "submission.ledger.eps1.json").read_text())
    assert "individuals" in [node["name"] for node in ledger["plan"]["nodes"]]
    ids = [line.rsplit(",", 1)[1] for line in out_local.read_text().splitlines()[1:] if line.startswith("1,")]
    assert len(set(ids)) < 0.8 * len(ids)  # individuals with more than one row


def test_bad_input_and_a_failed_task_write_nothing(tmp_path, sprint2_files, cluster, monkeypatch, capsys):
    from dpsyn import main
    params, private, public = sprint2_files
    out = tmp_path / "out" / "submission.csv"
    code = main.main(["--params", str(params), "--private", str(tmp_path / "missing.csv"), "--public", str(public),
                      "--output", str(out), "--engine", cluster.scheduler_address])
    assert code == 2 and "missing.csv" in capsys.readouterr().err.strip().splitlines()[-1]

    def broken(records, queries):
        raise RuntimeError("worker lost")
    monkeypatch.setattr("dpsyn.lib.privacy.engine.exact_answers", broken)
    code = main.main(["--params", str(params), "--private", str(private), "--public", str(public), "--output",
                      str(out), "--on-invalid", "clip", "--engine", cluster.scheduler_address])
    err = capsys.readouterr().err  # the message may quote private data: only its kind
    assert code == 1 and "RuntimeError" in err and "worker lost" not in err and "withheld" in err
    code = main.main(["--params", str(params), "--private", str(private), "--public", str(public), "--output",
                      str(out), "--on-invalid", "clip", "--engine", cluster.scheduler_address,
                      "--show-private-counts"])
    assert code == 1 and "worker lost" in capsys.readouterr().err
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_parquet_read_on_the_workers_gives_the_csv_release(tmp_path, sprint2_files):
    import pandas as pd
    params, private, public = sprint2_files
    folder = tmp_path / "private_parquet"
    folder.mkdir()
    frame = pd.read_csv(private, dtype=str, keep_default_na=False)
    for k, half in enumerate((frame.iloc[:700], frame.iloc[700:])):  # one individual may straddle the files
        half.to_parquet(folder / f"part{k}.parquet", index=False)
    distinct = ("--distinct-per-individual", "YEAR")
    local, out_local = _release(tmp_path, sprint2_files, "local", *distinct)
    spread, out_dask = _release(tmp_path, (params, folder, public), "dask", "--engine", "dask", "--jobs", "2",
                                *distinct)
    assert local.returncode == 0, local.stderr
    assert spread.returncode == 0, spread.stderr
    assert out_local.read_bytes() == out_dask.read_bytes()


def test_a_malformed_row_past_dasks_sample_is_the_local_line_without_its_position(tmp_path, sprint2_files):
    """dask reads a sample of the file first; a bad row past it fails on a worker, whose message names the
    row's line.  The release says what the local reader says (no position, no cell text), exit 2, writes
    nothing, and shows none of distributed's log lines."""
    params, _, public = sprint2_files
    rows = generate(4000, seed=3).to_csv(index=False).splitlines()
    assert len("\n".join(rows[:3500]).encode()) > (1 << 18)  # past dask's 256 kB sample
    rows[3500] += ",7"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(rows) + "\n")
    local, out_local = _release(tmp_path, (params, bad, public), "local")
    spread, out_dask = _release(tmp_path, (params, bad, public), "dask", "--engine", "dask", "--quiet")
    assert local.returncode == spread.returncode == 2, spread.stderr
    lines = spread.stderr.strip().splitlines()
    assert lines[-1] == local.stderr.strip().splitlines()[-1] and lines[-1].startswith("error: private file")
    assert all(line.startswith(("WARNING: a fixed seed", "error:")) for line in lines), lines
    assert "withheld" in spread.stderr and "3501" not in spread.stderr and "3502" not in spread.stderr
    assert not out_local.exists() and not out_dask.exists()


def test_values_outside_the_schema_give_the_same_line_on_either_engine(tmp_path, sprint2_files):
    params, private, public = sprint2_files
    local, out_local = _release(tmp_path, sprint2_files, "local", "--on-invalid", "error")
    spread, out_dask = _release(tmp_path, sprint2_files, "dask", "--on-invalid", "error", "--engine", "dask")
    assert local.returncode == spread.returncode == 2
    assert local.stderr.strip().splitlines()[-1] == spread.stderr.strip().splitlines()[-1]
    assert "values outside the schema" in local.stderr
    assert not out_local.exists() and not out_dask.exists()


def test_an_engine_that_is_neither_a_name_nor_an_address_is_one_line(tmp_path, sprint2_files):
    proc, out = _release(tmp_path, sprint2_files, "bad", "--engine", "nowhere")
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: a scheduler address needs the Dask engine and a protocol (tcp://host:8786), got 'nowhere'")


def test_tables_not_kept_need_an_output(sprint2_files):
    from dpsyn.api import release
    from dpsyn.method.base import OptionError
    params, private, public = sprint2_files
    with pytest.raises(OptionError, match="keep_tables=False needs output"):
        release(private, params, public, keep_tables=False)


def _one_hash_for_all(obj, *args, **kwargs):
    """Every value hashes alike: the worst collision a routing hash can make."""
    import pandas as pd
    _one_hash_for_all.calls += 1
    return pd.Series(np.zeros(len(obj), dtype=np.uint64), index=getattr(obj, "index", None))


@pytest.mark.parametrize("distinct", [False, True])
def test_ids_that_share_a_hash_leave_everyone_elses_rows_alone(dask_engine, monkeypatch, distinct):
    """An added individual X whose id hashes like Y's (here: every id hashes alike, so dask's shuffle routes
    all rows to one partition) changes only X's own kept rows: everyone else keeps the same rows, and a
    histogram moves by at most theta in L1 (sqrt(theta) in L2 with a column declared distinct)."""
    import pandas as pd
    monkeypatch.setattr(pd.util, "hash_pandas_object", _one_hash_for_all)
    _one_hash_for_all.calls = 0
    theta, rng = 3, np.random.default_rng(7)
    n = 120
    ids = np.array([f"p{i}" for i in rng.integers(0, 25, n)] + ["Y"] * 3, dtype=object)
    cell = np.r_[rng.integers(0, 2, n), [0, 0, 0]]            # Y: three rows in cell 0
    year = np.r_[rng.integers(0, 4, n), [0, 1, 2]]
    added_ids = np.r_[ids, ["X"] * 3].astype(object)          # X: three rows in cell 1
    added_cell, added_year = np.r_[cell, [1, 1, 1]], np.r_[year, [0, 1, 2]]
    for seed in range(12):
        priority = np.random.default_rng(seed).random(len(added_ids))
        for engine in (LocalEngine(), dask_engine):
            keys = year.reshape(-1, 1) if distinct else None
            added_keys = added_year.reshape(-1, 1) if distinct else None
            kept = engine.keep(ids, theta, priority[:len(ids)], keys)
            added = engine.keep(added_ids, theta, priority, added_keys)
            assert np.array_equal(added[added < len(ids)], kept), engine.name
            before = np.bincount(cell[kept] * 4 + year[kept], minlength=8)
            after = np.bincount(added_cell[added] * 4 + added_year[added], minlength=8)
            assert np.abs(after - before).sum() <= theta
            assert np.sqrt(((after - before) ** 2).sum()) <= (np.sqrt(theta) if distinct else theta) + 1e-12
    assert _one_hash_for_all.calls > 0  # the shuffle did route by the (colliding) hash
