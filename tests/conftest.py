"""Shared fixtures: small Sprint-2-shaped tables from the seeded generator (tests/sprint2_generator.py), the
planner's public regime on small tables."""
import json
import logging

import pytest

from dpsyn.lib.tuning import T
from helpers import SPRINT2_PARAMS
from sprint2_generator import generate


@pytest.fixture(autouse=True)
def _no_stale_log_stream():
    """main.main() points the root logger at the stderr of its test (basicConfig), which pytest closes
    after it; drop that handler so later tests do not log into a closed stream."""
    yield
    for handler in [h for h in logging.root.handlers if type(h) is logging.StreamHandler]:
        logging.root.removeHandler(handler)


@pytest.fixture
def sprint2_files(tmp_path):
    """Paths of a parameters file (Sprint-2 schema, small max_records), a private and a public CSV."""
    params = json.loads(SPRINT2_PARAMS.read_text())
    for run in params["runs"]:
        run["max_records"] = 5000
    (tmp_path / "params.json").write_text(json.dumps(params))
    generate(2000, seed=1).to_csv(tmp_path / "private.csv", index=False)
    generate(1500, seed=2).drop(columns="sim_individual_id").to_csv(tmp_path / "public.csv", index=False)
    return tmp_path / "params.json", tmp_path / "private.csv", tmp_path / "public.csv"


@pytest.fixture
def public_regime(monkeypatch):
    """The auto planner's public regime wherever a noisy total is bought from eps2 up and there are pairs (any
    selection margin counts as too wide), for tests of that regime's parts on tables small enough for the adaptive
    rounds (tests/test_planner.py pins where the public regime begins)."""
    monkeypatch.setattr(T, "planner_selection_margin", 0.0)
