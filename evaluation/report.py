"""The HTML evaluation report: numbers and matplotlib plots comparing methods with the real table.

Evaluation only (reads the real data; nothing in it is DP; the page says so).  One
self-contained HTML file, the PNG plots embedded, written atomically.  Plots:

* error against epsilon, one line per method: Sprint-2 score and mean 1/2/3-way TVD;
* per-column distributions, real against each epsilon of the first method;
* per method, a heat map of 2-way TVD for every column pair at each epsilon;
* with a target and a sensitive column: per-group accuracy, false-negative and
  false-positive rate of the real-trained and synthetic-trained models.
"""
from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dataloader.writing import StagedFiles  # noqa: E402
from dataloader.schema import Schema  # noqa: E402
from evaluation.metrics import marginal_tvd  # noqa: E402
from evaluation.scoring import WARNING, EvaluationOptions, Evaluator  # noqa: E402
from lib.marginals import count_marginal  # noqa: E402

MAX_TICK_LABELS = 12


def write_report(output: Path, schema: Schema, real: pd.DataFrame, methods: dict[str, pd.DataFrame],
                 options: EvaluationOptions) -> None:
    """Write the report for ``methods`` (label -> synthetic table or submission) to ``output``."""
    evaluator = Evaluator(schema, real, options)
    encoded = {label: evaluator.encode_runs(table) for label, table in methods.items()}
    results = {label: evaluator.evaluate_runs(runs) for label, runs in encoded.items()}
    coders, real_codes, others = evaluator.coders, evaluator.real_codes, evaluator.others
    codes = {label: {eps: c for eps, (_, c, _) in runs.items()} for label, runs in encoded.items()}
    first = next(iter(methods))
    sections = [("Error against epsilon", _png(_error_plot(results))),
                (f"Per-column distributions: real and {first}",
                 _png(_distributions(coders, others, real_codes, codes[first])))]
    for label, runs in codes.items():
        sections.append((f"2-way TVD per column pair: {label}", _png(_heat_maps(coders, others, real_codes, runs))))
    if options.target and options.sensitive:
        for label, result in results.items():
            sections.append((f"Per-group utility ({options.target} by {options.sensitive}): {label}",
                             _png(_group_utility(result))))
    with StagedFiles(output) as staged:
        staged.path(output).write_text(_page(results, sections))
        staged.commit()


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
    ncols = 4
    nrows = math.ceil(len(others) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(16, 2.6 * nrows), squeeze=False)
    for ax, j in zip(axes.ravel(), others):
        coder = coders[j]
        shares = {"real": count_marginal(real_codes[:, j], (coder.size,)) / max(len(real_codes), 1)}
        shares.update({f"eps {eps}": count_marginal(codes[:, j], (coder.size,)) / max(len(codes), 1)
                       for eps, codes in runs.items()})
        used = np.flatnonzero(np.any([p > 0 for p in shares.values()], axis=0))  # empty null/outside bins hidden
        x = np.arange(len(used))
        ax.bar(x, shares.pop("real")[used], color="0.75", label="real")
        for label, p in shares.items():
            ax.plot(x, p[used], marker=".", markersize=4, linewidth=1, label=label)
        ax.set_title(coder.column.name, fontsize=9)
        if len(used) <= MAX_TICK_LABELS:
            ax.set_xticks(x, [_short(coder.labels[k]) for k in used], rotation=45, ha="right", fontsize=7)
        else:
            ax.set_xticks([])
            ax.set_xlabel(f"{len(used)} bins", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    for ax in axes.ravel()[len(others):]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


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


def _page(results: dict[str, dict], sections: list[tuple[str, str]]) -> str:
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
    figures = "\n".join(f"<h2>{html.escape(title)}</h2>\n<img alt=\"{html.escape(title)}\" "
                        f"src=\"data:image/png;base64,{data}\">" for title, data in sections)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Synthetic data evaluation</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}} img{{max-width:100%}}
table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
.warning{{background:#fff3cd;border:1px solid #e0b000;padding:0.8em;font-weight:bold}}</style></head>
<body><h1>Synthetic data evaluation</h1>
<p class="warning">{html.escape(WARNING)}.</p>
<table><tr>{"".join(f"<th>{html.escape(h)}</th>" for h in head)}</tr>
{chr(10).join(rows)}</table>
{figures}
</body></html>
"""


def _fmt(x, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"
