"""Measuring engines: where a run's bounded private records live, and how they are counted.

The private table (private_table.py) holds an engine and asks it three things: which rows to keep
(contribution bounding), to hold the kept records (``hold`` gives the handle), and the exact answers of
queries on a handle; a method
also runs its per-group synthesis through ``map``.  Nothing here draws noise or charges the
ledger: the private table does both before it asks for an answer.

* ``LocalEngine`` (the default): the records in this process; the marginals a step asks for are
  counted together in one parallel pass (lib/marginals.py ``count_marginals``).
* ``DaskEngine``: the records in row partitions on the workers of a dask.distributed cluster (one
  given by its scheduler's address, or a LocalCluster of ``jobs`` worker processes that the engine
  starts and stops); every answer is the sum of per-partition answers (map-reduce), and bounding
  shuffles the rows on the id so that an individual's rows, wherever they were, are bounded together.

Both engines keep the same rows (the same priorities, and ``keep_rows`` looks at one individual at a
time) and give the same counts; sums of real numbers (moments, linear sums, gradients) agree up to the
order of floating-point additions.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from dpsyn.lib.marginals import count_marginals
from dpsyn.lib.privacy.bounding import keep_rows
from dpsyn.lib.privacy.queries import DependencyScores, Marginal, Records, independence_gap
from dpsyn.lib.tasks import run_tasks

ENGINES = ("local", "dask")


def exact_answers(records: Records, queries: Sequence) -> list[np.ndarray]:
    """Each query's exact answer on ``records``, the marginals among them counted in one pass."""
    marginals = list(dict.fromkeys(q for q in queries if type(q) is Marginal))
    specs = [(records.domain.indices(q.attrs), q.column_widths(), q.shape(records.domain)) for q in marginals]
    counted = dict(zip(marginals, count_marginals(records.codes, specs)))
    return [counted[q] if q in counted else q.answer(records) for q in queries]


def _additive(query) -> tuple:
    """Queries whose answers add up over any split of the rows and give ``query``'s answer (``_combine``)."""
    return tuple(Marginal(tuple(pair)) for pair in query.pairs) if type(query) is DependencyScores else (query,)


def _combine(query, parts: list[np.ndarray]) -> np.ndarray:
    if type(query) is DependencyScores:
        return np.array([independence_gap(joint) for joint in parts])
    return parts[0]


class LocalEngine:
    """Records in this process; ``map`` forks ``jobs`` worker processes (none for one job).  ``map`` runs a
    method's tasks on public inputs only: no task gets the private records."""

    name = "local"

    def __init__(self, jobs: int = 1):
        self.jobs = max(1, int(jobs))

    def keep(self, ids: np.ndarray, theta: int, priority: np.ndarray, keys: np.ndarray | None) -> np.ndarray:
        """Sorted indices of the rows bounding keeps (bounding.keep_rows)."""
        return keep_rows(ids, theta, priority, keys)

    def hold(self, records: Records) -> Records:
        """The handle ``answers`` takes: here the records themselves."""
        return records

    def answers(self, held: Records, queries: Sequence) -> list[np.ndarray]:
        return exact_answers(held, queries)

    def map(self, fn: Callable, state: Any, tasks: Sequence, done: Callable[[], None] = lambda: None) -> list:
        """[fn(state, task) for task in tasks] in order, in ``jobs`` forked processes (lib/tasks.py)."""
        return run_tasks(fn, state, tasks, self.jobs, done)

    def close(self) -> None:
        pass


def _part_answers(records: Records, queries: Sequence) -> list[np.ndarray]:
    return exact_answers(records, queries)


def _part_keep(frame, theta: int, key_columns: list[str]):
    """The kept rows' positions among one shuffled partition's rows (all of each id's rows are in it)."""
    keys = frame[key_columns].to_numpy() if key_columns else None
    kept = keep_rows(frame["id"].to_numpy(), theta, frame["priority"].to_numpy(), keys)
    return frame["row"].iloc[kept]


class DaskEngine:
    """Records in row partitions on a dask.distributed cluster (module doc).  ``scheduler``: the address
    of a running cluster to join; else a LocalCluster of ``jobs`` single-threaded worker processes, with
    no dashboard, closed by ``close``.  ``partitions``: row partitions per worker."""

    name = "dask"

    def __init__(self, jobs: int = 1, scheduler: str | None = None, partitions: int = 2):
        from distributed import Client, LocalCluster
        self.jobs = max(1, int(jobs))
        self._cluster = None
        if scheduler is None:
            self._cluster = LocalCluster(n_workers=self.jobs, threads_per_worker=1, processes=True,
                                         dashboard_address=None, silence_logs=40)
            self.client = Client(self._cluster, set_as_default=False)
        else:
            self.client = Client(scheduler, set_as_default=False)
        workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        self.partitions = partitions * workers

    def keep(self, ids: np.ndarray, theta: int, priority: np.ndarray, keys: np.ndarray | None) -> np.ndarray:
        """``keep_rows`` after a shuffle on the id: every id's rows meet in one partition."""
        import dask.dataframe as dd
        import pandas as pd
        frame = pd.DataFrame({"id": pd.Series(ids, dtype="string"), "row": np.arange(len(ids), dtype=np.int64),
                              "priority": priority})
        key_columns = []
        if keys is not None:
            keys = np.asarray(keys).reshape(len(ids), -1)
            key_columns = [f"key{j}" for j in range(keys.shape[1])]
            for j, name in enumerate(key_columns):
                frame[name] = keys[:, j]
        table = dd.from_pandas(frame, npartitions=self.partitions, sort=False).shuffle("id", method="tasks")
        kept = table.map_partitions(_part_keep, theta, key_columns, meta=("row", "int64"))
        return np.sort(self.client.compute(kept).result().to_numpy())

    def hold(self, records: Records) -> list:
        """Scatters ``records`` to the workers in contiguous row partitions; their futures are the handle."""
        bounds = np.linspace(0, len(records.codes), self.partitions + 1).astype(np.int64)
        parts = [Records(records.codes[a:b], {c: v[a:b] for c, v in records.numeric.items()}, records.domain)
                 for a, b in zip(bounds[:-1], bounds[1:]) if b > a or len(records.codes) == 0]
        return self.client.scatter(parts)

    def answers(self, held: list, queries: Sequence) -> list[np.ndarray]:
        """Per query, the sum over partitions of its additive parts' answers, added in partition order."""
        flat = [part for q in queries for part in _additive(q)]
        partial = self.client.gather([self.client.submit(_part_answers, p, flat, pure=False) for p in held])
        sums = [sum(answers[i] for answers in partial) for i in range(len(flat))]
        out, i = [], 0
        for q in queries:
            k = len(_additive(q))
            out.append(_combine(q, sums[i:i + k]))
            i += k
        return out

    def map(self, fn: Callable, state: Any, tasks: Sequence, done: Callable[[], None] = lambda: None) -> list:
        """[fn(state, task) for task in tasks] as one cluster task each, ``state`` sent to every worker once."""
        from distributed import as_completed
        shared = self.client.scatter(state, broadcast=True)
        futures = [self.client.submit(fn, shared, task, pure=False) for task in tasks]
        for _ in as_completed(futures, loop=self.client.loop):
            done()
        return self.client.gather(futures)

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def make_engine(name: str, jobs: int = 1, scheduler: str | None = None):
    """The engine called ``name`` (ENGINES); ``jobs``: worker processes (0: one per core)."""
    jobs = jobs or os.cpu_count() or 1
    if name == "dask":
        return DaskEngine(jobs, scheduler)
    if name != "local":
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {name!r}")
    return LocalEngine(jobs)
