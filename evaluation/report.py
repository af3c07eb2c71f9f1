"""The HTML evaluation report: numbers and matplotlib plots comparing methods with the real table.

Evaluation only (reads the real data; nothing in it is DP; the page says so first).  One
self-contained HTML file, the PNG plots embedded, written atomically.  Its first screen: the
"not private" banner, the inputs and the date, and per method and run the release's settings
and privacy spent as its ledger records them (ε, δ, θ, ρ budget and spent, the plan's nodes);
then the scores with one sentence on what each means.  Plots:

* error against epsilon, one line per method (a table instead where there is one epsilon):
  Sprint-2 score and mean 1/2/3-way TVD;
* per-column distributions, real against each epsilon of the first method: categories as
  side-by-side bars (a column of many categories: its most common ones and "other"), numeric
  columns as bars on their bins' edges;
* per method, a heat map of 2-way TVD for every column pair at each epsilon;
* with a target and a sensitive column: per-group accuracy, false-negative and
  false-positive rate of the real-trained and synthetic-trained models.
"""
from __future__ import annotations

import base64
import datetime
import html
import io
import json
import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpsyn.dataloader.writing import StagedFiles  # noqa: E402
from dpsyn.dataloader.schema import Schema  # noqa: E402
from dpsyn.evaluation.metrics import marginal_tvd  # noqa: E402
from dpsyn.evaluation.scoring import WARNING, EvaluationOptions, Evaluator, individuals_line  # noqa: E402
from dpsyn.evaluation.sdnist import cells as sdnist_cells  # noqa: E402
from dpsyn.lib.records.marginals import count_marginal  # noqa: E402

MAX_TICK_LABELS = 12  # categories drawn one by one; a column with more shows its most common ones and "other"
METRICS = (
    ("Sprint-2 score", "NIST Sprint 2's score, 0 to 1000: per group (PUMA × YEAR, say), how close the real and "
     "the synthetic shares of the scored column pairs are (1000 less the mean L1 distance × 500), a group whose row "
     "count is 250 or more off counting as entirely wrong; higher is better."),
    ("TVD k-way", "the mean total variation distance (0 to 1) between the real and the synthetic shares of the "
     "cells of k-way marginals of the non-group columns (every 1- and 2-way, 100 random 3-way); lower is better."),
    ("accuracy, macro F1", "a logistic regression trained on the table named and tested on held-out real rows: "
     "how well what the synthetic data teaches a classifier transfers to the real data."),
    ("per-column distributions", "each column's shares in the real table and in each synthetic run, category by "
     "category or bin by bin."),
    ("2-way TVD heat map", "the total variation distance of every pair of columns' joint shares: where the "
     "synthetic data keeps or loses the association between two columns."),
)


def write_report(output: Path, schema: Schema, real: pd.DataFrame, methods: dict[str, pd.DataFrame],
                 options: EvaluationOptions, inputs: dict[str, str] | None = None,
                 ledgers: dict[str, dict[str, dict]] | None = None, sdnist: dict[str, dict] | None = None) -> None:
    """Write the report for ``methods`` (label -> synthetic table or submission) to ``output``.
    ``inputs``: what to name as the inputs (e.g. parameters, real, each synthetic file); ``ledgers``:
    per method, its runs' ledger JSONs by epsilon (``ledgers_beside``); ``sdnist``: by label, SDNist reports'
    figures (evaluation/sdnist.py ``summary``), shown with a link to each."""
    evaluator = Evaluator(schema, real, options)
    encoded = {label: evaluator.encode_runs(table) for label, table in methods.items()}
    results = {label: evaluator.evaluate_runs(runs) for label, runs in encoded.items()}
    coders, real_codes, others = evaluator.coders, evaluator.real_codes, evaluator.others
    codes = {label: {eps: c for eps, (_, c, _) in runs.items()} for label, runs in encoded.items()}
    first = next(iter(methods))
    several = any(len(_numeric_runs(r)) > 1 for r in results.values())
    sections = ([("Error against epsilon", _png(_error_plot(results)))] if several else []) + [
        (f"Per-column distributions: real and {first}", _png(_distributions(coders, others, real_codes,
                                                                             codes[first])))]
    for label, runs in codes.items():
        sections.append((f"2-way TVD per column pair: {label}", _png(_heat_maps(coders, others, real_codes, runs))))
    if options.target and options.sensitive:
        for label, result in results.items():
            sections.append((f"Per-group utility ({options.target} by {options.sensitive}): {label}",
                             _png(_group_utility(result))))
    with StagedFiles(output) as staged:
        staged.path(output).write_text(_page(results, sections, inputs or {}, ledgers or {},
                                             _sdnist(sdnist or {}, output)))
        staged.commit()


def _sdnist(reports: dict[str, dict], output: Path) -> str:
    """A table of SDNist's figures per report, each linked to its report.html (relative to the page)."""
    if not reports:
        return ""
    rows = []
    for label, r in reports.items():
        html_file = Path(r["folder"]) / "report.html"
        try:
            link = os.path.relpath(html_file, Path(output).resolve().parent)
        except ValueError:  # another drive
            link = str(html_file)
        row = [f'<a href="{html.escape(link)}">{html.escape(label)}</a>', html.escape(str(r["target"]))] + [
            html.escape(c) for c in sdnist_cells(r)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    head = ["SDNist report", "target", "k-marginal score", "subsample equivalent (%)", "pMSE", "unique exact matches",
            "inconsistent records (age / work / housing)"]
    return ("<h2>NIST's SDNist</h2>\n<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>\n"
            + "\n".join(rows) + "</table>\n")


def ledgers_beside(path: Path) -> dict[str, dict]:
    """The ledger JSONs a release wrote beside submission ``path`` (NAME.ledger.eps{ε}.json), by epsilon as
    written in their names; {} where there are none."""
    out = {}
    for ledger in sorted(Path(path).parent.glob(f"{Path(path).stem}.ledger.eps*.json")):
        try:
            out[ledger.name.rsplit(".eps", 1)[1][:-len(".json")]] = json.loads(ledger.read_text())
        except (OSError, ValueError):
            continue
    return out


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _numeric_runs(result: dict) -> list[tuple[float, dict]]:
    runs = []
    for eps, run in result["runs"].items():
        try:
            runs.append((float(eps), run))
        except ValueError:  # a table without epsilon runs has no place on the epsilon axis
            continue
    return sorted(runs, key=lambda r: r[0])


def _error_plot(results: dict[str, dict]):
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    panels = [("Sprint-2 score (higher is better)", lambda r: r.get("sprint2_score"))] + [
        (f"mean {k} TVD (lower is better)", lambda r, k=k: r["tvd"].get(k, {}).get("mean")) for k in
        ("1-way", "2-way", "3-way")]
    for ax, (title, get) in zip(axes, panels):
        for label, result in results.items():
            points = [(eps, get(run)) for eps, run in _numeric_runs(result) if get(run) is not None]
            if points:
                ax.plot(*zip(*points), marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _distributions(coders, others, real_codes, runs: dict[str, np.ndarray]):
    ncols = 3
    nrows = math.ceil(len(others) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(16, 3.0 * nrows), squeeze=False)
    for ax, j in zip(axes.ravel(), others):
        coder = coders[j]
        shares = {"real": count_marginal(real_codes[:, j], (coder.size,)) / max(len(real_codes), 1)}
        shares.update({f"eps {eps}": count_marginal(codes[:, j], (coder.size,)) / max(len(codes), 1)
                       for eps, codes in runs.items()})
        title = coder.column.name
        if coder.edges is not None:
            _bins(ax, coder, shares)
            null = len(coder.edges) - 1
            if shares["real"][null] > 0:
                title += f" (null: real {shares['real'][null]:.1%})"
        else:
            _categories(ax, coder, shares)
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    for ax in axes.ravel()[len(others):]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _categories(ax, coder, shares: dict[str, np.ndarray]) -> None:
    """Side-by-side bars per category; past MAX_TICK_LABELS, the most common in the real table and "other"."""
    used = np.flatnonzero(np.any([p > 0 for p in shares.values()], axis=0))
    labels = [str(coder.labels[k]) for k in used]
    values = {name: p[used] for name, p in shares.items()}
    if len(used) > MAX_TICK_LABELS:
        top = np.argsort(-values["real"], kind="stable")[:MAX_TICK_LABELS - 1]
        rest = np.setdiff1d(np.arange(len(used)), top)
        labels = [labels[k] for k in top] + [f"other ({len(rest)})"]
        values = {name: np.append(p[top], p[rest].sum()) for name, p in values.items()}
    width = 0.8 / len(values)
    x = np.arange(len(labels))
    for i, (name, p) in enumerate(values.items()):
        ax.bar(x + (i - (len(values) - 1) / 2) * width, p, width, label=name, color="0.6" if name == "real" else None)
    ax.set_xticks(x, [_short(label) for label in labels], rotation=45, ha="right", fontsize=7)


def _bins(ax, coder, shares: dict[str, np.ndarray]) -> None:
    """A numeric column bin by bin, each bin labelled by its edges: the real shares as bars, the runs as steps."""
    edges = np.asarray(coder.edges, dtype=np.float64)
    n = len(edges) - 1
    x = np.arange(n + 1) - 0.5
    ax.bar(np.arange(n), shares["real"][:n], 1.0, color="0.75", label="real")
    for name, p in shares.items():
        if name != "real":
            ax.stairs(p[:n], x, label=name, linewidth=1.2)
    step = max(1, math.ceil((n + 1) / MAX_TICK_LABELS))
    ticks = list(range(0, n + 1, step))
    ax.set_xticks(np.asarray(ticks) - 0.5, [_edge(edges[k]) for k in ticks], rotation=45, ha="right", fontsize=7)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_xlabel("bin edges", fontsize=7)


def _edge(value: float) -> str:
    """A bin edge for a tick label: whole numbers without decimals, large ones with thousands separators."""
    if not np.isfinite(value):
        return "−∞" if value < 0 else "∞"
    return f"{value:,.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"


def _short(label: str) -> str:
    return label if len(label) <= 12 else label[:11] + "…"


def _heat_maps(coders, others, real_codes, runs: dict[str, np.ndarray]):
    names = [coders[j].column.name for j in others]
    sizes = tuple(c.size for c in coders)
    fig, axes = plt.subplots(1, len(runs), figsize=(6.2 * len(runs), 5.6), squeeze=False)
    for ax, (eps, codes) in zip(axes[0], runs.items()):
        matrix = np.full((len(others), len(others)), np.nan)
        for a in range(len(others)):
            for b in range(a + 1, len(others)):
                matrix[a, b] = matrix[b, a] = marginal_tvd(real_codes, codes, sizes, (others[a], others[b]))
        image = ax.imshow(matrix, cmap="viridis", vmin=0, vmax=max(np.nanmax(matrix), 1e-9))
        ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_title(f"epsilon {eps}: mean {np.nanmean(matrix):.3f}", fontsize=10)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def _group_utility(result: dict):
    runs = [(eps, run["utility"]) for eps, run in result["runs"].items()]
    keys = ("accuracy", "false_negative_rate", "false_positive_rate")
    fig, axes = plt.subplots(1, 3, figsize=(16, 3.8))
    groups = list(runs[0][1]["trained_on_real"]["by_group"]["groups"])
    series = [("trained on real", runs[0][1]["trained_on_real"])] + [
        (f"synthetic, eps {eps}", u["trained_on_synthetic"]) for eps, u in runs]
    width = 0.8 / len(series)
    for ax, key in zip(axes, keys):
        for i, (label, part) in enumerate(series):
            values = [part["by_group"]["groups"][g][key] for g in groups]
            ax.bar(np.arange(len(groups)) + i * width, [np.nan if v is None else v for v in values], width,
                   label=label)
        rows = runs[0][1]["trained_on_real"]["by_group"]["groups"]
        ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2,
                      [f"{_short(g)} (n={rows[g]['rows']})" for g in groups], rotation=45, ha="right", fontsize=8)
        ax.set_title(key.replace("_", " "), fontsize=10)
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _page(results: dict[str, dict], sections: list[tuple[str, str]], inputs: dict[str, str],
          ledgers: dict[str, dict[str, dict]], sdnist: str = "") -> str:
    rows = []
    for label, result in results.items():
        for eps, run in result["runs"].items():
            tvd = run["tvd"]
            cells = [label, eps, run["synthetic_rows"], _fmt(run.get("sprint2_score"), 1)] + [
                _fmt(tvd.get(k, {}).get("mean"), 4) for k in ("1-way", "2-way", "3-way")]
            if "utility" in run:
                u = run["utility"]
                cells += [_fmt(u["trained_on_real"]["accuracy"], 3), _fmt(u["trained_on_synthetic"]["accuracy"], 3),
                          _fmt(u["trained_on_synthetic"]["macro_f1"], 3)]
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    head = ["method", "epsilon", "rows", "Sprint-2 score", "TVD 1-way", "TVD 2-way", "TVD 3-way"]
    if any("utility" in r for res in results.values() for r in res["runs"].values()):
        head += ["accuracy (real-trained)", "accuracy (synthetic-trained)", "macro-F1 (synthetic-trained)"]
    people = [f"<li>{html.escape(f'{label}, epsilon {eps}: ' + individuals_line(run['individuals']))}</li>"
              for label, result in results.items() for eps, run in result["runs"].items() if "individuals" in run]
    individuals = f"<h2>Individuals (rows linked by id)</h2>\n<ul>{''.join(people)}</ul>" if people else ""
    figures = "\n".join(f"<h2>{html.escape(title)}</h2>\n<img alt=\"{html.escape(title)}\" "
                        f"src=\"data:image/png;base64,{data}\">" for title, data in sections)
    metrics = "".join(f"<li><b>{html.escape(name)}</b>: {html.escape(text)}</li>" for name, text in METRICS)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Synthetic data evaluation</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}} img{{max-width:100%}}
table{{border-collapse:collapse;margin-bottom:1em}} td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
.warning{{background:#fff3cd;border:1px solid #e0b000;padding:0.8em;font-weight:bold}}</style></head>
<body><h1>Synthetic data evaluation</h1>
<p class="warning">{html.escape(WARNING)}.</p>
{_inputs(inputs)}
{_releases(ledgers)}
<h2>Scores</h2>
<table><tr>{"".join(f"<th>{html.escape(h)}</th>" for h in head)}</tr>
{chr(10).join(rows)}</table>
<ul>{metrics}</ul>
{individuals}
{sdnist}
{figures}
</body></html>
"""


def _inputs(inputs: dict[str, str]) -> str:
    """The inputs and the date, as a small table."""
    rows = [("written", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"))] + list(inputs.items())
    return "<table>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                               for k, v in rows) + "</table>"


def _releases(ledgers: dict[str, dict[str, dict]]) -> str:
    """Per method and run: the settings and privacy its ledger records, and its plan's nodes."""
    if not ledgers:
        return "<p>No ledgers were found beside the synthetic files: their privacy cost is not shown.</p>"
    head = ["method", "epsilon", "delta", "theta", "rho budget", "rho spent", "epsilon spent", "method run",
            "plan (share of rho)", "charges"]
    rows = []
    for label, runs in ledgers.items():
        for eps, led in runs.items():
            plan = led.get("plan", {})
            nodes = plan.get("nodes", [])
            method = next((n.get("note", "").split(",")[0] for n in nodes if n.get("name") == "method"), "")
            cells = [label, eps, f"{led.get('delta', float('nan')):.3g}", plan.get("theta", ""),
                     f"{led.get('rho_budget', float('nan')):.4g}", f"{led.get('rho_spent', float('nan')):.4g}",
                     f"{led.get('epsilon_spent', float('nan')):.4g}", method,
                     "; ".join(f"{n['name']} {100 * n['share']:.3g}%" for n in nodes), len(led.get("charges", []))]
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return (f"<h2>Releases (from their ledgers)</h2><table><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>"
            + "".join(rows) + "</table>")


def _fmt(x, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"
