"""What a public file with individual ids suggests for a parameters draft: the clock, θ and the ``individual`` section.

Public material only (the draft never sees private data).  Among individuals with two rows or more:

* the clock: a categorical column of whole numbers whose value never repeats within an individual (the one
  with the fewest values where several do: years rather than a running number);
* ``max_records_per_individual``: the most rows one individual has;
* ``stable``: columns that hold one value within every individual;
* ``advances``: numeric columns that move by exactly the clock's difference between every two consecutive
  rows of an individual (AGE with YEAR);
* ``follow``: up to ``FOLLOWED`` other columns that keep their value from one row to the next most often
  (at least half the time: a column that changes at random is better left to the per-year synthesis).

Every proposal is a note for the curator to review: a public sample can miss a change the private data has.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

FOLLOWED = 3  # at most this many followed columns proposed


def propose(public: pd.DataFrame, id_column: str,
            schema: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """(the draft's top-level entries to add, the lines to review) from ``public`` (text) grouped by ``id_column``."""
    ids = public[id_column].astype(str)
    repeated = public[ids.duplicated(keep=False).to_numpy()]
    if repeated.empty:
        return {}, [f"{id_column}: individual ids, each on one row in the public file (θ 1 kept)"]
    people = repeated[id_column].astype(str)
    rows = int(ids.value_counts().max())
    notes = [f"{id_column}: individual ids, not a schema column; max_records_per_individual {rows} is the most rows "
             f"one individual has in the public file: set it to the most the private file may have"]
    keyed = repeated.assign(_id=people)
    clocks = [c for c, e in schema.items() if "values" in e and e.get("dtype") == "int"
              and not keyed.duplicated(["_id", c]).any()]
    if not clocks:
        return {"max_records_per_individual": rows}, notes
    clock = min(clocks, key=lambda c: len(schema[c]["values"]))
    ordered = repeated.assign(_t=pd.to_numeric(repeated[clock]), _id=people).sort_values(["_id", "_t"])
    same = (ordered["_id"].to_numpy()[1:] == ordered["_id"].to_numpy()[:-1])
    others = [c for c in schema if c != clock]
    stable = [c for c in others if (ordered[c].to_numpy()[1:] == ordered[c].to_numpy()[:-1])[same].all()]
    step = np.diff(ordered["_t"].to_numpy())[same]
    advances = {}
    for c in others:
        if c in stable or "values" in schema[c]:
            continue
        values = pd.to_numeric(ordered[c], errors="coerce").to_numpy()
        moved = np.diff(values)[same]
        if np.isfinite(moved).all() and (moved == step).all():
            advances[c] = clock
    rest = [c for c in others if c not in stable and c not in advances]
    stays = {c: float((ordered[c].to_numpy()[1:] == ordered[c].to_numpy()[:-1])[same].mean()) for c in rest}
    follow = sorted((c for c in rest if stays[c] >= 0.5), key=lambda c: -stays[c])[:FOLLOWED]
    individual = {"stable": stable, "advances": advances, "follow": follow}
    notes.append(f"{clock}: no individual of the public file has two rows alike in it: proposed as "
                 f"distinct_per_individual and the clock that orders an individual's rows")
    notes.append(f"individual: stable {', '.join(stable) or 'none'} (one value within every individual of the "
                 f"public file); advancing {', '.join(advances) or 'none'} (moving by {clock}'s difference); "
                 f"followed {', '.join(f'{c} (stays {stays[c]:.0%})' for c in follow) or 'none'} (the columns "
                 f"that keep their value most often from one row to the next); check each against what the "
                 f"private data may do")
    return {"max_records_per_individual": rows, "distinct_per_individual": [clock], "individual": individual}, notes
