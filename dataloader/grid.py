"""Counting steps of a numeric column's grid (whole numbers, or values of a few decimals) in float64."""
from __future__ import annotations

import numpy as np


def steps(values, step: float) -> np.ndarray:
    """``values / step``, made a whole number where it lies within float error of one: a value on the grid divided
    by its step is off a whole number by that error only (0.3 / 0.1 is 2.9999999999999996; near 10**15 steps, by a
    spacing or two of float64 there), which floor() and ceil() must not see.  The error allowed is 5e-7 or two
    spacings of float64 at the quotient, whichever is larger: a value and its step each carry half a spacing of
    error and the division one more (a schema keeps the quotient of a value of decimals below 2^50, where that
    holds; schema.GRID_STEPS), so a value truly between grid points is not snapped where float64 tells it apart."""
    q = np.asarray(values, dtype=np.float64) / step
    whole = np.rint(q)
    return np.where(np.abs(q - whole) <= np.maximum(5e-7, 2 * np.spacing(np.abs(q))), whole, q)
