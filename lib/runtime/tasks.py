"""Running independent tasks that share one input: in this process, or in forked worker processes."""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Callable, Sequence

_STATE: Any = None  # the shared input of ``run_tasks``'s tasks, inherited by its forked workers


def _call_with_state(fn, task):
    return fn(_STATE, task)


def run_tasks(fn: Callable, state: Any, tasks: Sequence, jobs: int = 1, done: Callable[[], None] = lambda: None) -> list:
    """[fn(state, task) for task in tasks] in order, in ``jobs`` forked worker processes (this process for one
    job or one task), which inherit ``state`` instead of receiving a copy; ``done`` after each task."""
    global _STATE
    out = []
    if jobs <= 1 or len(tasks) < 2:
        for task in tasks:
            out.append(fn(state, task))
            done()
        return out
    _STATE = state
    try:
        with ProcessPoolExecutor(jobs, mp_context=get_context("fork")) as pool:
            for part in pool.map(_call_with_state, [fn] * len(tasks), tasks, chunksize=max(1, len(tasks) // (8 * jobs))):
                out.append(part)
                done()
    finally:
        _STATE = None
    return out
