"""The release's last code-space stage: group-level columns, derived columns, edit rules.

Post-processing only: it reads the method's synthetic codes and its noisy measurements
(never private data), so it costs no budget.  In order:

1. each group-level column gets one code per cell of its ``within`` columns: the noisy
   marginal's largest cell where the method measured one over those columns and this one
   (the group × column marginals of dpsyn's two-way regime), otherwise a code drawn from the
   synthetic records of that cell (columns in ``fixed`` already hold their value);
2. derived columns become their parent's function, null-linked columns follow their parent's
   null (lib/records/constraints.derive);
3. every record leaves every forbidden box (lib/records/constraints.repair), and 2-3 repeat while
   repair changed something that a derivation reads; a record repair could not take out of every box while
   keeping its group columns (its group's cell is one the rules forbid whatever the rest holds) is left out.
"""
from __future__ import annotations

import logging

import numpy as np

from dpsyn.dataloader.structure import Structure
from dpsyn.lib.records.constraints import derive, repair
from dpsyn.lib.records.domain import Domain
from dpsyn.lib.records.marginals import cell_index
from dpsyn.lib.privacy.private_table import Measurement
from dpsyn.lib.privacy.queries import Marginal
from dpsyn.lib.tuning import T

log = logging.getLogger(__name__)


def finish(codes: np.ndarray, domain: Domain, group_columns: tuple[str, ...], structure: Structure, measurements,
           rng: np.random.Generator, fixed: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """(codes that meet ``structure``, which of the input rows they are) (see the module doc): its boxes,
    derivations, null links and group-level columns, those in ``fixed`` left as they are; ``measurements``: the
    run's released measurements.  Rows of group cells the rules forbid whatever else they hold are left out (the
    log says how many)."""
    boxes, derivations, null_links, group_level = (structure.boxes, structure.derivations, structure.null_links,
                                                   structure.group_level)
    out = np.array(codes, dtype=np.int32, copy=True)
    for column, within in group_level:
        if column not in fixed:
            _one_code_per_cell(out, domain, column, within, measurements, rng)
    keep = tuple(domain.indices(group_columns)) + tuple(domain.index(c) for c, _ in group_level)
    for _ in range(T.structure_rounds):
        before = out.copy()
        out = derive(out, derivations, null_links, domain.sizes, rng)
        out = repair(out, boxes, rng, keep=keep)
        if np.array_equal(before, out):
            break
    rows = ~boxes.forbidden(out) if boxes else np.ones(len(out), dtype=bool)
    if not rows.all():
        broken = {rule: n for rule, n in boxes.counts(out[~rows]).items() if n}
        (log.warning if not rows.any() else log.info)(
            "structure: %d synthetic rows left out%s: their group columns meet no record the edit rules allow (%s)",
            int((~rows).sum()), ", every row of the release" if not rows.any() else "", ", ".join(sorted(broken)))
        out = out[rows]
    return out, rows


def _one_code_per_cell(codes: np.ndarray, domain: Domain, column: str, within: tuple[str, ...], measurements,
                       rng: np.random.Generator) -> None:
    j = domain.index(column)
    cells = cell_index(codes[:, domain.indices(within)], domain.shape(within))
    n_cells, size = domain.size(within), domain.sizes[j]
    noisy = _measured(measurements, within, column, domain)
    if noisy is not None:
        choice = noisy.reshape(n_cells, size).argmax(axis=1)
    else:
        choice = np.zeros(n_cells, dtype=np.int64)
        for cell in np.unique(cells):
            members = codes[cells == cell, j]
            choice[cell] = members[rng.integers(0, len(members))]
    codes[:, j] = choice[cells]


def _measured(measurements, within: tuple[str, ...], column: str, domain: Domain) -> np.ndarray | None:
    """The noisy marginal over ``within`` × ``column`` summed from a measured marginal whose columns
    are ``within``, ``column`` and possibly other group columns, or None."""
    for m in measurements:
        if not isinstance(m, Measurement) or not isinstance(m.query, Marginal):
            continue
        attrs = m.attrs
        if column not in attrs or not set(within) <= set(attrs) or len(attrs) < len(within) + 1:
            continue
        others = [a for a in attrs if a not in within and a != column]
        if any(domain.is_numeric(a) for a in others):
            continue
        values = np.asarray(m.noisy, dtype=np.float64).reshape(domain.shape(attrs))
        values = values.sum(axis=tuple(attrs.index(a) for a in others))
        kept = [a for a in attrs if a not in others]
        return np.moveaxis(values, [kept.index(a) for a in within + (column,)], range(len(within) + 1))
    return None
