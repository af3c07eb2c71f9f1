"""Seeded generator of Sprint-2-shaped person records (every column of the Sprint-2 schema).

Not real data: a plausible stand-in with dependencies between columns, for tests and
benchmarks.  Each simulated person (``sim_individual_id``) appears in 1 to 7
consecutive years in one PUMA, ageing one year per row; sex, race and Hispanic
origin are fixed per person; schooling, marital status, employment (EMPSTAT,
EMPSTATD, LABFORCE, WRKLSTWK...), incomes, poverty and commute times follow age,
education and employment.

    python tests/sprint2_generator.py --rows 1000000 --out bench/out/sprint2_private.csv --seed 1
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

SPRINT2_PARAMS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "sprint2_parameters.json"
YEARS = np.arange(2012, 2019)


def generate(rows: int, seed: int, pumas: list[str] | None = None) -> pd.DataFrame:
    """About ``rows`` records (exactly ``rows``) with every Sprint-2 column plus sim_individual_id."""
    rng = np.random.default_rng(seed)
    if pumas is None:
        pumas = json.loads(SPRINT2_PARAMS.read_text())["schema"]["PUMA"]["values"]
    people = rows // 3 + 1
    n_years = rng.integers(1, 8, size=people)
    person = np.repeat(np.arange(people), n_years)[:rows]
    offset = np.arange(len(person)) - np.repeat(np.cumsum(n_years) - n_years, n_years)[:rows]
    first_year = rng.integers(0, 8 - n_years)
    year_idx = first_year[person] + offset
    n = len(person)

    puma_weights = rng.dirichlet(np.full(len(pumas), 2.0))
    puma = np.asarray(pumas)[rng.choice(len(pumas), size=people, p=puma_weights)][person]
    sex = rng.integers(1, 3, size=people)[person]
    race = rng.choice(np.arange(1, 10), size=people, p=[.70, .14, .01, .03, .03, .005, .05, .025, .01])[person]
    hispan = np.where(rng.random(people) < 0.12, rng.choice([1, 2, 3, 4], size=people), 0)[person]
    age = rng.choice(90, size=people)[person] + offset

    adult = age >= 18
    educ = np.where(age < 6, 0, np.where(age < 18, np.clip((age - 4) // 2, 1, 6),
                                         rng.choice(np.arange(2, 12), size=n)))
    marst = np.where(age < 18, 6, rng.choice([1, 2, 3, 4, 5, 6], size=n, p=[.5, .02, .03, .12, .06, .27]))
    citizen = np.where(rng.random(n) < 0.9, 0, rng.choice([1, 2, 3, 4, 5, 6], size=n))
    speakeng = np.where(citizen == 0, rng.choice([0, 1, 3], size=n, p=[.1, .8, .1]),
                        rng.choice([2, 4, 5, 6, 7, 8], size=n))
    gq = np.where(rng.random(n) < 0.96, rng.choice([0, 1, 2], size=n, p=[.1, .85, .05]),
                  rng.choice([3, 4, 5, 6], size=n))

    work_age = (age >= 16) & (age < 80)
    p_employed = np.clip(0.35 + 0.04 * educ - 0.004 * np.abs(age - 42), 0.05, 0.95)
    u = rng.random(n)
    empstat = np.where(~work_age, 0, np.where(u < p_employed, 1, np.where(u < p_employed + 0.05, 2, 3)))
    empstatd = np.select([empstat == 1, empstat == 2, empstat == 3],
                         [rng.choice([10, 11, 12, 13, 14, 15], size=n, p=[.9, .05, .02, .01, .01, .01]),
                          rng.choice([20, 21, 22], size=n), rng.choice([30, 31, 32, 33, 34], size=n)], 0)
    labforce = np.select([empstat == 0, empstat == 3], [0, 1], 2)
    wrklstwk = np.select([empstat == 0, empstat == 1], [0, 2], 1)
    absent = np.where(empstat == 0, 0, np.where(empstat == 1, 4, rng.choice([1, 2, 3], size=n)))
    looking = np.where(empstat == 2, 2, np.where(empstat == 0, 0, 1))
    availble = np.where(empstat == 2, 4, np.where(empstat == 0, 0, rng.choice([1, 5], size=n)))
    wrkrecal = np.where(empstat == 0, 0, rng.choice([1, 2, 3], size=n, p=[.9, .05, .05]))
    workedyr = np.where(empstat == 0, 0, np.where(empstat == 1, 3, rng.choice([1, 2], size=n)))

    wage = np.where(empstat == 1, np.round(rng.lognormal(9.6 + 0.12 * educ, 0.8, size=n), -2), 0)
    welfare = np.where((empstat != 1) & adult & (rng.random(n) < 0.05), np.round(rng.uniform(500, 9000, n), -1), 0)
    invest = np.where(adult & (rng.random(n) < 0.15), np.round(rng.lognormal(7, 1.5, n), -1), 0)
    earn = wage + np.where(rng.random(n) < 0.05, np.round(rng.uniform(-2000, 30000, n), -2), 0)
    inctot = np.where(age < 15, 9999999, wage + welfare + invest + np.where(age > 64, 14000, 0))
    incfields = [np.where(age < 15, 999999, x) for x in (wage, welfare, invest, earn)]
    poverty = np.where(age < 15, 0, np.clip(np.round(inctot / 250 + rng.normal(0, 40, n)), 1, 501))
    departs = np.where(empstat == 1, rng.choice(np.arange(500, 1100, 5), size=n), 0)
    arrives = np.where(empstat == 1, departs + rng.choice(np.arange(5, 90, 5), size=n), 0)
    arrives = np.where(arrives % 100 >= 60, arrives + 40, arrives)
    hcovany = np.where(rng.random(n) < 0.92, 2, 1)
    hcovpriv = np.where((hcovany == 2) & ((empstat == 1) | (rng.random(n) < 0.4)), 2, 1)
    hinsemp = np.where((hcovpriv == 2) & (empstat == 1), 2, 1)
    hinscaid = np.where((hcovany == 2) & (hcovpriv == 1) & (age < 65), 2, 1)
    hinscare = np.where(age >= 65, 2, 1)
    hhwt = np.round(rng.lognormal(4.3, 0.5, n), 1)
    perwt = np.round(hhwt * rng.uniform(0.7, 1.3, n), 1)

    return pd.DataFrame({
        "PUMA": puma, "YEAR": YEARS[year_idx], "HHWT": hhwt, "GQ": gq, "PERWT": perwt, "SEX": sex,
        "AGE": age, "MARST": marst, "RACE": race, "HISPAN": hispan, "CITIZEN": citizen, "SPEAKENG": speakeng,
        "HCOVANY": hcovany, "HCOVPRIV": hcovpriv, "HINSEMP": hinsemp, "HINSCAID": hinscaid,
        "HINSCARE": hinscare, "EDUC": educ, "EMPSTAT": empstat, "EMPSTATD": empstatd, "LABFORCE": labforce,
        "WRKLSTWK": wrklstwk, "ABSENT": absent, "LOOKING": looking, "AVAILBLE": availble,
        "WRKRECAL": wrkrecal, "WORKEDYR": workedyr, "INCTOT": inctot.astype(np.int64),
        "INCWAGE": incfields[0].astype(np.int64), "INCWELFR": incfields[1].astype(np.int64),
        "INCINVST": incfields[2].astype(np.int64), "INCEARN": incfields[3].astype(np.int64),
        "POVERTY": poverty.astype(np.int64), "DEPARTS": departs, "ARRIVES": np.minimum(arrives, 2359),
        "sim_individual_id": person,
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--public", action="store_true",
                        help="write a public-style file: no id column (rows of other people, same PUMAs)")
    args = parser.parse_args()
    df = generate(args.rows, args.seed)
    if args.public:
        df = df.drop(columns="sim_individual_id")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    print(f"wrote {len(df)} rows to {args.out}")


if __name__ == "__main__":
    main()
