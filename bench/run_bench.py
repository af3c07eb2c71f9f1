"""Every method on the same datasets, epsilons and seeds; writes the accuracy table of bench/RESULTS.md.

    python bench/run_bench.py [--datasets demo adult ct_drug_deaths] [--methods ...] [--eps 0.1 1 10]
                              [--seeds 3] [--out bench/out/run_bench.md]

Each (dataset, method, epsilon, seed) runs in a forked process.  Our methods go through
the Python API (api.release: validation, contribution bounding, encoding, synthesis,
decoding), so wall time is that whole call on the in-memory table; peak memory is the
process's largest resident set (it includes the loaded dataset).  The table is scored
with the ``score`` command's code (evaluation/scoring.py) against the real table:
Sprint-2 score (per group when the dataset has groups), mean 1/2/3-way TVD (100 random
3-way marginals), the raw-value errors of evaluation/mixed.py (mixed marginals; linear
thresholds with a target) and, with a target, the accuracy and macro F1 of a logistic
regression trained on the synthetic table and tested on held-out real rows, with its largest
gap in false-negative rate between the groups of the dataset's sensitive column (``--sensitive``
for another), per seed and between the groups' seed-mean rates.  Means over seeds.  The
datasets are read from ../shared/data, or from the folder the BENCH_DATA variable names.

Peers (``--methods mst aim``, bench/peers.py, after ``pip install -r requirements-bench.txt``):
private-pgm's MST and AIM on the same integer codes (encoded as the release encodes
them, each individual truncated to theta rows and every noise scale multiplied by theta),
group columns as ordinary attributes, at private-pgm's reference settings (AIM uncapped unless
``--aim-cap`` gives seconds of selection rounds: the table then says so); wall time is their synthesis
alone.  Their codes are decoded as a user of them would decode them without spending budget: values
inside each bin drawn from the public file's values there where there is one, else uniformly on the grid.

The ceiling (``--methods bootstrap``, not a release and not private): the real table resampled with replacement
to its own size, each seed a draw, so its errors are sampling's alone; ε does not apply (the table shows —).

Every table is scored twice: on decoded values (what a user gets: the scorer's own bins, as above) and
on the encoded domain (the bins every method saw: each synthetic table re-encoded with the peers'
encoder and compared with the real table encoded alike, mean TVD of the same 1-, 2- and 3-way
marginals): the first is the release, the second the model's quality, free of decoding.

Datasets:
* demo: the bundled ACS excerpts (national 2018+2019), public MA+TX file, groups
  PUMA × YEAR, delta 1e-10, target OWN_RENT, parameters.json's 9 edit rules (rows with an
  industry code outside the schema dropped, as ./run.sh does);
* demo_private_only: the demo without its public file (groups from private records alone);
* acs_income: the demo's tables restricted to rows with an income decile, target INCOME_HIGH (decile >= 5),
  the income columns (PINCP, PINCP_DECILE, POVPIP) dropped, with the edit rules that do not name them, sensitive SEX;
* adult: ../shared/data/adult_privatepgm, 14 integer-coded columns (domain from its
  json), no groups, no public file, delta 1e-9, target income>50K;
* adult_raw: ../shared/data/uci_adult/adult.data as published (32,561 rows; age, fnlwgt,
  education-num, capital-gain, capital-loss, hours-per-week numeric with their documented
  ranges), no groups, no public file, delta 1e-9, target income;
* ct_drug_deaths: ../shared/data/ct_drug_deaths (DPSyn's preprocessed file, ID
  dropped), groups Date (year), delta 1e-9, target Fentanyl.  Its category sets are
  taken from the file itself (the benchmark convention of private-pgm's domain files;
  a real release would take them from a data dictionary), Age in [0, 100];
* acs_split: one state private (Texas 2018+2019), another public (Massachusetts
  2018+2019), the demo's schema and edit rules with Texas's PUMAs, groups PUMA × YEAR, target OWN_RENT;
* sprint2: 100,000 rows of tests/sprint2_generator.py (``--sprint2-rows`` sets how many; seed 1;
  public file a fifth as many rows, seed 2), the Sprint-2 parameters: theta 7 per sim_individual_id, YEAR distinct per
  individual, groups PUMA × YEAR, no target.
* gen_*: the generalization suite's tables (bench/generalization.py: schema from a public quarter, the rest
  released).
Every other dataset has one row per individual (max_records_per_individual 1).
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import generalization  # noqa: E402
from dpsyn.api import release  # noqa: E402
from dpsyn.dataloader.encoding import Encoder  # noqa: E402
from dpsyn.dataloader.reading import public_ranges, read_csv_text, validate  # noqa: E402
from dpsyn.dataloader.schema import parse_schema  # noqa: E402
from dpsyn.evaluation.metrics import workload_errors  # noqa: E402
from dpsyn.evaluation.scoring import EvaluationOptions, Evaluator  # noqa: E402
from dpsyn.lib.privacy.bounding import bound_contributions  # noqa: E402
from dpsyn.lib.tuning import T

SHARED = Path(os.environ.get("BENCH_DATA", ROOT.parent / "shared" / "data"))  # BENCH_DATA: a copy elsewhere
VARIANTS = {"histogram": ("histogram", {}), "dpsyn": ("dpsyn", {}), "dpsyn-select": ("dpsyn", {"marginals": "select"}),
            "dpsyn-writeup": ("dpsyn", {"planner": "write-up"}), "dpsyn-adaptive": ("dpsyn", {"regime": "adaptive"}),
            "rap": ("rap", {}),
            "dpsyn+reweight": ("dpsyn", {}), "rap+reweight": ("rap", {}),  # --reweight (--reweight-share)
            "superquail": ("superquail", {}), "superquail-bal": ("superquail", {"fair": "bal"}),
            "dpsyn-no-bin-values": ("dpsyn", {})}  # --no-bin-values
# rap and superquail get the dataset's target; superquail-bal also its sensitive column
PEERS = ("mst", "aim")  # bench/peers.py; needs requirements-bench.txt
# not a release: as many rows drawn with replacement from the real table as it has, so the errors are sampling's
# alone (what a perfect model of the real table would still score with a table of its size); ε does not apply
CEILING = ("bootstrap",)


@dataclass
class Dataset:
    name: str
    schema: dict           # the parameters file's "schema" object
    private: pd.DataFrame  # text, as the score command reads it; also the real table for scoring
    public: pd.DataFrame | None
    groups: tuple[str, ...]
    delta: float
    target: str | None
    on_invalid: str = "error"
    id_column: str | None = None  # the private table's individual ids (dropped for scoring)
    theta: int = 1
    distinct: tuple[str, ...] = ()  # distinct_per_individual
    sensitive: str | None = None    # groups for per-group error rates (and superquail-bal's --sensitive)
    constraints: tuple[str, ...] = ()  # the edit rules the parameters declare (the demo's, as ./run.sh runs it)

    def params(self, epsilon: float) -> dict:
        return {"runs": [{"epsilon": epsilon, "delta": self.delta, "max_records": 10 ** 7,
                          "max_records_per_individual": self.theta}], "schema": self.schema,
                "distinct_per_individual": list(self.distinct), "constraints": list(self.constraints)}

    @property
    def real(self) -> pd.DataFrame:
        """The private table without its id column: what the scorer compares against."""
        return self.private.drop(columns=self.id_column) if self.id_column else self.private

    def codes(self, rng: np.random.Generator) -> tuple[np.ndarray, Encoder]:
        """The private table encoded as a release encodes it (for the peers), each individual truncated
        to ``theta`` rows at random as the release's contribution bounding does."""
        schema = parse_schema(self.params(1.0))
        public = None if self.public is None else validate(self.public, schema, "public", public=True)
        if public is not None:
            schema = schema.with_public_ranges(public_ranges(public, schema))
        encoder = Encoder.fit(schema, public)
        codes = encoder.encode(validate(self.real, schema, "private", on_invalid=self.on_invalid))
        if self.id_column:
            if len(codes) != len(self.private):
                raise ValueError(f"{self.name}: rows dropped by validation, ids no longer line up")
            codes = codes[bound_contributions(self.private[self.id_column].to_numpy(), self.theta, rng)]
        return codes, encoder


def demo_parameters() -> dict:
    """parameters.json as ./run.sh reads it, a fresh copy each call (callers edit its schema)."""
    return json.loads((ROOT / "parameters.json").read_text())


def demo() -> Dataset:
    """The bundled demo as ./run.sh releases it: parameters.json's schema and its declared edit rules."""
    parameters = demo_parameters()
    return Dataset("demo", parameters["schema"], read_csv_text(ROOT / "data/demo/private.csv", "private"),
                   read_csv_text(ROOT / "data/demo/public.csv", "public"), ("PUMA", "YEAR"), 1e-10, "OWN_RENT",
                   "drop", constraints=tuple(parameters["constraints"]))


def demo_private_only() -> Dataset:
    data = demo()
    data.name, data.public = "demo_private_only", None
    return data


INCOME_COLUMNS = ("PINCP", "PINCP_DECILE", "POVPIP")  # income and what is computed from it


def acs_income() -> Dataset:
    """The demo's tables (private and public) as an income task: rows with an income decile (people 15 and over),
    INCOME_HIGH = 1 where PINCP_DECILE >= 5, the income columns dropped, target INCOME_HIGH, sensitive SEX."""
    base = demo()

    def derive(table: pd.DataFrame) -> pd.DataFrame:
        table = table[table["PINCP_DECILE"] != "N"]
        high = (table["PINCP_DECILE"].astype(int) >= 5).astype(int).astype(str)
        return table.drop(columns=list(INCOME_COLUMNS)).assign(INCOME_HIGH=high).reset_index(drop=True)

    schema = {c: e for c, e in base.schema.items() if c not in INCOME_COLUMNS}
    schema["INCOME_HIGH"] = {"dtype": "int", "values": [0, 1]}
    rules = tuple(r for r in base.constraints if not any(c in r for c in INCOME_COLUMNS))
    return Dataset("acs_income", schema, derive(base.private), derive(base.public), base.groups, base.delta,
                   "INCOME_HIGH", base.on_invalid, sensitive="SEX", constraints=rules)


def adult() -> Dataset:
    folder = SHARED / "adult_privatepgm"
    domain = json.loads((folder / "adult-domain.json").read_text())
    text = pd.read_csv(folder / "adult.csv", dtype=str)[list(domain)]
    return Dataset("adult", {c: {"dtype": "int", "values": list(range(k))} for c, k in domain.items()}, text, None,
                   (), 1e-9, "income>50K", sensitive="race")


ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
                 "income")
ADULT_RANGES = {"age": (17, 90), "fnlwgt": (12285, 1484705), "education-num": (1, 16), "capital-gain": (0, 99999),
                "capital-loss": (0, 4356), "hours-per-week": (1, 99)}  # ../shared/data/uci_adult/SOURCE.md


def adult_raw() -> Dataset:
    """UCI Adult as published (adult.data, 32,561 rows): six integer numeric columns with the documented
    ranges, category sets from the file (private-pgm's convention), no groups, delta 1e-9, target income."""
    text = pd.read_csv(SHARED / "uci_adult" / "adult.data", header=None, names=list(ADULT_COLUMNS), dtype=str,
                       skipinitialspace=True, keep_default_na=False)
    text = text[text["income"] != ""].reset_index(drop=True)
    schema = {c: ({"dtype": "int", "min": ADULT_RANGES[c][0], "max": ADULT_RANGES[c][1]} if c in ADULT_RANGES
                  else {"dtype": "str", "values": sorted(text[c].unique())}) for c in ADULT_COLUMNS}
    return Dataset("adult_raw", schema, text, None, (), 1e-9, "income")


def ct_drug_deaths() -> Dataset:
    text = pd.read_csv(SHARED / "ct_drug_deaths" / "accidential_drug_deaths_dpsyn_preprocessed.csv", dtype=str,
                       keep_default_na=False).drop(columns="ID")
    text = text.replace("", "NA")
    entries = {c: {"dtype": "str", "values": sorted(text[c].unique())} for c in text.columns if c != "Age"}
    entries["Age"] = {"dtype": "int", "min": 0, "max": 100}
    return Dataset("ct_drug_deaths", {c: entries[c] for c in text.columns}, text, None, ("Date",), 1e-9, "Fentanyl")


def acs_split() -> Dataset:
    """One state private, another public: Texas 2018+2019 (private) and Massachusetts 2018+2019 (public),
    the demo's schema with Texas's PUMAs (data dictionary) and the industry codes seen in the public file."""
    folder = SHARED / "nist_crc_acs_excerpts"
    dictionary = json.loads((folder / "data_dictionary.json").read_text())

    def stack(state: str) -> pd.DataFrame:
        parts = [read_csv_text(folder / f"{state}{year}.csv", "excerpt").assign(YEAR=str(year))
                 for year in (2018, 2019)]
        return pd.concat(parts, ignore_index=True)

    private, public = stack("tx"), stack("ma")
    parameters = demo_parameters()
    schema = parameters["schema"]
    schema["PUMA"] = {"dtype": "str", "values": [p for p in dictionary["PUMA"]["values"] if p.startswith("48-")]}
    schema["INDP"] = dict(schema["INDP"], values=sorted(int(v) for v in set(public["INDP"]) if v != "N"))
    columns = list(schema)
    return Dataset("acs_split", schema, private[columns], public[columns], ("PUMA", "YEAR"), 1e-10, "OWN_RENT",
                   "drop", constraints=tuple(parameters["constraints"]))


def sprint2(rows: int = 100_000) -> Dataset:
    """tests/sprint2_generator.py: ``rows`` private rows (seed 1, up to 7 per sim_individual_id, one per YEAR)
    and rows // 5 public rows (seed 2), the Sprint-2 parameters (delta 3.45e-11, theta 7), YEAR declared
    distinct per individual, values outside the schema clipped (as bench/bench_release.py runs it)."""
    from tests.sprint2_generator import SPRINT2_PARAMS, generate
    params = json.loads(SPRINT2_PARAMS.read_text())
    private = generate(rows, seed=1).astype(str)
    public = generate(rows // 5, seed=2).drop(columns="sim_individual_id").astype(str)
    return Dataset("sprint2", params["schema"], private, public, ("PUMA", "YEAR"), params["runs"][0]["delta"], None,
                   "clip", "sim_individual_id", 7, ("YEAR",))


DATASETS = {"demo": demo, "demo_private_only": demo_private_only, "acs_income": acs_income, "adult": adult,
            "adult_raw": adult_raw, "ct_drug_deaths": ct_drug_deaths, "acs_split": acs_split, "sprint2": sprint2,
            **{name: (lambda name=name: generalization.dataset(name)) for name in generalization.SUITE}}
_DATA: Dataset | None = None  # the dataset of the current batch, inherited by forked runs
_SHARE = T.reweight_share  # the +reweight variants' share, set by --reweight-share
_REWEIGHT = "moments:*"  # the +reweight variants' measures, set by --reweight
_SUPERQUAIL: dict = {}  # --superquail-alpha / --superquail-beta
_RAP: dict = {}  # --rap-rows / --rap-device


def _one_run(args) -> tuple[pd.DataFrame, float, float]:
    variant, eps, seed, aim_cap = args
    data = _DATA
    start = time.perf_counter()
    if variant in CEILING:
        real = validate(data.real, parse_schema(data.params(eps)), "private", on_invalid=data.on_invalid)
        table = real.sample(n=len(real), replace=True, random_state=seed).reset_index(drop=True)
        seconds = time.perf_counter() - start
    elif variant in PEERS:
        from bench import peers
        rng = np.random.default_rng(seed)
        codes, encoder = data.codes(rng)
        start = time.perf_counter()
        if variant == "mst":
            out = peers.mst(codes, encoder.sizes, encoder.names, eps, data.delta, rng, data.theta)
        else:
            out = peers.aim(codes, encoder.sizes, encoder.names, eps, data.delta, rng, aim_cap, data.theta)
        seconds = time.perf_counter() - start
        table = encoder.decode(out, np.random.default_rng(seed))
    else:
        method, options = VARIANTS[variant]
        if method in ("rap", "superquail") and data.target is not None:
            options = {**options, "target": data.target}
        if options.get("fair"):
            options = {**options, "sensitive": data.sensitive}
        if method == "superquail":
            options = {**options, **_SUPERQUAIL}
        if method == "rap":
            options = {**options, **_RAP}
        reweight = {"reweight": _REWEIGHT, "reweight_share": _SHARE} if variant.endswith("+reweight") else {}
        (run,) = release(data.private, data.params(eps), data.public, method, options, seed=seed,
                         group_columns=data.groups, on_invalid=data.on_invalid, id_column=data.id_column,
                         bin_values=not variant.endswith("-no-bin-values"), **reweight)
        seconds, table = time.perf_counter() - start, run.table
    return table, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class EncodedScorer:
    """Scores a synthetic table on the encoded domain: re-encoded with the encoder the peers' codes come
    from (Dataset.codes: the schema and the public file, the bins every method saw) and compared with the
    real table encoded alike (validated as the release validates it), mean TVD over the evaluator's
    workload (``workload``: the same 1-, 2- and 3-way marginals as the decoded scores)."""

    def __init__(self, data: Dataset, workload: dict):
        schema = parse_schema(data.params(1.0))
        public = None if data.public is None else validate(data.public, schema, "public", public=True)
        if public is not None:
            schema = schema.with_public_ranges(public_ranges(public, schema))
        self.encoder = Encoder.fit(schema, public)
        self.real = self.encoder.encode(validate(data.real, schema, "private", on_invalid=data.on_invalid))
        self.workload = workload

    def tvds(self, table: pd.DataFrame) -> list[float]:
        """Mean TVD of the 1-, 2- and 3-way marginals of ``table`` (typed, as a release or a decode gives it)."""
        typed = pd.DataFrame({c: (table[c] if isinstance(table[c].dtype, pd.CategoricalDtype) else
                                  table[c].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan))
                              for c in self.encoder.names})
        errors = workload_errors(self.real, self.encoder.encode(typed), self.encoder.sizes, self.workload)
        return [errors[k]["mean"] if k in errors else np.nan for k in ("1-way", "2-way", "3-way")]


def _fnr_gap(trained: dict) -> float:
    """The largest gap in false-negative rate between sensitive groups (NaN without groups)."""
    gap = trained.get("by_group", {}).get("largest_gap", {}).get("false_negative_rate")
    return np.nan if gap is None else gap


def _fnrs(trained: dict) -> dict[str, float]:
    """Each sensitive group's false-negative rate (groups with positives in the test rows)."""
    groups = trained.get("by_group", {}).get("groups", {})
    return {g: r["false_negative_rate"] for g, r in groups.items() if r["false_negative_rate"] is not None}


def _gap_of_means(fnrs: list[dict[str, float]]) -> float:
    """The largest gap between the groups' false-negative rates averaged over seeds (NaN without groups).
    Unlike the mean of each seed's largest gap, a group with few positives in the test rows does not
    add its seed-to-seed scatter to the gap."""
    groups = set().union(*fnrs) if fnrs else set()
    means = [np.mean([f[g] for f in fnrs if g in f]) for g in groups]
    return float(max(means) - min(means)) if len(means) > 1 else np.nan


def main() -> None:
    global _DATA, _SHARE, _REWEIGHT, _SUPERQUAIL, _RAP
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", choices=list(VARIANTS) + list(PEERS) + list(CEILING),
                        default=list(VARIANTS),
                        help="our methods (default), the peers mst, aim (requirements-bench.txt) and bootstrap "
                             "(not private: the real table resampled, the ceiling)")
    parser.add_argument("--aim-cap", type=float, default=None,
                        help="AIM's time cap in seconds (default none, as the reference): then one last round "
                             "spends the rest of the budget")
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1 (to run seeds in separate processes)")
    parser.add_argument("--reweight-share", type=float, default=T.reweight_share,
                        help="the +reweight variants' share of the budget for the moments of every numeric column")
    parser.add_argument("--reweight", default=_REWEIGHT,
                        help="the +reweight variants' measures (main.py's --reweight SPEC; default: moments:*)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "run_bench.md")
    parser.add_argument("--superquail-alpha", type=float, help="the superquail variants' --alpha (its grid)")
    parser.add_argument("--superquail-beta", type=int, help="the superquail variants' --beta (its grid)")
    parser.add_argument("--sensitive", help="the column whose groups the scorer compares (and superquail-bal's "
                                            "--sensitive), instead of the dataset's own")
    parser.add_argument("--rap-rows", type=int, help="the rap variants' --rows (relaxed rows)")
    parser.add_argument("--rap-device", choices=("cpu", "gpu"), help="the rap variants' --device")
    parser.add_argument("--sprint2-rows", type=int, default=100_000, help="rows of the sprint2 dataset's private table")
    args = parser.parse_args()
    _SHARE, _REWEIGHT = args.reweight_share, args.reweight
    _SUPERQUAIL = {k: v for k, v in (("alpha", args.superquail_alpha), ("beta", args.superquail_beta)) if v is not None}
    _RAP = {k: v for k, v in (("rows", args.rap_rows), ("device", args.rap_device)) if v is not None}
    logging.basicConfig(level=logging.ERROR)  # every run is seeded on purpose: no per-run warning
    lines = ["| dataset | method | eps | Sprint-2 score | TVD 1-way | TVD 2-way | TVD 3-way | "
             "encoded TVD 1-way / 2-way / 3-way | mixed-marginal error | "
             "linear-threshold error | correlation error | accuracy (synthetic-trained; real-trained) | "
             "macro F1 (synthetic-trained; real-trained) | largest FNR gap between groups | "
             "FNR gap of the seed means | wall s | peak MB |", "|---" * 17 + "|"]
    aim_note = ("AIM: uncapped (private-pgm's reference settings)" if args.aim_cap is None else
                f"AIM: selection capped at {args.aim_cap:g} s, then one last round (below the reference settings)")
    if "aim" in args.methods:
        print(aim_note, file=sys.stderr, flush=True)
    print("\n".join(lines), flush=True)
    ctx = multiprocessing.get_context("fork")
    for name in args.datasets:
        _DATA = sprint2(args.sprint2_rows) if name == "sprint2" else DATASETS[name]()
        if args.sensitive:
            _DATA.sensitive = args.sensitive
        evaluator = Evaluator(parse_schema(_DATA.params(1.0)), _DATA.real,
                              EvaluationOptions(group_columns=_DATA.groups, target=_DATA.target,
                                                sensitive=_DATA.sensitive if _DATA.target else None))
        encoded = EncodedScorer(_DATA, evaluator.workload)
        for variant in args.methods:
            for eps in args.eps:
                rows, fnrs = [], []
                for seed in range(args.first_seed, args.first_seed + args.seeds):
                    with ctx.Pool(1) as pool:
                        table, seconds, peak = pool.apply(_one_run, ((variant, eps, seed, args.aim_cap),))
                    run = next(iter(evaluator.evaluate(table)["runs"].values()))
                    u = run.get("utility", {})
                    rows.append([run.get("sprint2_score", np.nan)] + [run["tvd"][k]["mean"] for k in
                                                                      ("1-way", "2-way", "3-way")]
                                + encoded.tvds(table)
                                + [run.get(k, {}).get("mean", np.nan) for k in ("mixed_marginals",
                                                                                "linear_thresholds", "correlation")]
                                + [u.get(side, {}).get(k, np.nan) for k in ("accuracy", "macro_f1")
                                   for side in ("trained_on_synthetic", "trained_on_real")]
                                + [_fnr_gap(u.get("trained_on_synthetic", {})), seconds, peak])
                    fnrs.append(_fnrs(u.get("trained_on_synthetic", {})))
                m = np.mean(rows, axis=0)
                shown = "—" if variant in CEILING else f"{eps:g}"  # the ceiling spends no budget
                line = (f"| {name} | {variant} | {shown} | {m[0]:.1f} | {m[1]:.4f} | {m[2]:.4f} | {m[3]:.4f} | "
                        f"{m[4]:.4f} / {m[5]:.4f} / {m[6]:.4f} | "
                        f"{m[7]:.4f} | {m[8]:.4f} | {m[9]:.4f} | {m[10]:.3f}; {m[11]:.3f} | {m[12]:.3f}; {m[13]:.3f} | "
                        f"{m[14]:.3f} | {_gap_of_means(fnrs):.3f} | {m[15]:.1f} | {m[16]:.0f} |")
                lines.append(line)
                print(line, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(("\n".join([aim_note, ""]) + "\n" if "aim" in args.methods else "") + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
