"""The headline figures of an SDNist report (NIST's evaluator, ``python -m sdnist.report``), read from the
``report.json`` it writes beside ``report.html``: for bench/sdnist_report.py and ``dpsyn report --sdnist``.

SDNist compares a deidentified file with the real one, so its figures are not differentially private.
"""
from __future__ import annotations

import json
from pathlib import Path

from dpsyn.dataloader.reading import DataError

INCONSISTENCY_GROUPS = ("Age", "Work", "Housing")


def report_json(path: str | Path) -> Path:
    """``path`` itself where it is a file, else the report.json in that folder (DataError where there is none)."""
    path = Path(path)
    found = path / "report.json" if path.is_dir() else path
    if not found.is_file():
        raise DataError(f"--sdnist {path}: no SDNist report.json there")
    return found


def summary(path: str | Path) -> dict:
    """k-marginal score and the real subsample (% of the target) it equals, pMSE, unique real records reproduced
    (count and % of the target), inconsistent records per SDNist group, the target's name and the report's
    folder; DataError for a file that is not an SDNist report."""
    found = report_json(path)
    try:
        report = json.loads(found.read_text())
        k = report["k_marginal"]["k_marginal_synopsys"]
        matches = report["unique_exact_matches"]
        return {"target": report["data_description"]["target"]["filename"],
                "k_marginal": k["k_marginal_score"], "subsample": k["sub_sampling_equivalent"],
                "pmse": report["propensity mean square error"]["pmse_score"],
                "matches": matches["records matched in target data"],
                "matches_pct": matches["percent records matched in target data"],
                "inconsistent": {g["Inconsistency Group"]: g["Number of Records Inconsistent"]
                                 for g in report["inconsistencies"]["summary"]},
                "folder": str(found.parent)}
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"--sdnist {found}: not an SDNist 2.4 report ({type(exc).__name__}: {exc})") from None


def cells(s: dict) -> list[str]:
    """A summary's figures as table cells: k-marginal score, subsample equivalent, pMSE, unique exact matches,
    inconsistent records (summed over SDNist's groups, then per group)."""
    inconsistent = s["inconsistent"]
    groups = " / ".join(str(inconsistent.get(g, 0)) for g in INCONSISTENCY_GROUPS)
    return [str(s["k_marginal"]), str(s["subsample"]), f"{s['pmse']:.4f}", f"{s['matches']} ({s['matches_pct']:.2f} %)",
            f"{sum(inconsistent.values())} ({groups})"]
