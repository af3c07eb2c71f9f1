"""Linking synthetic rows into individuals (lib/records/linking.py, stages/individuals.py): the span plan against brute
force, the links on tiny tables with a known answer, and releases whose individuals keep their stable columns
and advance their advancing ones (a property over seeds)."""
import itertools
import json
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dpsyn import api
from dpsyn.lib.privacy.queries import clock_pattern_count, clock_patterns
from dpsyn.lib.records.linking import (NO_KEY, Homes, Rows, _open_uniform, _Steering, consecutive, coverage, link,
                                       plan_patterns)
from dpsyn.stages import individuals as stage


def _counts(spans: np.ndarray) -> np.ndarray:
    """A table of individuals by first position and rows as counts of ``consecutive``'s patterns."""
    return np.array([spans[p[0], len(p) - 1] for p in consecutive(*spans.shape)])


def _spans(counts: np.ndarray, positions: int, theta: int) -> np.ndarray:
    """The counts of ``consecutive``'s patterns as a table by first position and rows (impossible spans 0)."""
    out = np.zeros((positions, theta), dtype=np.int64)
    for p, c in zip(consecutive(positions, theta), counts):
        out[p[0], len(p) - 1] = c
    return out


def _link(rows: Rows, spans: np.ndarray, rng: np.random.Generator, piece: int = 400, steer: float = 0.0) -> np.ndarray:
    """``link`` with the individuals planned by first position and rows."""
    return link(rows, consecutive(*spans.shape), _counts(spans), rng, piece, steer)


def test_the_span_plan_covers_every_position_and_rounds_the_nearest_real_plan():
    """Brute force on a grid of real plans of 3 positions, theta 2 (a spans over positions 0-1, b over 1-2; one-row
    individuals fill the rest): the plan covers each position exactly and lies within 1 of the best one."""
    rows = np.array([4, 5, 3])
    noisy = np.array([[1.2, 2.6], [0.4, 1.9], [2.0, 7.0]])
    patterns = consecutive(3, 2)
    plan = _spans(plan_patterns([noisy[p[0], len(p) - 1] for p in patterns], patterns, rows), 3, 2)
    assert (coverage(patterns, 3) @ _counts(plan) == rows).all() and (plan >= 0).all() and plan[2, 1] == 0
    best = None
    for a, b in itertools.product(np.arange(0, 4.001, 0.01), repeat=2):
        singles = rows - np.array([a, a + b, b])
        if (singles >= 0).all():
            candidate = np.array([[singles[0], a], [singles[1], b], [singles[2], 0]])
            error = ((candidate - noisy)[:, 0] ** 2).sum() + ((candidate - noisy)[:2, 1] ** 2).sum()
            best = min(best or (error, candidate), (error, candidate), key=lambda e: e[0])
    assert np.abs(plan - best[1]).max() < 1


def test_a_feasible_plan_is_kept_as_measured():
    spans = np.array([[3, 2, 1], [2, 1, 0], [4, 0, 0]])
    patterns = consecutive(3, 3)
    rows = coverage(patterns, 3) @ _counts(spans)
    assert (_spans(plan_patterns(_counts(spans).astype(float), patterns, rows.astype(np.int64)), 3, 3) == spans).all()


def test_the_pattern_count_is_the_number_of_patterns_listed():
    for positions in range(0, 9):
        for theta in range(1, 10):
            assert clock_pattern_count(positions, theta) == len(clock_patterns(positions, theta))


def test_a_feasible_plan_with_gaps_is_kept_as_measured():
    patterns = clock_patterns(4, 3)
    counts = np.random.default_rng(0).integers(0, 5, len(patterns))
    rows = (coverage(patterns, 4) @ counts).astype(np.int64)
    assert (plan_patterns(counts.astype(float), patterns, rows) == counts).all()


def test_individuals_planned_with_a_gap_skip_a_position():
    """Rows at positions 0, 1, 2 (one each, any may follow any): one individual planned at 0 and 2, one at 1
    alone."""
    rows = Rows(np.array([0, 1, 2]), np.zeros(3, dtype=np.int64), lambda first, t: np.zeros(len(first), dtype=np.int64))
    patterns = ((0,), (1,), (2,), (0, 1), (0, 2))
    for seed in range(5):
        people = link(rows, patterns, np.array([0, 1, 0, 0, 1]), np.random.default_rng(seed))
        assert people[0] == people[2] != people[1]
    people = link(rows, patterns, np.array([0, 0, 1, 1, 0]), np.random.default_rng(0))
    assert people[0] == people[1] != people[2]


def test_links_follow_the_keys_and_the_plan():
    """Position 0: rows 0 and 1, whose followers must have keys 7 and 8; position 1: rows 2 (key 8) and 3 (key 7).
    Two individuals of two rows planned: 0 with 3, 1 with 2."""
    wanted = np.array([7, 8, NO_KEY, NO_KEY])
    rows = Rows(np.array([0, 0, 1, 1]), np.array([0, 0, 8, 7]), lambda first, t: wanted[first])
    people = _link(rows, np.array([[0, 2], [0, 0]]), np.random.default_rng(0))
    assert people[0] == people[3] and people[1] == people[2] and people[0] != people[1]


def test_links_prefer_likely_changes_and_ones_plan_leaves_rows_alone():
    """One block; a followed column whose code stays (log-score 0) or changes (-20): the two planned links keep
    their codes; the third row of position 1 is an individual of its own."""
    codes = np.array([0, 1, 1, 0, 2])
    logp = np.full((2, 3, 3), -20.0)
    logp[:, np.arange(3), np.arange(3)] = 0.0
    rows = Rows(np.array([0, 0, 1, 1, 1]), np.zeros(5, dtype=np.int64),
                lambda first, t: np.zeros(len(first), dtype=np.int64), ((codes, logp),))
    for seed in range(5):
        people = _link(rows, np.array([[0, 2], [1, 0]]), np.random.default_rng(seed))
        assert people[0] == people[3] and people[1] == people[2] and len(set(people)) == 3


def test_individuals_stay_home_and_take_the_fewest_key_changes():
    """Position 0: rows 0 (home 0) and 1 (home 1), whose followers must have keys 5 and 6; position 1: rows 2 (home 1,
    key 5), 3 (home 0, key 9) and 4 (home 0, key 6).  On keys alone, 0 goes on with 2 and 1 with 4, both moving home;
    where everyone stays home, 0 goes on with 4 (one key change, not 3's four) and 1 with 2 (one change)."""
    wanted = np.array([5, 6, NO_KEY, NO_KEY, NO_KEY])
    position, key, spans = np.array([0, 0, 1, 1, 1]), np.array([0, 0, 5, 9, 6]), np.array([[0, 2], [1, 0]])
    on_keys = _link(Rows(position, key, lambda first, t: wanted[first]), spans, np.random.default_rng(0))
    assert on_keys[0] == on_keys[2] and on_keys[1] == on_keys[4] and len(set(on_keys)) == 3
    homes = Homes(np.array([0, 1, 1, 0, 0]), np.array([1.0, 0.0]),
                  lambda keys, rows: np.abs(keys[:, None] - key[rows][None, :]).astype(float))
    for seed in range(5):
        people = _link(Rows(position, key, lambda first, t: wanted[first], homes=homes), spans,
                      np.random.default_rng(seed))
        assert people[0] == people[4] and people[1] == people[2] and len(set(people)) == 3
    moving = Homes(homes.code, np.array([0.0, 0.0]), homes.changes)  # nobody stays: links on keys alone
    assert (_link(Rows(position, key, lambda first, t: wanted[first], homes=moving), spans,
                 np.random.default_rng(0)) == on_keys).all()
    ruled = Homes(homes.code, homes.stay, lambda keys, rows: np.where(  # row 4 may not take key 5 (an edit rule)
        (keys[:, None] == 5) & (rows[None, :] == 4), np.inf, homes.changes(keys, rows)))
    people = _link(Rows(position, key, lambda first, t: wanted[first], homes=ruled), spans, np.random.default_rng(0))
    assert people[0] == people[3] and people[1] == people[2]  # 0 stays home with its only other row


def test_a_key_change_outweighs_a_followed_columns_cost_and_the_rest_leave_home():
    """Home links: row 0 (needing key 5, code 0 in a followed column) goes on with row 1 (key 5, code 1: a change
    scored -20) rather than row 2 (key 6, code 0).  With half staying, of two individuals needing key 5 in home 0
    one goes on there and the other in home 1, although home 0 has a row of key 5 for it too."""
    codes, logp = np.array([0, 1, 0]), np.full((2, 2, 2), -20.0)
    logp[:, [0, 1], [0, 1]] = 0.0
    wanted = np.array([5, NO_KEY, NO_KEY])
    homes = Homes(np.zeros(3, dtype=np.int64), np.array([1.0, 0.0]),
                  lambda keys, rows: np.abs(keys[:, None] - np.array([0, 5, 6])[rows][None, :]).astype(float))
    for seed in range(5):
        people = _link(Rows(np.array([0, 1, 1]), np.array([0, 5, 6]), lambda first, t: wanted[first], ((codes, logp),),
                           homes=homes), np.array([[0, 1], [1, 0]]), np.random.default_rng(seed))
        assert people[0] == people[1] != people[2]
    wanted = np.array([5, 5, NO_KEY, NO_KEY, NO_KEY, NO_KEY])
    halves = Homes(np.array([0, 0, 0, 0, 1, 1]), np.array([0.5, 0.0]), lambda keys, rows: np.zeros((len(keys), len(rows))))
    for seed in range(8):
        people = _link(Rows(np.array([0, 0, 1, 1, 1, 1]), np.full(6, 5), lambda first, t: wanted[first], homes=halves),
                      np.array([[0, 2], [2, 0]]), np.random.default_rng(seed))
        followers = [int(np.flatnonzero(people[2:] == people[i])[0]) + 2 for i in (0, 1)]
        assert sorted(halves.code[followers]) == [0, 1]


def test_later_home_assignments_make_up_for_changes_earlier_ones_made_too_often():
    """Ten homes, each with two individuals of code 0 at position 0 and rows of codes 0, 0, 1, 1 at position 1, all
    staying home; the scores favour keeping code 0 (as scores off by their noise might) but P(1 | 0) is a half.
    Each home is one assignment: unsteered, about 6 of the 20 links change code; steered, the later homes make up
    for the earlier ones, about 9.  Steering at 0, or without shares, links as before; where the shares' noise is
    twice their size, a tally steers nothing, where it is 0 it does; the rows' own scores never change."""
    home = np.r_[np.repeat(np.arange(10), 2), np.repeat(np.arange(10), 4)]
    codes = np.r_[np.zeros(20), np.tile([0, 0, 1, 1], 10)].astype(np.int64)
    logp = np.zeros((2, 2, 2))
    logp[0, 0] = [0.5, -0.5]
    before = logp.copy()
    homes = Homes(home, np.array([1.0, 0.0]), lambda keys, rows: np.zeros((len(keys), len(rows))))

    def rows(noise: float | None) -> Rows:
        return Rows(np.r_[np.zeros(20), np.ones(40)].astype(np.int64), np.zeros(60, dtype=np.int64),
                    lambda first, t: np.zeros(len(first), dtype=np.int64), ((codes, logp),), homes=homes,
                    conditional=() if noise is None else ((np.full((2, 2, 2), 0.5), np.full((2, 2), noise)),))
    spans = np.array([[0, 20], [20, 0]])
    plain = _link(rows(None), spans, np.random.default_rng(0))
    assert (_link(rows(0.0), spans, np.random.default_rng(0), steer=0.0) == plain).all()
    assert (_link(rows(None), spans, np.random.default_rng(0), steer=4.0) == plain).all()
    changes = {}
    for steer in (0.0, 4.0):
        people = [_link(rows(0.0), spans, np.random.default_rng(seed), steer=steer) for seed in range(10)]
        assert all(home[np.flatnonzero(p == p[i])[1]] == home[i] for p in people for i in range(20))
        changes[steer] = [int(codes[[int(np.flatnonzero(p[20:] == p[i])[0]) + 20 for i in range(20)]].sum())
                          for p in people]
    assert np.mean(changes[0.0]) < 7 and np.mean(changes[4.0]) > 8.5, changes
    assert all(abs(m - 10) <= 3 for m in changes[4.0]), changes
    for noise, moved in ((1.0, False), (0.0, True)):
        steering = _Steering(rows(noise), 4.0)
        steering.tally(np.arange(10), np.arange(20, 30))  # ten links from code 0, to codes 0, 0, 1, 1, 0, ...
        assert (steering.follow[0][1] != logp).any() == moved
    assert (logp == before).all()


def test_a_large_home_is_cut_where_the_keys_individuals_need_change():
    """Pieces of two: four individuals needing keys 1, 1, 2, 2 and six rows of keys 1, 1, 1, 1, 2, 2 in one home;
    every individual goes on with a row of the key it needs (cut by rank alone, one needing 2 would meet 1s)."""
    wanted = np.r_[1, 1, 2, 2, np.full(6, NO_KEY)]
    key = np.r_[0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    homes = Homes(np.zeros(10, dtype=np.int64), np.array([1.0, 0.0]),
                  lambda keys, rows: np.abs(keys[:, None] - key[rows][None, :]).astype(float))
    for seed in range(5):
        people = _link(Rows(np.r_[np.zeros(4), np.ones(6)].astype(np.int64), key, lambda first, t: wanted[first],
                           homes=homes), np.array([[0, 4], [2, 0]]), np.random.default_rng(seed), piece=2)
        for i in range(4):
            (j,) = np.flatnonzero(people[4:] == people[i]) + 4
            assert key[j] == wanted[i]


def panel(people: int, seed: int) -> pd.DataFrame:
    """Individuals in 1 to 4 consecutive years of 2015-2018, SEX fixed, AGE + 1 a year, EMP changing."""
    rng = np.random.default_rng(seed)
    years = rng.integers(1, 5, people)
    first = rng.integers(0, 5 - years)
    person = np.repeat(np.arange(people), years)
    offset = np.arange(len(person)) - np.repeat(np.cumsum(years) - years, years)
    age = rng.integers(0, 78, people)[person] + offset  # up to 80, the schema's max
    emp = np.where(rng.random(len(person)) < 0.8, (age > 20).astype(int), rng.integers(0, 2, len(person)))
    return pd.DataFrame({"id": person.astype(str), "YEAR": 2015 + first[person] + offset,
                         "SEX": rng.integers(1, 3, people)[person], "AGE": age, "EMP": emp})


PARAMS = {"runs": [{"epsilon": 5.0, "delta": 1e-9, "max_records": 10000, "max_records_per_individual": 4}],
          "schema": {"YEAR": {"dtype": "int", "values": [2015, 2016, 2017, 2018]},
                     "SEX": {"dtype": "int", "values": [1, 2]},
                     "AGE": {"dtype": "int", "min": 0, "max": 80},  # some individuals reach it
                     "EMP": {"dtype": "int", "values": [0, 1]}},
          "distinct_per_individual": ["YEAR"],
          "individual": {"stable": ["SEX"], "advances": {"AGE": "YEAR"}, "follow": ["EMP"]}}


@pytest.mark.parametrize("seed", range(3))
def test_released_individuals_keep_stable_columns_and_advance(tmp_path, seed):
    out = tmp_path / "out.csv"
    (run,) = api.release(panel(600, seed), PARAMS, method="histogram", seed=seed, id_column="id", output=out,
                         group_columns=("YEAR",))
    ledger = run.ledger  # the individuals node spends exactly its share, and the run exactly its budget
    assert ledger.node_spent("individuals") == pytest.approx(ledger.node_rho("individuals"), rel=1e-12)
    assert ledger.node_rho("individuals") == pytest.approx(0.05 * ledger.budget, rel=1e-12)
    assert ledger.spent == pytest.approx(ledger.budget, rel=1e-12)
    assert ["individuals by the YEAR values of their rows (1 to 4)",
            "transitions of EMP between consecutive YEAR"] == [
        c.step for c in ledger.charges if c.step.startswith(("individuals", "transitions"))]
    table = pd.read_csv(out).sort_values(["id", "YEAR"])
    assert table.groupby("id")["SEX"].nunique().max() == 1
    step = table.groupby("id")[["YEAR", "AGE"]].diff().dropna()
    assert len(step) > 0.3 * len(table) and (step["AGE"] == step["YEAR"]).all() and (step["YEAR"] >= 1).all()
    assert table.groupby("id").size().max() <= 4


def test_linking_needs_ids_and_the_clock_distinct(tmp_path):
    data = panel(100, 0)
    with pytest.raises(api.OptionError, match="needs the private file's id column"):
        api.release(data.drop(columns="id"), PARAMS, method="histogram", seed=0, group_columns=("YEAR",))
    with pytest.raises(api.OptionError, match="YEAR orders an individual's rows"):
        api.release(data, PARAMS, method="histogram", seed=0, id_column="id", distinct_per_individual=(),
                    group_columns=("YEAR",))


def test_the_plan_has_the_individuals_node_only_where_theta_allows_pairs():
    params = json.loads(json.dumps(PARAMS))
    params["runs"].append(dict(params["runs"][0], max_records_per_individual=1, epsilon=1.0))
    with_pairs, single = api.plan(params, method="histogram")
    assert [n.name for n in with_pairs.nodes][-2:] == ["individuals", "method"]
    assert [c.name for c in with_pairs.node("individuals").children] == [
        "individuals by the YEAR values of their rows (1 to 4)", "transitions of EMP between consecutive YEAR"]
    assert "individuals" not in [n.name for n in single.nodes]


def test_followed_group_columns_are_homes_and_linking_changes_only_stable_and_advancing_codes(monkeypatch):
    """AREA, fixed per real individual, is a group column and followed: synthetic individuals keep it as often as
    its noisy transitions say (near always), while their stable and advancing columns still hold, and so does the
    edit rule; linking changes no code of any other column (every group's rows and their followed codes stay as
    synthesized), and each year keeps its counts of SEX, the stable column."""
    data = panel(800, 0)
    data["AREA"] = np.random.default_rng(1).integers(0, 3, data["id"].astype(int).max() + 1)[data["id"].astype(int)]
    data.loc[data["AGE"] < 18, "EMP"] = 0
    params = json.loads(json.dumps(PARAMS))
    params["schema"]["AREA"] = {"dtype": "int", "values": [0, 1, 2]}
    params["individual"]["follow"] = ["AREA", "EMP"]
    params["constraints"] = ["AGE < 18 => EMP = 0"]
    seen, shares = [], []
    take, share = stage._take_keys, stage.Changes.stay_share
    monkeypatch.setattr(stage.Changes, "stay_share", lambda self, t: shares.append(share(self, t)) or shares[-1])

    def kept(codes, first, position, keys):
        out = take(codes, first, position, keys)
        seen.append((codes, out, keys.columns))
        return out
    monkeypatch.setattr(stage, "_take_keys", kept)
    (run,) = api.release(data, params, method="histogram", seed=0, id_column="id", group_columns=("AREA", "YEAR"))
    (before, after, columns), = seen
    others = [j for j in range(before.shape[1]) if j not in columns]
    assert (before[:, others] == after[:, others]).all() and (before != after).any()
    names = list(run.table.columns)
    # each year keeps its synthesized SEX counts, give or take a row or two (each row off counts twice below: 2
    # here, 72 without _Balance)
    year, sex = names.index("YEAR"), names.index("SEX")
    counts = [Counter(zip(codes[:, year], codes[:, sex])) for codes in (before, after)]
    assert sum(abs(counts[0][k] - counts[1][k]) for k in counts[0] | counts[1]) <= 4
    table = run.table.astype(str).apply(pd.to_numeric).assign(id=run.individuals).sort_values(["id", "YEAR"])
    same = table["id"].to_numpy()[1:] == table["id"].to_numpy()[:-1]
    assert same.sum() > 0.3 * len(table)
    stayed = (table["AREA"].to_numpy()[1:] == table["AREA"].to_numpy()[:-1])[same].mean()
    assert stayed > 0.85 and abs(stayed - np.mean(shares[:3])) < 0.03  # positions 0-2 start pairs
    assert table.groupby("id")["SEX"].nunique().max() == 1
    step = table.groupby("id")[["YEAR", "AGE"]].diff().dropna()
    assert (step["AGE"] == step["YEAR"]).all() and (step["YEAR"] >= 1).all()
    assert not ((table["AGE"] < 18) & (table["EMP"] != 0)).any()


def test_rows_starting_individuals_take_back_the_stable_codes_followers_gave_up():
    """Followers 0, 1 and 5 (homes 0, 1 and 3) held code 0 and took their individuals' code 1.  Rows 2, 3 and 4 start
    individuals with code 1: 2 gives it back in home 0, 3 in home 1, and 4 (home 2) for follower 5, whose home has
    no such row; where an edit rule forbids row 4 code 0, it keeps 1.  Row 6 (code 1) follows without a change."""
    def balance(boxes):
        keys = SimpleNamespace(moves=1, columns=np.array([0]), sizes=np.array([2]),
                               digits=lambda k: np.asarray(k)[:, None], stable=[np.array([0, 0, 1, 1, 1, 0, 1])],
                               rekeyed=np.zeros(7, dtype=bool))
        codes = np.column_stack([keys.stable[0], np.arange(7)])  # the code, then the row's number
        stage._Balance(keys, codes, np.array([0, 1, 0, 1, 2, 3, 0]), boxes)(
            np.array([1, 1, 1, 1]), np.array([0, 1, 5, 6]), np.array([2, 3, 4]), np.random.default_rng(0))
        return keys.stable[0].tolist(), keys.rekeyed.tolist()
    assert balance(None) == ([0, 0, 0, 0, 0, 0, 1], [False, False, True, True, True, False, False])
    rule = SimpleNamespace(forbidden=lambda codes: (codes[:, 0] == 0) & (codes[:, 1] == 4))
    assert balance(rule) == ([0, 0, 0, 0, 1, 0, 1], [False, False, True, True, False, False, False])


@pytest.mark.parametrize("seed", range(4))
def test_a_starting_row_of_the_followers_home_gives_a_code_back_before_one_of_another(seed):
    """Follower 0 (home 0) took code 1; rows 1 (home 1) and 2 (home 0) start individuals with code 1: row 2 takes
    code 0, row 1 keeps 1."""
    keys = SimpleNamespace(moves=1, columns=np.array([0]), sizes=np.array([2]),
                           digits=lambda k: np.asarray(k)[:, None], stable=[np.array([0, 1, 1])],
                           rekeyed=np.zeros(3, dtype=bool))
    stage._Balance(keys, keys.stable[0][:, None].copy(), np.array([0, 1, 0]), None)(
        np.array([1]), np.array([0]), np.array([1, 2]), np.random.default_rng(seed))
    assert keys.stable[0].tolist() == [0, 1, 0] and keys.rekeyed.tolist() == [False, False, True]


def test_homes_are_off_where_the_structure_ties_a_stable_or_advancing_column():
    """A derivation reading AGE (advancing) or setting SEX (stable) turns homes off, and so does a stable or
    advancing group column; a derivation between other columns does not; a group column that is not followed is
    no home."""
    from types import SimpleNamespace

    from dpsyn.dataloader.individuals import Individual
    from dpsyn.dataloader.structure import Structure
    from dpsyn.lib.records.constraints import Derivation
    names = ["YEAR", "AREA", "SEX", "AGE", "EMP", "JOB"]
    individual = Individual(("SEX",), (("AGE", "YEAR"),), ("AREA", "EMP"), "YEAR")

    def homes(*pairs, groups=("AREA", "YEAR")):
        structure = Structure(derivations=tuple(Derivation(names.index(p), names.index(c), np.zeros(2, dtype=np.int64))
                                                for p, c in pairs))
        env = SimpleNamespace(ctx=SimpleNamespace(group_columns=groups), structure=structure,
                              encoder=SimpleNamespace(domain=SimpleNamespace(names=names)))
        return stage._homes(env, individual)
    assert homes() == ["AREA"] and homes(("EMP", "JOB")) == ["AREA"]
    assert homes(("AGE", "JOB")) == [] and homes(("JOB", "SEX")) == []
    assert homes(groups=("YEAR",)) == [] and homes(groups=("AREA", "SEX", "YEAR")) == []


def test_the_links_gumbel_noise_is_numpys_own_draws():
    """Linking's Gumbel noise, taken from whole arrays of uniforms, is numpy's own sampler's (the same stream of
    uniforms, up to the last bit of a logarithm), and a uniform of 0 is drawn again as numpy draws it again."""
    ours = -np.log(-np.log(_open_uniform(np.random.default_rng(3), (300, 200))))
    assert np.allclose(ours, np.random.default_rng(3).gumbel(size=(300, 200)), rtol=0, atol=1e-12)

    class ZeroFirst:
        def __init__(self):
            self.rng, self.first = np.random.default_rng(0), True

        def random(self, size):
            out = self.rng.random(size)
            if self.first:
                out.flat[0], self.first = 0.0, False
            return out
    u = _open_uniform(ZeroFirst(), (2, 2))
    again = np.random.default_rng(0).random(5)
    assert ((u > 0) & (u < 1)).all()
    assert u.flat[0] == 1 - again[4] and np.array_equal(u.flat[1:], 1 - again[1:4])  # only the 0 drawn again
