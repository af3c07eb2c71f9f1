"""Edit rules and derived columns in code space: forbidden boxes, their repair, derivations.

Post-processing only: everything here reads and rewrites synthetic codes (and public
mappings), never private data, so it costs no privacy budget.

A *box* is a set of forbidden records: a record is in it when its code in each of the
box's columns is one the box marks (``masks[k][code]``).  An edit rule "A ⇒ B" becomes
one box per atom of B (records meeting A but not that atom).  A box names the column
that repair changes to take a record out of it (``fix``).

* :func:`repair` moves every record out of every box: the fix column takes the value of
  a random valid record that agrees with the box on its other columns (a "donor"), or,
  failing one, a random value outside the box (after a few passes, the box's other columns take turns);
  records still forbidden then become copies of random valid records with their own ``keep`` codes (the
  boxes' public ``witness`` where none is valid).
* :func:`derive` makes each derived column a function of its parent (a public mapping,
  completed from the synthetic records' most common child per parent value) and each
  null-linked column null exactly when its parent is.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numba
import numpy as np

from dpsyn.lib.tuning import T



@dataclass(frozen=True)
class Box:
    """Records whose code in ``columns[k]`` is marked in ``masks[k]`` for every k; ``fix``: the
    column repair changes; ``label``: the rule it comes from."""

    columns: tuple[int, ...]
    masks: tuple[np.ndarray, ...]
    fix: int
    label: str

    def contains(self, codes: np.ndarray) -> np.ndarray:
        inside = np.ones(len(codes), dtype=bool)
        for col, mask in zip(self.columns, self.masks):
            inside &= mask[codes[:, col]]
        return inside

    def contains_except_fix(self, codes: np.ndarray) -> np.ndarray:
        inside = np.ones(len(codes), dtype=bool)
        for col, mask in zip(self.columns, self.masks):
            if col != self.fix:
                inside &= mask[codes[:, col]]
        return inside


@dataclass(frozen=True)
class Boxes:
    """A set of forbidden boxes, with a packed form for the GUM kernel; ``witness``, where known, one record in no
    box (public: found from the rules and the domain alone), repair's donor of last resort."""

    boxes: tuple[Box, ...] = ()
    witness: np.ndarray | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return bool(self.boxes)

    def forbidden(self, codes: np.ndarray) -> np.ndarray:
        """Boolean per record: in at least one box."""
        out = np.zeros(len(codes), dtype=bool)
        for box in self.boxes:
            out |= box.contains(codes)
        return out

    def counts(self, codes: np.ndarray) -> dict[str, int]:
        """Records in each rule's boxes, by rule label."""
        out: dict[str, int] = {}
        for box in self.boxes:
            out[box.label] = out.get(box.label, 0) + int(box.contains(codes).sum())
        return out

    def packed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(columns, per-box pointer into columns, masks flat, per-column pointer into masks)."""
        cols = np.array([c for b in self.boxes for c in b.columns], dtype=np.int64)
        box_ptr = np.cumsum([0] + [len(b.columns) for b in self.boxes]).astype(np.int64)
        flat = [m for b in self.boxes for m in b.masks]
        masks = np.concatenate(flat).astype(np.bool_) if flat else np.zeros(0, np.bool_)
        mask_ptr = np.cumsum([0] + [len(m) for m in flat])[:-1].astype(np.int64)
        return cols, box_ptr, masks, mask_ptr


NO_BOXES = Boxes()


@numba.njit(cache=True)
def record_forbidden(records, r, cols, box_ptr, masks, mask_ptr) -> bool:
    """Whether record ``r`` lies in any packed box (see ``Boxes.packed``)."""
    for b in range(len(box_ptr) - 1):
        inside = True
        for k in range(box_ptr[b], box_ptr[b + 1]):
            if not masks[mask_ptr[k] + records[r, cols[k]]]:
                inside = False
                break
        if inside:
            return True
    return False


def repair(codes: np.ndarray, boxes: Boxes, rng: np.random.Generator, keep: tuple[int, ...] = ()) -> np.ndarray:
    """A copy of ``codes`` with no record in any box (see the module doc); ``keep``: columns repair leaves as they
    were (group columns), a box mended through the column ``_mendable`` names (not where only kept columns decide
    it), a record copied whole taking a valid record of its own kept
    codes, and a record no valid record of its kept codes exists for returned still forbidden (the caller
    decides; stages/structure.finish leaves it out), every record where none passes.  Without ``keep``, raises
    ValueError when no record at all satisfies the rules."""
    out = np.array(codes, dtype=np.int32, copy=True)
    if not boxes or len(out) == 0:
        return out
    # where records are still forbidden after the passes on each box's own column, as many more passes in which the
    # box's other columns take turns: two rules whose fixes undo each other ("C = 0 => D = 0", "X < 5 => D = 9")
    # are met by changing X (only forbidden records change, so the first passes' work stays)
    turns = [[box] + [replace(box, fix=c) for c in others] for box, others in _mendable(boxes, keep)]
    passes = T.constraints_repair_passes
    for p in range(2 * passes):
        bad = boxes.forbidden(out)
        if not bad.any():
            return out
        valid = ~bad  # repairs change only forbidden rows, so these stay valid donors all pass
        for choices in turns:
            box = choices[0] if p < passes else choices[(p - passes + 1) % len(choices)]
            rows = np.flatnonzero(box.contains(out))
            if len(rows):
                out[rows, box.fix] = _fix_values(out, box, valid, rows, rng)
    bad = boxes.forbidden(out)
    if bad.any():
        valid = np.flatnonzero(~bad)
        columns = np.asarray(keep, dtype=np.intp)
        if not len(valid) and boxes.witness is not None:  # the public record in no box, kept columns kept
            kept = out[np.ix_(np.flatnonzero(bad), columns)]
            out[bad] = boxes.witness
            out[np.ix_(np.flatnonzero(bad), columns)] = kept
            bad = boxes.forbidden(out)
            valid = np.flatnonzero(~bad)
        if not bad.any():
            return out
        if not len(valid):
            if keep:  # no record of any kept cell here was mended: returned as they are, for the caller to leave out
                return out
            raise ValueError("the edit rules leave no record that satisfies all of them")
        _copy_valid(out, bad, valid, columns, rng)
    return out


def _copy_valid(out: np.ndarray, bad: np.ndarray, valid: np.ndarray, keep: np.ndarray,
                rng: np.random.Generator) -> None:
    """Each ``bad`` record of ``out`` becomes a copy of a random ``valid`` one with the same codes in ``keep``
    (any valid one where ``keep`` is empty); one whose kept codes no valid record shares stays as it is."""
    rows = np.flatnonzero(bad)
    if not len(keep):
        out[rows] = out[rng.choice(valid, size=len(rows))]
        return
    cells = np.unique(out[:, keep], axis=0, return_inverse=True)[1].ravel()
    donors = {int(c): valid[cells[valid] == c] for c in np.unique(cells[valid])}
    for cell in np.unique(cells[rows]):
        pool = donors.get(int(cell))
        if pool is not None:
            members = rows[cells[rows] == cell]
            out[members] = out[rng.choice(pool, size=len(members))]


def _mendable(boxes: Boxes, keep: tuple[int, ...]) -> list[tuple[Box, list[int]]]:
    """(box, its other columns repair may change) for each box repair can take a record out of: a column may change
    where it is not one of ``keep`` and the box leaves it a code outside.  The box's own column is its rule's
    fix, else the last such column of it ("PREGNANT = Y => SEX = F" with SEX a group column: PREGNANT; "C >= X"
    with C of one value: X); a box with none (only kept columns decide it) is left out: the caller's."""
    out = []
    for box in boxes.boxes:
        movable = [c for c, m in zip(box.columns, box.masks) if c not in keep and not m.all()]
        if box.fix in keep or (box.fix in box.columns and box.fix not in movable):
            if not movable:
                continue
            box = replace(box, fix=movable[-1])
        out.append((box, [c for c in movable if c != box.fix]))
    return out


def _fix_values(codes: np.ndarray, box: Box, valid: np.ndarray, rows: np.ndarray, rng: np.random.Generator):
    """New codes of the box's fix column for ``rows``: from donors (``valid`` records that agree
    with the box on its other columns), else any valid record's value outside the box, else
    a uniform code outside the box (the rows keep theirs when the box spans the column)."""
    mask = np.ones(0, dtype=bool)
    for col, m in zip(box.columns, box.masks):
        if col == box.fix:
            mask = m if not len(mask) else mask & m
    outside = np.flatnonzero(~mask)
    if not len(outside):
        return codes[rows, box.fix]
    values = codes[valid & box.contains_except_fix(codes), box.fix]
    if not len(values):
        values = codes[valid, box.fix]
        values = values[~mask[values]]
    if not len(values):
        values = outside
    return values[rng.integers(0, len(values), len(rows))]


@dataclass(frozen=True)
class Derivation:
    """``child`` = ``mapping[parent code]``; -1 entries (parent values the public data never
    showed) take the synthetic records' most common child for that parent value."""

    parent: int
    child: int
    mapping: np.ndarray


@dataclass(frozen=True)
class NullLink:
    """``child`` is null (code ``child_null``) exactly when ``parent`` is (code ``parent_null``)."""

    parent: int
    child: int
    parent_null: int
    child_null: int


def derive(codes: np.ndarray, derivations, null_links, sizes: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A copy of ``codes`` with every derivation and null link holding (see the module doc).
    Derivations are applied in the given order, so list a parent's own derivation first."""
    out = np.array(codes, dtype=np.int32, copy=True)
    for d in derivations:
        mapping = np.array(d.mapping, dtype=np.int64, copy=True)
        unknown = np.flatnonzero(mapping < 0)
        if len(unknown):
            joint = np.zeros((sizes[d.parent], sizes[d.child]), dtype=np.int64)
            np.add.at(joint, (out[:, d.parent], out[:, d.child]), 1)
            mapping[unknown] = joint[unknown].argmax(axis=1)
        out[:, d.child] = mapping[out[:, d.parent]]
    for link in null_links:
        parent_null = out[:, link.parent] == link.parent_null
        out[parent_null, link.child] = link.child_null
        need = np.flatnonzero(~parent_null & (out[:, link.child] == link.child_null))
        if len(need):
            out[need, link.child] = _non_null_child(out, link, need, sizes, rng)
    return out


def _non_null_child(codes, link: NullLink, rows, sizes, rng) -> np.ndarray:
    """For rows whose parent is set but child null: the child of a random record with the same
    parent code and a non-null child (any record with a non-null child where none shares it)."""
    donors = codes[:, link.child] != link.child_null
    out = np.empty(len(rows), dtype=np.int32)
    pool_all = codes[donors, link.child]
    if not len(pool_all):
        pool_all = np.array([c for c in range(sizes[link.child]) if c != link.child_null], dtype=np.int32)
    parents = codes[rows, link.parent]
    for p in np.unique(parents):
        these = parents == p
        pool = codes[donors & (codes[:, link.parent] == p), link.child]
        pool = pool if len(pool) else pool_all
        out[these] = pool[rng.integers(0, len(pool), int(these.sum()))]
    return out
