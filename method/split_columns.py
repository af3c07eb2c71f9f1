"""Large columns split into a coarse code and an offset, so that a model can measure them coarsely.

A column of many codes (age in 85 years, hours in 99) makes every marginal over it large, and at
small ε such a marginal is mostly noise.  A numeric column with a null token (number of children:
20 bins and null for who lives in group quarters) may be split at that token alone, so that a
marginal reads it as null or not.  Split into ``code // width`` (its coarse code, kept at
the column's own index) and ``code % width`` (its offset, a model column appended after the
domain's columns), the column can be measured coarsely (the private table's ``Marginal`` with
``widths``: the coarse code only) or exactly (coarse code and offset together), and records over
the model columns carry both.  A model key is a tuple of model columns: a split column's coarse
code, then, after every domain column, the offsets of those measured exactly.

Everything here is bookkeeping on public shapes and synthetic records: it costs no privacy.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dpsyn.lib.records.constraints import Box, Boxes
from dpsyn.lib.tuning import T



def per_key(method):
    """``method(self, key)`` worked out once per key of an object whose answers never change (a layout, a
    model's columns and group columns), kept in the object's ``__dict__``: every adaptive round asks about the
    same candidate keys."""
    @functools.wraps(method)
    def memo(self, key):
        cache = self.__dict__.setdefault(f"_{method.__name__}_memo", {})
        key = tuple(key)
        if key not in cache:
            cache[key] = method(self, key)
        return cache[key]
    return memo


@dataclass(frozen=True)
class SplitColumns:
    """``sizes``: the domain's code counts; ``widths[j]``: column j's width (1: not split)."""

    sizes: tuple[int, ...]
    widths: tuple[int, ...]

    @classmethod
    def choose(cls, sizes: tuple[int, ...], candidates, at_null=()) -> SplitColumns:
        """Split every column of ``candidates`` with more than split_columns_split_above codes, in widths of
        ceil(sqrt(codes)) (about as many coarse codes as offsets); and every other candidate of more
        than two codes that is in ``at_null`` (numeric columns with a null token, which is their last
        code) at its null token, in a width of codes - 1: its coarse code is then 0 for a value and 1
        for null, so a marginal may read it as null or not."""
        chosen = {j for j in candidates if sizes[j] > T.split_columns_split_above}
        nulls = {j for j in set(at_null) & set(candidates) if 2 < sizes[j] <= T.split_columns_split_above}
        return cls(tuple(sizes), tuple(math.isqrt(s - 1) + 1 if j in chosen else s - 1 if j in nulls else 1
                                       for j, s in enumerate(sizes)))

    def at_null(self, j: int) -> bool:
        """Whether column j is split at its null token (two coarse codes: a value, null)."""
        return 1 < self.widths[j] == self.sizes[j] - 1

    @cached_property
    def split(self) -> tuple[int, ...]:
        """The split domain columns, in order (their offsets follow the domain's columns in this order)."""
        return tuple(j for j, w in enumerate(self.widths) if w > 1)

    def offset(self, j: int) -> int:
        """The model column of split column j's offset."""
        return len(self.sizes) + self.split.index(j)

    @cached_property
    def model_sizes(self) -> tuple[int, ...]:
        """Codes per model column: the domain's, with a split column's coarse codes, then the offsets."""
        coarse = tuple(-(-s // w) for s, w in zip(self.sizes, self.widths))
        return coarse + tuple(self.widths[j] for j in self.split)

    @per_key
    def model_shape(self, key: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the marginal of model key ``key`` over the model's columns."""
        return tuple(self.model_sizes[c] for c in key)

    def labels(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """A name per model column (the split column's name stands for its coarse code)."""
        return tuple(names) + tuple(f"{names[j]} (offset within {self.widths[j]}s)" for j in self.split)

    def key(self, cols, coarse=()) -> tuple[int, ...]:
        """The model key of domain columns ``cols`` (in that order), the split ones among ``coarse``
        by their coarse code only, the others exactly."""
        return tuple(cols) + tuple(self.offset(j) for j in sorted(cols) if self.widths[j] > 1 and j not in coarse)

    @per_key
    def readings(self, cols: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """The model keys of domain columns ``cols`` in every reading: each subset of their split columns read
        coarsely, the others exactly (the exact reading first)."""
        split = [j for j in cols if self.widths[j] > 1]
        return tuple(dict.fromkeys(self.key(cols, c) for r in range(len(split) + 1)
                                   for c in itertools.combinations(split, r)))

    @per_key
    def whole_readings(self, cols: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """The model keys of domain columns ``cols`` read all exactly, then all coarsely (one key where none
        is split)."""
        return tuple(dict.fromkeys((self.key(cols), self.key(cols, cols))))

    @per_key
    def cells(self, key: tuple[int, ...]) -> int:
        """The cells of the private marginal of model key ``key``."""
        return math.prod(self.query_shape(key))

    @per_key
    def columns(self, key: tuple[int, ...]) -> tuple[int, ...]:
        """The domain columns of a model key, in its order."""
        return tuple(c for c in key if c < len(self.sizes))

    @per_key
    def exact_key(self, key: tuple[int, ...]) -> tuple[int, ...]:
        """The model key that reads the domain columns of ``key`` exactly."""
        return self.key(self.columns(key))

    @per_key
    def summed_out(self, key: tuple[int, ...]) -> tuple[int, ...]:
        """The axes of ``exact_key(key)``'s marginal that ``key`` sums out (the offsets it reads coarsely)."""
        return tuple(i for i, c in enumerate(self.exact_key(key)) if c not in key)

    def exact_split(self, key: tuple[int, ...], j: int) -> bool:
        """Whether column j is split and ``key`` reads it exactly (coarse code and offset)."""
        return self.widths[j] > 1 and self.offset(j) in key

    @per_key
    def coarse(self, key: tuple[int, ...]) -> tuple[int, ...]:
        """The split columns a model key reads by their coarse code only."""
        return tuple(j for j in self.columns(key) if self.widths[j] > 1 and not self.exact_split(key, j))

    @per_key
    def query_widths(self, key: tuple[int, ...]) -> tuple[int, ...]:
        """The private ``Marginal``'s widths for ``key``: a column's width where it is read coarsely, else 1."""
        coarse = set(self.coarse(key))
        return tuple(self.widths[j] if j in coarse else 1 for j in self.columns(key))

    @per_key
    def query_shape(self, key: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(-(-self.sizes[j] // w) for j, w in zip(self.columns(key), self.query_widths(key)))

    def from_query(self, key: tuple[int, ...], values: np.ndarray) -> np.ndarray:
        """A marginal in the private query's layout (``query_shape``) in the model key's layout: an
        exact split column's axis padded with zeros (codes past the last one) and cut into coarse
        code × offset, the offsets' axes moved to the end."""
        values = np.asarray(values, dtype=np.float64).reshape(self.query_shape(key))
        shape, order = [], []
        for axis, j in enumerate(self.columns(key)):
            if self.exact_split(key, j):
                full = self.model_sizes[j] * self.widths[j]
                pad = [(0, 0)] * values.ndim
                pad[axis] = (0, full - self.sizes[j])
                values = np.pad(values, pad)
                shape += [self.model_sizes[j], self.widths[j]]
                order += [j, self.offset(j)]
            else:
                shape.append(values.shape[axis])
                order.append(j)
        return values.reshape(shape).transpose([order.index(c) for c in key])

    def to_query(self, key: tuple[int, ...], values: np.ndarray) -> np.ndarray:
        """The inverse of ``from_query``: a marginal in the model key's layout in the private query's
        (for an exact key, the domain's own), dropping the padded codes."""
        steps = self.to_query_steps(key)
        if steps is None:
            return np.asarray(values)
        axes, shape, cut = steps
        return np.asarray(values).transpose(axes).reshape(shape)[cut]

    @per_key
    def to_query_steps(self, key: tuple[int, ...]) -> tuple[list[int], list[int], tuple[slice, ...]] | None:
        """``to_query``'s transpose, shape and cut for ``key``; None where the layouts are the same (no split
        column read exactly)."""
        if not any(self.exact_split(key, j) for j in self.columns(key)):
            return None
        order, shape, cut = [], [], []
        for j in self.columns(key):
            exact = self.exact_split(key, j)
            order += [j, self.offset(j)] if exact else [j]
            shape.append(self.model_sizes[j] * self.widths[j] if exact else self.model_sizes[j])
            cut.append(slice(0, self.sizes[j]) if exact else slice(None))
        return [key.index(c) for c in order], shape, tuple(cut)

    def encode(self, codes: np.ndarray) -> np.ndarray:
        """Records over the domain's columns as records over the model's (negative codes as 0)."""
        codes = np.maximum(np.asarray(codes, dtype=np.int32), 0)
        out = codes.copy()
        for j in self.split:
            out[:, j] = codes[:, j] // self.widths[j]
        return np.column_stack([out] + [codes[:, j] % self.widths[j] for j in self.split]).astype(np.int32)

    def boxes(self, boxes: Boxes) -> Boxes:
        """Edit rules' forbidden ``boxes`` (over the domain's columns) over the model's: a model record
        lies in one of them exactly when its decoded record (``decode``) lies in one of ``boxes``.  On a
        split column a box's mask becomes, per coarse code, a mask on the offsets, and the coarse codes
        with the same offset mask share one box; so a box may become a few.  Such a box is repaired on
        the offset where its offsets are not all forbidden (moving the offset can leave it), else on the
        coarse code.  The boxes' witness (a record in none) comes along, encoded."""
        out = []
        for box in boxes.boxes:
            parts: list[tuple[tuple[int, ...], tuple[np.ndarray, ...], int]] = [((), (), box.fix)]
            for col, mask in zip(box.columns, box.masks):
                if self.widths[col] == 1:
                    parts = [(c + (col,), m + (mask,), fix) for c, m, fix in parts]
                    continue
                width, size, coarse_codes = self.widths[col], self.sizes[col], self.model_sizes[col]
                shared: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
                for b in range(coarse_codes):
                    offsets = np.asarray(mask)[b * width + np.arange(width) % min(size - b * width, width)]
                    if offsets.any():
                        coarse = shared.setdefault(offsets.tobytes(), (offsets, np.zeros(coarse_codes, bool)))[1]
                        coarse[b] = True
                parts = [(c + (col, self.offset(col)), m + (coarse, offsets),
                          fix if fix != col else col if offsets.all() else self.offset(col))
                         for c, m, fix in parts for offsets, coarse in shared.values()]
            out += [Box(c, m, fix, box.label) for c, m, fix in parts]
        witness = None if boxes.witness is None else self.encode(boxes.witness[None])[0]  # in no box here either
        return Boxes(tuple(out), witness)

    def decode(self, records: np.ndarray) -> np.ndarray:
        """Records over the model's columns as records over the domain's.  A coarse code and offset
        past the column's last code (possible only in its last, short, coarse cell) wrap around
        within that cell."""
        out = np.array(records[:, :len(self.sizes)], dtype=np.int32)
        for j in self.split:
            w, start = self.widths[j], records[:, j].astype(np.int64) * self.widths[j]
            room = np.minimum(self.sizes[j] - start, w)
            out[:, j] = start + records[:, self.offset(j)] % room
        return out
