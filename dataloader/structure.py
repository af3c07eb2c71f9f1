"""Record structure from the parameters file and the public file (never the private one).

* **Structural cuts**: a numeric column X gets a bin edge where the public data shows
  another column switching to its null token (every public row with X below m has it null,
  rows from m on do not), so "AGEP < 15" is a union of whole bins.  Each such finding is
  also proposed as an edit rule in the log, for the curator to copy; it is not applied.
* **Derivations**: a categorical column that is a function of another one in the public
  data (INDP_CAT of INDP), or is declared so (``function_of``).  It counts only when the
  public data could have refuted it: the chance of a function that good arising between
  independent columns must be below 1e-9.
* **Null links**: two columns null on exactly the same public rows (PINCP, PINCP_DECILE);
  the one with fewer codes follows the other's null.
* **Group-level columns**: columns holding one value within each cell of some group
  columns of the public file (DENSITY within PUMA), or declared so (``constant_within``).

Nothing here is private, so nothing costs budget; what to do with the structure is the
release's post-processing (stages/structure.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from dpsyn.dataloader.comparisons import failing_pairs
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.rules import Atom, compared as compared_columns
from dpsyn.dataloader.schema import CATEGORICAL, Column, Schema, SchemaError
from dpsyn.lib.records.constraints import Box, Boxes, Derivation, NullLink, repair
from dpsyn.lib.tuning import T

PROBE_RECORDS = 20_000  # random records of the domain repair starts from to find one the edit rules allow



@dataclass(frozen=True)
class Structure:
    """What synthesis and decoding respect: rule boxes (code space), derivations and null links
    (code space, in the order to apply them), group-level columns (name, within), and the log lines
    that say what was found."""

    boxes: Boxes = field(default_factory=Boxes)
    derivations: tuple[Derivation, ...] = ()
    null_links: tuple[NullLink, ...] = ()
    group_level: tuple[tuple[str, tuple[str, ...]], ...] = ()
    notes: tuple[str, ...] = ()

    def skipped(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """Columns a method need not measure: derived children and group-level columns, whose
        values the release sets afterwards."""
        children = {names[d.child] for d in self.derivations}
        return tuple(n for n in names if n in children or n in dict(self.group_level))


@dataclass(frozen=True)
class NullSwitch:
    """In the public data, ``other`` is null on every row with ``column`` < ``threshold`` (``below``)
    or > ``threshold`` (not ``below``), on ``support`` rows."""

    column: str
    other: str
    threshold: float
    below: bool
    support: int

    def rule(self) -> str:
        return f"{self.column} {'<' if self.below else '>'} {self.threshold:g} => {self.other} = N"


def _is_null(series: pd.Series, col: Column) -> np.ndarray:
    if col.kind == CATEGORICAL:
        return (series.astype(object) == col.null).to_numpy() if col.null is not None else \
            np.zeros(len(series), dtype=bool)
    return np.isnan(series.to_numpy(dtype=np.float64))


def null_switches(schema: Schema, public: pd.DataFrame) -> list[NullSwitch]:
    """Where, in the typed public data, a numeric column's low (or high) end has another column
    always null, on at least structure_min_support rows, with the chance of that under the other column's
    null rate above the switch below structure_chance."""
    found = []
    for col in schema.columns:
        if col.kind == CATEGORICAL:
            continue
        x = public[col.name].to_numpy(dtype=np.float64)
        for other in schema.columns:
            if other.name == col.name or other.null is None:
                continue
            null = _is_null(public[other.name], other)
            keep = ~np.isnan(x)
            xs, yn = x[keep], null[keep]
            if not yn.any() or yn.all():
                continue
            for below in (True, False):
                edge = xs[~yn].min() if below else xs[~yn].max()
                outside = xs < edge if below else xs > edge
                support = int(outside.sum())
                rate = yn[~outside].mean()
                if support >= T.structure_min_support and (rate == 0 or support * math.log(rate) < math.log(T.structure_chance)):
                    found.append(NullSwitch(col.name, other.name, float(edge), below, support))
    return found


def comparison_rules(schema: Schema, public: pd.DataFrame) -> list[str]:
    """Comparisons between two numeric columns that every typed public row with both set meets (``A < B``,
    else ``A <= B``), on at least structure_min_support rows, where the chance that independent columns with
    these distributions meet it on every one of those rows is below structure_chance: as rules, guarded by
    ``!= N`` for a column with a null token; none for a pair the parameters already compare."""
    numeric = [c for c in schema.columns if c.kind != CATEGORICAL]
    declared = {frozenset((a.column, a.other)) for r in schema.rules for a in r.conclusion if a.other is not None}
    found = []
    for a, b in ((a, b) for a in numeric for b in numeric if a.name != b.name
                 and frozenset((a.name, b.name)) not in declared):
        x, y = public[a.name].to_numpy(dtype=np.float64), public[b.name].to_numpy(dtype=np.float64)
        both = ~np.isnan(x) & ~np.isnan(y)
        x, y = x[both], y[both]
        if len(x) < T.structure_min_support:
            continue
        for op, strict in (("<", True), ("<=", False)):
            if not (x < y if strict else x <= y).all():
                continue
            ys = np.sort(y)  # P(A op B) for independent draws from the two distributions
            chance = (len(ys) - np.searchsorted(ys, x, side="right" if strict else "left")).mean() / len(ys)
            if len(x) * math.log(max(chance, 1e-300)) < math.log(T.structure_chance) and chance < 1:
                guard = " and ".join(f"{c.name} != {c.null}" for c in (a, b) if c.null is not None)
                found.append(f"{guard} => {a.name} {op} {b.name}" if guard else f"{a.name} {op} {b.name}")
            break
    return found


def category_null_rules(schema: Schema, public: pd.DataFrame) -> list[str]:
    """``C in {...} <=> X = N`` where, in the typed public data, each value of categorical column C has X
    always null or never, both occur, and the chance of a split that clean between independent columns is
    below structure_chance (on at least structure_min_support rows); left out where the values are C's own
    null token alone (a null link)."""
    if len(public) < T.structure_min_support:
        return []
    nulls = {x.name: _is_null(public[x.name], x) for x in schema.columns if x.null is not None}
    found = []
    for c in (c for c in schema.columns if c.kind == CATEGORICAL):
        codes, values = pd.factorize(public[c.name].astype(object))
        seen = codes >= 0
        sizes = np.bincount(codes[seen], minlength=len(values)).astype(np.float64)
        for name, null in nulls.items():
            rate = null.mean()
            if name == c.name or not 0 < rate < 1:
                continue
            null_share = np.bincount(codes[seen], weights=null[seen], minlength=len(values)) / np.maximum(sizes, 1)
            if not np.isin(null_share[sizes > 0], (0.0, 1.0)).all():
                continue
            chance = float(np.logaddexp(sizes * math.log(rate), sizes * math.log(1 - rate)).sum())
            null_values = {v for v, share, n in zip(values, null_share, sizes) if n and share == 1.0}
            if chance >= math.log(T.structure_chance) or null_values == {c.null}:
                continue
            shown = [str(v) for v in c.values or () if v in null_values] + \
                ([c.null] if c.null is not None and c.null in null_values else [])
            left = f"{c.name} = {shown[0]}" if len(shown) == 1 else f"{c.name} in {{{', '.join(shown)}}}"
            found.append(f"{left} <=> {name} = {schema.column(name).null}")
    return found


def switch_cuts(switches: list[NullSwitch], schema: Schema) -> dict[str, list[float]]:
    """Bin edges that put each switch on a bin boundary (just below the threshold for "<")."""
    cuts: dict[str, list[float]] = {}
    for s in switches:
        col = schema.column(s.column)
        below = s.threshold - 1 if col.integral else float(np.nextafter(s.threshold, -np.inf))
        cuts.setdefault(s.column, []).append(below if s.below else s.threshold)
    return cuts


@dataclass(frozen=True)
class PublicViews:
    """One public file three ways: its typed values, its codes under the release's encoder, its text."""

    typed: pd.DataFrame
    codes: np.ndarray
    text: pd.DataFrame


def detect(schema: Schema, encoder: Encoder, public: PublicViews | None, group_columns: tuple[str, ...],
           switches: list[NullSwitch], derive: bool = True) -> Structure:
    """The structure a release respects (see the module doc), from the parameters and the ``public`` file
    (None without one); ``derive=False`` keeps only the rules."""
    public_typed, public_codes, public_text = (public.typed, public.codes, public.text) if public else (None,) * 3
    names = tuple(encoder.names)
    notes = []
    boxes = rule_boxes(schema.rules, encoder)
    if boxes:
        boxes = replace(boxes, witness=_witness(boxes, encoder.sizes))
    if schema.rules:
        notes.append(f"edit rules: {len(schema.rules)} declared ({len(boxes.boxes)} forbidden patterns); "
                     f"synthesis keeps every record inside them")
    declared = {f"{' and '.join(map(str, atoms))} => {failing}" for r in schema.rules for atoms, failing, _ in
                r.patterns()}
    found = {s.rule() for s in switches}
    if public_typed is not None:
        found |= set(comparison_rules(schema, public_typed)) | set(category_null_rules(schema, public_typed))
    proposals = sorted(found - declared - {" ".join(r.text.split()) for r in schema.rules})
    if proposals:
        notes.append("public data suggests edit rules (not applied; copy into \"constraints\" to apply): " +
                     "; ".join(f'"{p}"' for p in proposals))
    if not derive:
        return Structure(boxes, notes=tuple(notes + ["derived columns: off (--no-derive)"]))
    derivations = _derivations(schema, encoder, public_codes, group_columns, notes)
    children = {d.child for d in derivations}
    links = _null_links(schema, encoder, public_typed, children, derivations, notes) if public_typed is not None \
        else ()
    compared = set(compared_columns(schema.rules))  # a comparison moves their values row by row: never group-level
    group_level = _group_level(schema, public_text, group_columns, {names[c] for c in children} | compared, notes)
    return Structure(boxes, derivations, links, group_level, tuple(notes))


def _witness(boxes: Boxes, sizes: tuple[int, ...]) -> np.ndarray:
    """One record in no box, repaired from PROBE_RECORDS random records of the encoded domain (fixed seed): public,
    from the rules and the domain only; repair's donor of last resort.  SchemaError where none can be found (the
    rules contradict each other: "C = 0 => D = 0" and "X < 5 => D = 9" where every X is below 5), before any
    data is read; such rules stopped the release once synthesis reached them."""
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, s, PROBE_RECORDS) for s in sizes]).astype(np.int32)
    try:
        return repair(codes, boxes, rng)[0]
    except ValueError:
        raise SchemaError(["constraints: no record meets every edit rule together (check them against each other "
                           "and the columns' ranges)"]) from None


def rule_boxes(rules, encoder: Encoder) -> Boxes:
    """Each rule's forbidden patterns as boxes over the encoder's codes."""
    names = encoder.names
    boxes = []
    for rule in rules:
        for atoms, failing, fix in rule.patterns():
            masks: dict[int, np.ndarray] = {}
            for atom, negate in [(a, False) for a in atoms] + ([] if failing.other else [(failing, True)]):
                j = names.index(atom.column)
                m = atom_codes(atom, encoder.coders[j])
                m = ~m if negate else m
                masks[j] = masks[j] & m if j in masks else m
            for extra in _comparison_masks(failing, encoder) if failing.other else [{}]:
                box = dict(masks)
                for j, m in extra.items():
                    box[j] = box[j] & m if j in box else m
                # one entry a code: a numeric column's atoms also answer for a null its codes may not have
                box = {j: m[:encoder.coders[j].size] for j, m in box.items()}
                if all(m.any() for m in box.values()):
                    boxes.append(Box(tuple(box), tuple(box.values()), names.index(fix), rule.text))
    return Boxes(tuple(boxes))


def _comparison_masks(atom: Atom, encoder: Encoder) -> list[dict[int, np.ndarray]]:
    """The codes where comparison ``atom`` fails for every value, as one pair of masks per code of the other
    column (that code, and the codes of ``atom.column`` it fails with)."""
    names = encoder.names
    assert atom.other is not None, "a comparison of two columns"
    j, k = names.index(atom.column), names.index(atom.other)
    a, b = encoder.coders[j], encoder.coders[k]
    fails = failing_pairs(atom, {c.column.name: c for c in (a, b)})
    if fails[:len(a.bin_edges) - 1, :len(b.bin_edges) - 1].all():
        raise SchemaError([f"constraints: no values of {atom.column} and {atom.other} in their ranges meet {atom}"])
    return [{j: fails[:, b], k: np.arange(fails.shape[1]) == b} for b in range(fails.shape[1]) if fails[:, b].any()]


def atom_codes(atom: Atom, coder) -> np.ndarray:
    """Which codes of ``coder``'s column satisfy ``atom``; every bin is whole (rule cuts)."""
    col = coder.column
    if coder.categories is not None:
        return atom.holds(pd.Categorical.from_codes(np.arange(coder.size), categories=list(coder.categories)), col)
    nbins = len(coder.edges) - 1
    first = np.array([coder.first_value(b) for b in range(nbins)] + [np.nan])
    last = np.concatenate([coder.edges[1:], [np.nan]])
    at_first, at_last = atom.holds(first, col), atom.holds(last, col)
    if (at_first != at_last).any():
        raise ValueError(f"edit rule atom {atom} splits a bin of {col.name}")
    return at_first


def _derivations(schema: Schema, encoder: Encoder, public_codes, group_columns, notes) -> tuple[Derivation, ...]:
    names, sizes = encoder.names, encoder.sizes
    chosen: dict[int, tuple[int, np.ndarray, str]] = {}
    for j, col in enumerate(schema.columns):
        if col.function_of is not None:
            p = names.index(col.function_of)
            mapping = _mapping(public_codes, p, j, sizes) if public_codes is not None else \
                np.full(sizes[p], -1, dtype=np.int64)
            chosen[j] = (p, mapping, "declared")
    if public_codes is not None:
        cats = [j for j, c in enumerate(schema.columns) if c.kind == CATEGORICAL and c.name not in group_columns]
        for c in cats:
            if c in chosen:
                continue
            found = [(len(np.unique(public_codes[public_codes[:, p] >= 0, p])), p) for p in cats
                     if p != c and _is_function(public_codes, p, c, sizes)]
            if found:
                p = min(found)[1]
                chosen[c] = (p, _mapping(public_codes, p, c, sizes), "found in the public data")
    for c in list(chosen):  # a pair that determines each other keeps the later column as the child
        p = chosen[c][0]
        if p in chosen and chosen[p][0] == c and c < p:
            del chosen[c]
    order: list[Derivation] = []
    done: set[int] = set()
    while len(order) < len(chosen):
        ready = [c for c in chosen if c not in done and (chosen[c][0] not in chosen or chosen[c][0] in done)]
        if not ready:
            break
        for c in ready:
            order.append(Derivation(chosen[c][0], c, chosen[c][1]))
            done.add(c)
    for d in order:
        known = int((d.mapping >= 0).sum())
        notes.append(f"derived column: {names[d.child]} is a function of {names[d.parent]} "
                     f"({chosen[d.child][2]}; public mapping for {known} of {sizes[d.parent]} values); "
                     f"synthesized from it, not measured")
    return tuple(order)


def _joint(public_codes, p: int, c: int, sizes) -> np.ndarray:
    rows = public_codes[(public_codes[:, p] >= 0) & (public_codes[:, c] >= 0)]
    return np.bincount(rows[:, p] * sizes[c] + rows[:, c], minlength=sizes[p] * sizes[c]).reshape(sizes[p], sizes[c])


def _mapping(public_codes, p: int, c: int, sizes) -> np.ndarray:
    joint = _joint(public_codes, p, c, sizes)
    return np.where(joint.sum(axis=1) > 0, joint.argmax(axis=1), -1).astype(np.int64)


def _is_function(public_codes, p: int, c: int, sizes) -> bool:
    """c is a function of p on the public rows, c is not constant, and independent columns would
    give a function this well supported with chance below structure_chance."""
    joint = _joint(public_codes, p, c, sizes)
    if ((joint > 0).sum(axis=1) > 1).any():
        return False
    marginal = joint.sum(axis=0)
    if (marginal > 0).sum() < 2:
        return False
    logp = np.log(marginal[marginal > 0] / marginal.sum())
    per_value = joint.sum(axis=1)
    per_value = per_value[per_value > 1]
    chance = sum(logsumexp(m * logp) for m in per_value)
    return chance < math.log(T.structure_chance)


def _null_links(schema: Schema, encoder: Encoder, public: pd.DataFrame, children: set[int], derivations,
                notes) -> tuple[NullLink, ...]:
    names, sizes = encoder.names, encoder.sizes
    nullable = [j for j, c in enumerate(schema.columns) if c.null is not None]
    pairs_done = {(d.parent, d.child) for d in derivations} | {(d.child, d.parent) for d in derivations}
    links, linked = [], set(children)
    nulls = {j: _is_null(public[names[j]], schema.columns[j]) for j in nullable}
    for a in nullable:
        for b in nullable:
            if b <= a or (a, b) in pairs_done:
                continue
            same = np.array_equal(nulls[a], nulls[b])
            n_null = int(nulls[a].sum())
            if not same or n_null < T.structure_min_support or len(nulls[a]) - n_null < T.structure_min_support:
                continue
            parent, child = (a, b) if sizes[a] >= sizes[b] else (b, a)
            if child in linked:
                continue
            linked.add(child)
            parent_null, child_null = encoder.coders[parent].null_code, encoder.coders[child].null_code
            assert parent_null is not None and child_null is not None, "a null link joins two null tokens"
            links.append(NullLink(parent, child, parent_null, child_null))
            notes.append(f"null link: {names[child]} is null exactly when {names[parent]} is (public data, "
                         f"{n_null} null rows); it follows {names[parent]}")
    return tuple(links)


def _group_level(schema: Schema, public_text, group_columns, children: set[str], notes) -> tuple:
    found = []
    subsets = [(g,) for g in group_columns] + ([tuple(group_columns)] if len(group_columns) > 1 else [])
    keys = {}
    if public_text is not None:
        for within in subsets:
            text = public_text[list(within)].astype(str)
            keys[within] = pd.Series(text.groupby(list(within), sort=False).ngroup().to_numpy())
    for col in schema.columns:
        if col.name in group_columns or col.name in children:
            continue
        if col.constant_within:
            within = tuple(col.constant_within)
            if set(within) <= set(group_columns):
                found.append((col.name, within))
                notes.append(f"group-level column: {col.name} holds one value per {' × '.join(within)} "
                             f"(declared)")
            else:
                notes.append(f"group-level column: {col.name} is declared constant within "
                             f"{' × '.join(within)}, which are not all group columns of this release: ignored")
            continue
        if public_text is None or not group_columns:
            continue
        values = pd.Series(pd.factorize(public_text[col.name].astype(str).str.strip())[0])
        if values.nunique() < 2:
            continue
        freq = values.value_counts(normalize=True).to_numpy()
        for within in subsets:
            if not (values.groupby(keys[within]).nunique() == 1).all():
                continue  # a cell holds two values: not group-level, whatever the chance below
            rows = keys[within].value_counts().to_numpy()
            chance = sum(logsumexp(m * np.log(freq)) for m in rows if m > 1)
            if chance < math.log(T.structure_chance):
                found.append((col.name, within))
                notes.append(f"group-level column: {col.name} holds one value per {' × '.join(within)} in the "
                             f"public data ({rows.size} cells); each group gets one value")
                break
    return tuple(found)

