"""BLAS on one thread while a release computes.

A multi-threaded BLAS sums in an order that depends on the machine's cores, and the last bits it changes move
sampled records: one ``--seed`` would give different releases on machines with different core counts.  The limit
is process-wide while it holds (threadpoolctl): other threads of the caller's process get one BLAS thread too.
"""
from __future__ import annotations

import functools
from typing import Callable, ParamSpec, TypeVar

from threadpoolctl import threadpool_limits

P = ParamSpec("P")
R = TypeVar("R")


def one_blas_thread(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run with BLAS held to one thread, the caller's count given back after it (nested uses are
    harmless)."""
    @functools.wraps(fn)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)
    return limited
