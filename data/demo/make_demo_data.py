"""Rebuild the bundled demo data and ../../parameters.json from ../shared/data/nist_crc_acs_excerpts.

private.csv = national2018 + national2019 stacked with a YEAR column (the table to protect);
public.csv  = ma2018, ma2019, tx2018, tx2019 stacked the same way (other PUMAs, like
              Sprint 2's public file, which came from other states).

The schema comes from the data dictionary and public knowledge, never from the
private file: categories and bounds from data_dictionary.json; the release's PUMAs are
the dictionary's PUMAs minus the public states' ones (MA 25-, TX 48-); INDP's codes are
those seen in the public files (the dictionary lists no codes), so a private row whose
industry code never occurs in the public states is outside the schema.

    python data/demo/make_demo_data.py [--source ../shared/data/nist_crc_acs_excerpts]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
COLUMNS = ["PUMA", "YEAR", "AGEP", "SEX", "MSP", "HISP", "RAC1P", "NOC", "NPF", "HOUSING_TYPE", "OWN_RENT",
           "DENSITY", "INDP", "INDP_CAT", "EDU", "PINCP", "PINCP_DECILE", "POVPIP", "DVET", "DREM", "DPHY",
           "DEYE", "DEAR", "PWGTP", "WGTP"]
YEARS = (2018, 2019)
EPSILONS = (0.1, 1.0, 10.0)
DELTA = 1e-10          # below 1/n^2 for any table of up to 100,000 rows
MAX_RECORDS = 100_000


def stack(source: Path, prefix: str) -> pd.DataFrame:
    frames = [pd.read_csv(source / f"{prefix}{year}.csv", dtype=str, keep_default_na=False).assign(YEAR=str(year))
              for year in YEARS]
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def codes(entry: dict) -> list[int]:
    return sorted(int(k) for k in entry["values"] if k.isdigit())


def build_schema(dictionary: dict, public: pd.DataFrame) -> dict:
    d = dictionary
    public_pumas = set(public["PUMA"])
    cat = lambda name, null=False: {"dtype": "int", "values": codes(d[name]), **({"null": "N"} if null else {})}
    rng = lambda name, dtype="int", **kw: {"dtype": dtype, "min": d[name]["values"]["min"],
                                           "max": d[name]["values"]["max"], **kw}
    indp = sorted(int(v) for v in set(public["INDP"]) if v != "N")
    return {
        "PUMA": {"dtype": "str", "values": [p for p in d["PUMA"]["values"] if p not in public_pumas]},
        "YEAR": {"dtype": "int", "values": list(YEARS)},
        "AGEP": rng("AGEP"),
        "SEX": cat("SEX"),
        "MSP": cat("MSP", null=True),
        "HISP": cat("HISP"),
        "RAC1P": cat("RAC1P"),
        "NOC": {"dtype": "int", "min": 0, "max": d["NOC"]["values"]["max"], "null": "N"},  # '0' plus 1..19
        "NPF": rng("NPF", null="N"),
        "HOUSING_TYPE": cat("HOUSING_TYPE"),
        "OWN_RENT": cat("OWN_RENT"),
        "DENSITY": rng("DENSITY", dtype="float", precision=1, constant_within=["PUMA"]),  # a PUMA's density
        "INDP": {"dtype": "int", "values": indp, "null": "N"},
        "INDP_CAT": cat("INDP_CAT", null=True),
        "EDU": cat("EDU", null=True),
        "PINCP": rng("PINCP", null="N"),        # whole dollars
        "PINCP_DECILE": cat("PINCP_DECILE", null=True),
        "POVPIP": {"dtype": "int", "min": 0, "max": 501, "null": "N"},  # 501 = above 5 x poverty line
        "DVET": cat("DVET", null=True),
        "DREM": cat("DREM", null=True),
        "DPHY": cat("DPHY", null=True),
        "DEYE": cat("DEYE"),
        "DEAR": cat("DEAR"),
        "PWGTP": rng("PWGTP"),
        "WGTP": {"dtype": "int", "min": 0, "max": d["WGTP"]["values"]["max"]},  # 0 = group quarters
    }


# edit rules the data dictionary supports: the age rules, and the housing and family rules NIST's SDNist checks
CONSTRAINTS = [
    "AGEP < 15 <=> MSP = N",
    "AGEP < 15 <=> PINCP = N",
    "AGEP < 15 <=> PINCP_DECILE = N",
    "AGEP < 16 => INDP = N",
    "AGEP < 16 => INDP_CAT = N",
    "INDP = N <=> INDP_CAT = N",
    "AGEP < 3 <=> EDU = N",
    "AGEP < 5 <=> DREM = N",
    "AGEP < 5 <=> DPHY = N",
    "AGEP < 15 => DVET = N",
    "AGEP < 15 => EDU != 12",
    "AGEP < 5 => EDU in {N, 1, 2, 3, 4}",
    "HOUSING_TYPE != 1 <=> OWN_RENT = 0",
    "HOUSING_TYPE != 1 <=> NOC = N",
    "HOUSING_TYPE != 1 => NPF = N",
    "NOC != N and NPF != N => NOC < NPF",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared/data/nist_crc_acs_excerpts")
    args = parser.parse_args()
    public = stack(args.source, "ma")
    public = pd.concat([public, stack(args.source, "tx")], ignore_index=True)
    private = stack(args.source, "national")
    dictionary = json.loads((args.source / "data_dictionary.json").read_text())
    params = {"runs": [{"epsilon": e, "delta": DELTA, "max_records": MAX_RECORDS, "max_records_per_individual": 1}
                       for e in EPSILONS],
              "schema": build_schema(dictionary, public), "constraints": CONSTRAINTS}
    (ROOT / "parameters.json").write_text(json.dumps(params, indent=2) + "\n")
    private.to_csv(HERE / "private.csv", index=False)
    public.to_csv(HERE / "public.csv", index=False)
    print(f"wrote parameters.json, {HERE / 'private.csv'} ({len(private)} rows), "
          f"{HERE / 'public.csv'} ({len(public)} rows)")


if __name__ == "__main__":
    main()
