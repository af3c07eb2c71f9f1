"""Measuring engines: where a run's bounded private records live, and how they are counted.

The private table (private_table.py) holds an engine and asks it three things: which rows to keep
(contribution bounding), to hold the kept records (``hold`` gives the handle), and the exact answers of
queries on a handle; a method also runs its per-group synthesis through ``map``.  Nothing here draws
noise or charges the ledger: the private table does both before it asks for an answer.

* ``LocalEngine`` (the default): the records in this process; the marginals a step asks for are
  counted together in one parallel pass (lib/records/marginals.py ``count_marginals``).
* ``DaskEngine``: the records in row partitions on the workers of a dask.distributed cluster (one
  given by its scheduler's address, or a LocalCluster of ``jobs`` worker processes that the engine
  starts and stops); every answer is the sum of per-partition answers (map-reduce), and bounding
  shuffles the rows on the id so that an individual's rows, wherever they were, are bounded together.

Both engines keep the same rows (the same priorities, and ``keep_rows`` looks at one individual at a
time) and give the same answers, bit for bit: counts are integers, and real-valued sums (moments, linear
sums, gradients) add fixed-point rows exactly in any order (queries.exact_cell_sums).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from dpsyn.lib.records.domain import Domain
from dpsyn.lib.records.marginals import compact_codes, count_marginals
from dpsyn.lib.privacy.bounding import individual_codes, keep_rows
from dpsyn.lib.privacy.queries import (BY_INDIVIDUAL, DependencyScores, DomainRecords, Marginal, Query,
                                       independence_gap)
from dpsyn.lib.runtime.tasks import run_tasks
from dpsyn.lib.runtime.threads import one_blas_thread

ENGINES = ("local", "dask")
Task = Callable[[Any, Any], Any]  # fn(state, task): a method's task on public inputs


def exact_answers(records: DomainRecords, queries: Sequence[Query]) -> list[np.ndarray]:
    """Each query's exact answer on ``records``, the marginals among them counted in one pass."""
    marginals = list(dict.fromkeys(q for q in queries if type(q) is Marginal))
    specs = [(records.domain.indices(q.attrs), q.column_widths(), q.shape(records.domain)) for q in marginals]
    counted = dict(zip(marginals, count_marginals(records.codes, specs)))
    return [counted[q] if q in counted else q.answer(records) for q in queries]


def _additive(query: Query) -> tuple[Query, ...]:
    """Queries whose answers add up over any split of the rows and give ``query``'s answer (``_combine``)."""
    return tuple(Marginal(tuple(pair)) for pair in query.pairs) if type(query) is DependencyScores else (query,)


def _combine(query: Query, parts: list[np.ndarray]) -> np.ndarray:
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

    def hold(self, records: DomainRecords) -> DomainRecords:
        """The handle ``answers`` takes: here the records themselves."""
        return records

    def answers(self, held: DomainRecords, queries: Sequence[Query]) -> list[np.ndarray]:
        return exact_answers(held, queries)

    def map(self, fn: Task, state: Any, tasks: Sequence[Any], done: Callable[[], None] = lambda: None) -> list[Any]:
        """[fn(state, task) for task in tasks] in order, in ``jobs`` forked processes (lib/runtime/tasks.py)."""
        return run_tasks(fn, state, tasks, self.jobs, done)

    def close(self) -> None:
        pass


@one_blas_thread  # on a cluster's worker too: its BLAS threads are whatever it was started with
def _run_chunk(fn: Task, state: Any, chunk: list[Any]) -> list[Any]:
    return [fn(state, task) for task in chunk]


@dataclass(frozen=True)
class Part:
    """Rows of one partition of the private file, read and encoded on a worker: codes (n × d, the smallest
    unsigned type, column-major), raw values of the numeric columns a query may read, each row's individual
    (the ids' text as an Arrow string array) or None."""

    codes: np.ndarray
    numeric: Mapping[str, np.ndarray]
    ids: pa.Array | None


@dataclass(frozen=True)
class Loaded:
    """The private file's Parts, left on the cluster by ``DaskEngine.load``: their futures, their row counts,
    whether they carry individual ids, the engine that holds them and the numeric columns whose raw values
    they hold."""

    pieces: list[Any]  # futures of Parts
    rows: tuple[int, ...]
    has_ids: bool
    engine: Any
    raw_columns: tuple[str, ...] = ()


def _rows(part: Part) -> int:
    return len(part.codes)


def _bounding_frame(ids: pa.Array | np.ndarray, offset: int, priority: np.ndarray,
                    keys: np.ndarray | None) -> pd.DataFrame:
    """(id, row, priority, key0...) of rows offset.. of the file: what bounding needs of them.  The id is the
    individual's text itself (Arrow strings): the shuffle routes rows by a hash of it, but bounding groups
    them by the text (``keep_rows``), so two ids that share a hash only share a partition."""
    text = ids if isinstance(ids, pa.Array) else pa.array([str(v) for v in ids], pa.large_string())
    frame = pd.DataFrame({"id": pd.arrays.ArrowExtensionArray(text),
                          "row": np.arange(offset, offset + len(ids), dtype=np.int64), "priority": priority})
    if keys is not None:
        keys = np.asarray(keys)
        keys = keys.reshape(len(ids), keys.shape[-1] if keys.ndim == 2 else -1)  # (0, k) stays (0, k)
        for j in range(keys.shape[1]):
            frame[f"key{j}"] = keys[:, j].astype(np.int64)
    return frame


def _piece_bounding_frame(part: Part, offset: int, state: dict[str, Any], key_idx: list[int]) -> pd.DataFrame:
    """``_bounding_frame`` of a Part, its priorities the draws offset.. of the generator at ``state``."""
    generator = np.random.PCG64()
    generator.state = state  # type: ignore[assignment]  # numpy types it as its own TypedDict
    generator.advance(offset)  # one 64-bit step per float64 draw
    priority = np.random.Generator(generator).random(len(part.codes))
    if part.ids is None:
        raise ValueError("bounding needs each row's individual")
    return _bounding_frame(part.ids, offset, priority, part.codes[:, key_idx] if key_idx else None)


def _as_records(part: Part, dropped: np.ndarray | None, domain: Domain, by_individual: bool) -> DomainRecords:
    """The Part's rows but ``dropped`` (positions within it; None: none) as DomainRecords in the compact
    column-major layout (the Part's own arrays when it keeps all: no copy), with each row's individual (its
    id's text) where ``by_individual``."""
    codes, numeric, ids = part.codes, part.numeric, part.ids if by_individual else None
    if dropped is not None:
        keep = np.ones(len(codes), dtype=bool)
        keep[dropped] = False
        codes, numeric = codes[keep], {c: v[keep] for c, v in numeric.items()}
        ids = ids.filter(pa.array(keep)) if ids is not None else None
    return DomainRecords(compact_codes(codes, domain.sizes), dict(numeric), domain, ids)


def _by_individual_buckets(records: DomainRecords, buckets: int) -> list[tuple[np.ndarray, Any]]:
    """Held records' (codes, individuals) cut into ``buckets`` by a hash of each row's individual (the id's text or
    number): every row of one individual lands in one bucket, whichever partition it is held in.  The hash only
    routes rows; the queries group them by the individuals themselves (queries._individuals)."""
    people = records.individuals
    values = people.to_numpy(zero_copy_only=False) if isinstance(people, pa.Array) else np.asarray(people)
    route = (pd.util.hash_array(np.asarray(values, dtype=object)) % np.uint64(buckets)).astype(np.int64)
    codes = np.asarray(records.codes)
    return [(codes[route == b], values[route == b]) for b in range(buckets)]


def _by_individual_answers(pieces: list[tuple[np.ndarray, Any]], domain: Domain,
                           queries: Sequence[Query]) -> list[np.ndarray]:
    """The queries' answers on one bucket (``_by_individual_buckets``' pieces of it from every partition):
    all rows of its individuals."""
    codes = np.concatenate([c for c, _ in pieces]) if pieces else np.zeros((0, len(domain.names)), np.int64)
    people = np.concatenate([p for _, p in pieces]) if pieces else np.zeros(0, dtype=object)
    records = DomainRecords(codes, {}, domain, individual_codes(np.asarray(people, dtype=object)))
    return [q.answer(records) for q in queries]


def _part_dropped(frame: pd.DataFrame, theta: int, key_columns: list[str]) -> pd.Series:
    """The rows bounding drops among one shuffled partition's rows (all of each id's rows are in it)."""
    keys = frame[key_columns].to_numpy() if key_columns else None
    drop = np.ones(len(frame), dtype=bool)
    drop[keep_rows(frame["id"], theta, frame["priority"].to_numpy(), keys)] = False
    return frame["row"][drop]


def _distributed_loggers() -> list[str]:
    """The ``distributed`` logger and every child logger of it that exists."""
    return ["distributed"] + [name for name in logging.root.manager.loggerDict if name.startswith("distributed.")]


class DaskEngine:
    """Records in row partitions on a dask.distributed cluster (module doc).  ``scheduler``: the address
    of a running cluster to join; else a LocalCluster of ``jobs`` single-threaded worker processes, with
    no dashboard, closed by ``close``.  ``partitions``: row partitions per worker."""

    name = "dask"

    def __init__(self, jobs: int = 1, scheduler: str | None = None, partitions: int = 2):
        import dask
        from distributed import Client, LocalCluster
        self.jobs = max(1, int(jobs))
        self._cluster = None
        # distributed's own log lines are never shown: a worker's "Compute Failed" carries the failing task's
        # exception and traceback, which can name a private row's position or text.  What went wrong reaches
        # the user as the release's one error line (dataloader/reading.withheld)
        self._log_levels = {name: logging.getLogger(name).level for name in _distributed_loggers()}
        for name in self._log_levels:  # its children too: some (distributed.client) hold levels of their own
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        if scheduler is None:
            # one thread a worker, numba's included: the workers are the parallelism.  The workers keep the C
            # library's own memory trimming: dask's MALLOC_TRIM_THRESHOLD_ (memory handed back to the system
            # at every free past 64 KiB) made the per-group synthesis take 1.5 times the CPU
            environ = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ").items()
                       if k != "MALLOC_TRIM_THRESHOLD_"}
            with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
                # no dashboard; the scheduler's HTTP server (health checks) on a free loopback port, not 8787
                # (a warning on stderr whenever another cluster holds that)
                self._cluster = LocalCluster(n_workers=self.jobs, threads_per_worker=1, processes=True,
                                             dashboard_address=None, scheduler_kwargs={"dashboard_address":
                                                                                       "127.0.0.1:0"},
                                             silence_logs=logging.CRITICAL + 1, env={"NUMBA_NUM_THREADS": "1"})
            self.client = Client(self._cluster, set_as_default=False)
        else:
            self.client = Client(scheduler, set_as_default=False)
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))
        self.partitions = partitions * self.workers
        self._domain: Domain | None = None  # the held records' domain

    def keep(self, ids: np.ndarray, theta: int, priority: np.ndarray, keys: np.ndarray | None) -> np.ndarray:
        """``keep_rows`` after a shuffle on the id: every id's rows meet in one partition."""
        import dask.dataframe as dd
        frame = _bounding_frame(ids, 0, priority, keys)
        dropped = self._dropped(dd.from_pandas(frame, npartitions=self.partitions, sort=False), theta)
        return np.setdiff1d(np.arange(len(ids)), dropped, assume_unique=True)

    def _dropped(self, table: Any, theta: int) -> np.ndarray:
        """Sorted rows that bounding drops, of a dask frame of (id, row, priority, key...) shuffled on the id.
        Only these come back (few where few individuals pass theta), not the rows kept."""
        key_columns = [c for c in table.columns if c.startswith("key")]
        dropped = table.shuffle("id", method="tasks").map_partitions(_part_dropped, theta, key_columns,
                                                                     meta=("row", "int64"))
        rows: np.ndarray = np.sort(self.client.compute(dropped).result().to_numpy())
        return rows

    def load(self, parts: Sequence[Any], encode: Callable[[Any], tuple[Part, Any]], has_ids: bool,
             raw_columns: tuple[str, ...]) -> tuple[Loaded, list[Any]]:
        """Reads and encodes the private file on the workers: ``encode(part)`` of each dask-delayed text
        partition gives (Part, summary; the Part holding the values of ``raw_columns``); the Parts stay on the workers
        and only the summaries (what was outside the schema, how many rows) come back, in partition order."""
        from dask.delayed import delayed
        results = self.client.compute([delayed(encode)(part) for part in parts])
        pieces = [self.client.submit(itemgetter(0), r, pure=False) for r in results]
        summaries = self.client.gather([self.client.submit(itemgetter(1), r, pure=False) for r in results])
        rows = self.client.gather([self.client.submit(_rows, piece, pure=False) for piece in pieces])
        self.client.rebalance(pieces)  # reading may have run mostly on one worker: spread the rows' memory
        return Loaded(pieces, tuple(rows), has_ids, self, tuple(raw_columns)), summaries

    def hold_loaded(self, loaded: Loaded, domain: Domain, theta: int, bound_rng: np.random.Generator | None,
                    key_idx: list[int], by_individual: bool = False) -> list[Any]:
        """Bounded DomainRecords per partition, on the workers (the handle ``answers`` takes): with ids, each
        row's priority the one ``bound_rng.random(n)`` would give it in file order (so the same rows as
        the local engine), the rows shuffled on the id and cut by ``keep_rows``; only the dropped rows' numbers
        pass through this process.  ``by_individual``: each held row keeps its id's text."""
        import dask.dataframe as dd
        from dask.delayed import delayed
        self._domain = domain
        if bound_rng is None:  # no ids: nothing to bound, and no individual to hold
            if by_individual:
                raise ValueError("holding each row's individual needs ids")
            return [self.client.submit(_as_records, piece, None, domain, False, pure=False) for piece in loaded.pieces]
        offsets = np.r_[0, np.cumsum(loaded.rows)].astype(np.int64)
        state = bound_rng.bit_generator.state
        frames = [delayed(_piece_bounding_frame)(piece, int(offset), state, key_idx)
                  for piece, offset in zip(loaded.pieces, offsets[:-1])]
        meta = _bounding_frame(pa.array([], pa.large_string()), 0, np.zeros(0),
                               np.zeros((0, len(key_idx)), np.int64) if key_idx else None)
        dropped = self._dropped(dd.from_delayed(frames, meta=meta), theta)
        bounds = np.searchsorted(dropped, offsets)
        return [self.client.submit(_as_records, piece, dropped[a:b] - offset if b > a else None, domain, by_individual,
                                   pure=False)
                for piece, a, b, offset in zip(loaded.pieces, bounds[:-1], bounds[1:], offsets[:-1])]

    def hold(self, records: DomainRecords) -> list[Any]:
        """Scatters ``records`` to the workers in contiguous row partitions; their futures are the handle."""
        self._domain = records.domain
        bounds = np.linspace(0, len(records.codes), self.partitions + 1).astype(np.int64)
        people = records.individuals
        parts = [DomainRecords(records.codes[a:b], {c: v[a:b] for c, v in records.numeric.items()}, records.domain,
                               people[a:b] if people is not None else None)
                 for a, b in zip(bounds[:-1], bounds[1:]) if b > a or len(records.codes) == 0]
        futures: list[Any] = self.client.scatter(parts)
        return futures

    def answers(self, held: list[Any], queries: Sequence[Query]) -> list[np.ndarray]:
        """Per query, the sum over partitions of its additive parts' answers, added in partition order; queries
        over an individual's rows (BY_INDIVIDUAL) on the rows routed to buckets by their individual, so that each
        bucket holds all of its individuals' rows."""
        own: list[Query] = [q for q in queries if isinstance(q, BY_INDIVIDUAL)]
        rest: list[Query] = [q for q in queries if not isinstance(q, BY_INDIVIDUAL)]
        answers: dict[Query, np.ndarray] = {}
        if own:
            answers.update(zip(own, self._by_individual(held, own)))
        if rest:
            answers.update(zip(rest, self._additive_answers(held, rest)))
        return [answers[q] for q in queries]

    def _by_individual(self, held: list[Any], queries: Sequence[Query]) -> list[np.ndarray]:
        """Answers of queries over an individual's rows: each partition's rows routed to buckets by their
        individual, every bucket answered on all its rows, the answers added in bucket order."""
        buckets = self.partitions
        pieces = [self.client.submit(_by_individual_buckets, part, buckets, pure=False) for part in held]
        domain = self._domain
        answered = [self.client.submit(_by_individual_answers,
                                       [self.client.submit(itemgetter(b), piece, pure=False) for piece in pieces],
                                       domain, queries, pure=False) for b in range(buckets)]
        partial = self.client.gather(answered)
        return [sum(answers[i] for answers in partial) for i in range(len(queries))]

    def _additive_answers(self, held: list[Any], queries: Sequence[Query]) -> list[np.ndarray]:
        flat = [part for q in queries for part in _additive(q)]
        partial = self.client.gather([self.client.submit(exact_answers, p, flat, pure=False) for p in held])
        sums = [sum(answers[i] for answers in partial) for i in range(len(flat))]
        out, i = [], 0
        for q in queries:
            k = len(_additive(q))
            out.append(_combine(q, sums[i:i + k]))
            i += k
        return out

    def map(self, fn: Task, state: Any, tasks: Sequence[Any], done: Callable[[], None] = lambda: None) -> list[Any]:
        """[fn(state, task) for task in tasks] in order, in cluster tasks of a few each (about eight per
        worker process), ``state`` sent to every worker once."""
        from distributed import as_completed
        shared = self.client.scatter(state, broadcast=True)
        size = max(1, len(tasks) // (8 * self.workers))
        chunks = [list(tasks[i:i + size]) for i in range(0, len(tasks), size)]
        futures = [self.client.submit(_run_chunk, fn, shared, chunk, pure=False) for chunk in chunks]
        sizes = dict(zip((f.key for f in futures), map(len, chunks)))
        for future in as_completed(futures, loop=self.client.loop):
            for _ in range(sizes[future.key]):
                done()
        return [out for part in self.client.gather(futures) for out in part]

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        for name, level in self._log_levels.items():
            logging.getLogger(name).setLevel(level)


def make_engine(name: str, jobs: int = 1, scheduler: str | None = None) -> LocalEngine | DaskEngine:
    """The engine called ``name`` (ENGINES) with ``jobs`` worker processes (or the cluster at ``scheduler``)."""
    if name == "dask":
        return DaskEngine(jobs, scheduler)
    if name != "local":
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {name!r}")
    return LocalEngine(jobs)
