"""Relaxed projection (RAP++, Vietri et al. 2022): fit a relaxed table to noisy answers.

The paper: "Private Synthetic Data for Multitask Learning and Marginal Queries".
The relaxed table has n rows.  A categorical column is a probability vector per row (a
softmax of trainable logits; "frozen" columns, such as group codes, keep fixed one-hot
rows); a numeric column is a value in [0, 1] per row plus, where the column may be null,
a trainable probability of being null.  A query is the expected answer of a count query
on this table, as fractions of n:

* a categorical marginal over ``by``: the mean over rows of the product of the rows'
  probabilities of each cell (RAP's product queries);
* interval counts of the projection w·x of numeric ``columns`` cut at ``cuts``, per cell
  of ``by`` (mixed marginals and class-conditional linear thresholds): the threshold
  1[w·x <= c] is relaxed to the sigmoid 1 / (1 + exp(-beta (c - w·x))), an interval is the
  difference of two, and the null slot holds the probability that a column is null.

``project`` minimises the weighted squared error sum_q w_q ||q(table) - a_q||² with Adam,
starting at inverse temperature ``beta``, and doubles beta whenever the gradient norm falls
below ``tolerance`` times its value at the start of the call (the paper's tempered
annealing), up to ``max_beta``.  Gradients are derived by hand (tests check them against
finite differences), so the code needs only an array module: ``xp`` is numpy by default,
or cupy for a GPU (the same code path; ``array_module``).

Post-processing only: this module sees public descriptions and noisy answers, never data.
"""
from __future__ import annotations

import contextlib
import math
import string
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.tuning import T

DEVICES = ("cpu", "gpu")
FAR = 1e4  # an edge beyond every projection's range: its sigmoid is exactly 0 or 1 in float32


class DeviceUnavailable(RuntimeError):
    """A GPU was asked for where none can be used."""


def array_module(device: str):
    """numpy for ``cpu``; cupy for ``gpu`` (DeviceUnavailable, one line, when cupy or a GPU is missing)."""
    if device == "cpu":
        return np
    if device != "gpu":
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    try:
        import cupy
    except ImportError:
        raise DeviceUnavailable("--device gpu needs cupy (pip install 'dpsyn[gpu]') and an NVIDIA GPU; "
                                "cupy is not installed") from None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise DeviceUnavailable("--device gpu: no GPU is visible to cupy")
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise DeviceUnavailable(f"--device gpu: no usable GPU ({exc})") from None
    return cupy


def to_numpy(a) -> np.ndarray:
    """A host numpy copy of an array of either backend."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


@dataclass(frozen=True)
class RelaxedQuery:
    """A query on the relaxed table: ``by`` (categorical column positions), and for interval
    counts the numeric column positions ``columns``, their ``direction`` and increasing ``cuts``
    (none for a plain marginal).  Its answer has shape (cells of by) × slots, slots being 1 for
    a marginal and len(cuts) + 2 for interval counts (intervals, then the null slot).

    ``bins``: (numeric position, increasing interior edges, size) triples that split each cell of
    ``by`` further, in order: a value's bin is the number of edges below it, a null's is size − 1
    (a numeric column's codes in the private table).  Only lib/estimation/record_fit.py reads them; the
    projection refuses them (a relaxed value's bin has no useful gradient)."""

    by: tuple[int, ...]
    columns: tuple[int, ...] = ()
    direction: tuple[float, ...] = ()
    cuts: tuple[float, ...] = ()
    bins: tuple[tuple[int, tuple[float, ...], int], ...] = ()

    @property
    def slots(self) -> int:
        return len(self.cuts) + 2 if self.columns else 1


@dataclass
class RelaxedTable:
    """The relaxed table's parameters (arrays of the backend ``xp``): ``logits[i]`` (n × k_i) of
    trainable categorical column i, or ``None`` with ``frozen[i]`` (n × k_i probabilities) for a
    fixed one; ``values`` (n × r) of the numeric columns in [0, 1]; ``null_logits`` (n × r),
    used only where ``nullable``."""

    xp: Any
    logits: list
    frozen: dict
    values: Any
    null_logits: Any
    nullable: tuple[bool, ...]

    @property
    def rows(self) -> int:
        return int(self.values.shape[0])

    @property
    def sizes(self) -> tuple[int, ...]:
        """The number of categories of each categorical column."""
        return tuple(int((self.frozen[i] if logits is None else logits).shape[1])
                     for i, logits in enumerate(self.logits))

    def probabilities(self) -> list:
        """Per categorical column, its n × k probabilities."""
        xp = self.xp
        out = []
        for i, logits in enumerate(self.logits):
            if logits is None:
                out.append(self.frozen[i])
            else:
                e = xp.exp(logits - logits.max(axis=1, keepdims=True))
                out.append(e / e.sum(axis=1, keepdims=True))
        return out

    def null_probabilities(self):
        """n × r probabilities of being null (0 where a column is not nullable)."""
        xp = self.xp
        p = 1.0 / (1.0 + xp.exp(-xp.clip(self.null_logits, -15.0, 15.0)))  # never exactly 0 or 1 in float32
        mask = xp.asarray(np.asarray(self.nullable, dtype=bool))
        return xp.where(mask[None, :], p, xp.zeros_like(p))


def new_table(xp, categorical: list, numeric_values: np.ndarray, null_probability: np.ndarray,
              nullable: tuple[bool, ...], dtype=np.float32) -> RelaxedTable:
    """A relaxed table from host arrays: ``categorical[i]`` is (n × k) starting probabilities, with
    ``("frozen", probabilities)`` for a fixed column; numeric values (n × r, r may be 0) in [0, 1] and
    null probabilities (n × r) to start from."""
    logits: list[Any] = []
    frozen: dict[int, Any] = {}
    for i, c in enumerate(categorical):
        if isinstance(c, tuple):
            frozen[i] = xp.asarray(np.asarray(c[1], dtype=dtype))
            logits.append(None)
        else:
            logits.append(xp.asarray(np.log(np.clip(np.asarray(c, dtype=np.float64), 1e-6, 1.0)).astype(dtype)))
    p = np.clip(np.asarray(null_probability, dtype=np.float64), 1e-6, 1 - 1e-6)
    return RelaxedTable(xp, logits, frozen, xp.asarray(np.asarray(numeric_values, dtype=dtype)),
                        xp.asarray(np.log(p / (1 - p)).astype(dtype)), tuple(nullable))


def _row_factor(xp, probs: list, by: tuple[int, ...], n: int):
    """n × cells: each row's probability of each cell of ``by`` (C order)."""
    if not by:
        return xp.ones((n, 1), dtype=probs[0].dtype if probs else np.float32)
    f = probs[by[0]]
    for b in by[1:]:
        f = (f[:, :, None] * probs[b][:, None, :]).reshape(n, -1)
    return f


def _factor_grads(xp, probs: list, by: tuple[int, ...], d_factor, n: int) -> list:
    """d loss / d probs[b] for each b in ``by``, given d loss / d row factor (n × cells)."""
    if len(by) == 1:
        return [d_factor]
    letters = string.ascii_lowercase[:len(by)]
    shaped = d_factor.reshape((n,) + tuple(probs[b].shape[1] for b in by))
    grads = []
    for j in range(len(by)):
        others = [i for i in range(len(by)) if i != j]
        spec = "z" + letters + "," + ",".join("z" + letters[i] for i in others) + "->z" + letters[j]
        grads.append(xp.einsum(spec, shaped, *[probs[by[i]] for i in others]))
    return grads


def _shared_axes(queries: list[RelaxedQuery], interval: list[int]) -> tuple[dict[int, int], list[RelaxedQuery]]:
    """Each interval query's axis (a projection w·x with its cuts) and each axis's first query:
    queries with the same columns, direction and cuts share one, so that their memberships are
    computed once (rap measures each numeric column at the same cuts per value of every categorical
    column), unless they have the same ``by``, whose columns of the membership matrix must not repeat."""
    axis_of: dict[int, int] = {}
    axes: list[RelaxedQuery] = []
    shared: dict[tuple, int] = {}
    taken: dict[tuple[int, ...], set] = {}
    for i in interval:
        q = queries[i]
        key = (q.columns, q.direction, q.cuts)
        a, used = shared.get(key), taken.setdefault(q.by, set())
        if a is None or a in used:
            a = len(axes)
            axes.append(q)
            shared.setdefault(key, a)
        used.add(a)
        axis_of[i] = a
    return axis_of, axes


class Workload:
    """A list of queries compiled into index arrays, so that one pass of a few matrix products
    answers them all.  Interval queries are laid out on axes (a projection w·x and its cuts, shared
    by queries that have the same ones: ``_shared_axes``); each axis's cuts sit between two far
    edges, so one sigmoid matrix (edges × n) gives every slot as the difference of consecutive rows.
    Queries with the same ``by`` share one row factor and one product with the memberships.  Given
    ``fits`` (one per query), their targets and weights are laid out the same way, on the table's
    backend, once."""

    def __init__(self, table: RelaxedTable, queries: list[RelaxedQuery], fits: list[Target[RelaxedQuery]] | None = None):
        if any(q.bins for q in queries):
            raise ValueError("queries by numeric bins are for lib/estimation/record_fit.py, not the projection")
        xp, dtype, r = table.xp, table.values.dtype, table.values.shape[1]
        interval = [i for i, q in enumerate(queries) if q.columns]
        axis_of, axis_query = _shared_axes(queries, interval)
        a_count = len(axis_query)
        # each axis's edges: its cuts between two far edges whose sigmoids are exactly 0 and 1, so that
        # the slots are differences of consecutive rows (with one unused row between two axes)
        w, c = np.zeros((r, a_count)), np.zeros((r, a_count))
        edges: list[float] = []
        edge_axis: list[int] = []
        start: list[int] = []
        for a, q in enumerate(axis_query):
            w[list(q.columns), a] = q.direction
            c[list(q.columns), a] = 1.0
            start.append(len(edges))
            edges += [-FAR] + list(q.cuts) + [FAR]
            edge_axis += [a] * (len(q.cuts) + 2)
        self.axes, self.edges = a_count, len(edges)
        self.w_edges = xp.asarray(w[:, edge_axis].T.astype(dtype))  # edges × numeric columns
        self.edge_values = xp.asarray(np.asarray(edges, dtype=dtype))[:, None]
        self.c = xp.asarray(c.astype(dtype))
        nullable = np.asarray(table.nullable, dtype=bool)
        self.nullable = bool(a_count) and bool((c[nullable] > 0).any())  # some axis has a nullable column
        self.slot_axis = xp.asarray(np.asarray(edge_axis[:-1], dtype=np.int64))  # per slot row: its axis
        self.slot_sum = xp.asarray((np.asarray(edge_axis[:-1])[:, None] == np.arange(a_count)[None, :]).astype(dtype))
        # interval queries by ``by``, with their columns of M = [interval slots | null slots]; marginals by ``by``
        self.groups: dict[tuple[int, ...], tuple[list[int], Any]] = {}
        self.marginals: dict[tuple[int, ...], list[int]] = {}
        for i, q in enumerate(queries):
            if not q.columns:
                self.marginals.setdefault(q.by, []).append(i)
                continue
            a = axis_of[i]
            members, columns = self.groups.setdefault(q.by, ([], []))
            members.append(i)
            columns += list(range(start[a], start[a] + len(q.cuts) + 1)) + [self.edges - 1 + a]
        self.groups = {by: (members, xp.asarray(np.asarray(columns, dtype=np.int64)))
                       for by, (members, columns) in self.groups.items()}
        self.targets: dict[Any, tuple[Any, Any]] = {} if fits is None else {  # per marginal / interval group: targets and weights
            **{("marginal", by): _marginal_targets(xp, table, [fits[i] for i in members])
               for by, members in self.marginals.items()},
            **{by: _targets(xp, [fits[i] for i in members], dtype) for by, (members, _) in self.groups.items()}}

    def memberships(self, table: RelaxedTable, nulls, beta: float):
        """The soft membership matrix ((edges - 1 + axes) × n: one row per slot, with one unused row
        between two axes, then one null slot per axis; rows, so that the gathers of ``groups`` copy
        whole rows) and what the backward pass needs; None without intervals."""
        xp, n = table.xp, table.rows
        if not self.axes:
            return None, None
        edge = self.w_edges @ table.values.T  # edges × n: w·x of each edge's axis
        xp.subtract(self.edge_values, edge, out=edge)
        edge *= 0.5 * beta  # in place: sigmoid(beta (edge - w·x)) = (1 + tanh(beta (edge - w·x) / 2)) / 2
        xp.tanh(edge, out=edge)
        edge += 1.0
        edge *= 0.5  # soft 1[w·x <= edge]
        member = xp.empty((self.edges - 1 + self.axes, n), dtype=edge.dtype)
        slots = member[:self.edges - 1]
        xp.subtract(edge[1:], edge[:-1], out=slots)
        if not self.nullable:
            member[self.edges - 1:] = 0.0
            return member, (edge, None, None)
        m = slots.copy()
        keep = xp.exp(self.c.T @ xp.log1p(-nulls).T)  # probability that no column of the axis is null
        slots *= keep[self.slot_axis]
        xp.subtract(1.0, keep, out=member[self.edges - 1:])
        return member, (edge, m, keep)

    def backward(self, table: RelaxedTable, nulls, d_member, saved, beta: float):
        """(d loss / d values, d loss / d null logits or None where no axis has a nullable column) from
        d loss / d memberships."""
        xp = table.xp
        edge, m, keep = saved
        d_slots = d_member[:self.edges - 1]
        if self.nullable:
            d_null = d_member[self.edges - 1:]
            d_log = (self.c @ ((self.slot_sum.T @ (d_slots * m) - d_null) * keep)).T  # d loss / d log(1 - p)
            d_slots = d_slots * keep[self.slot_axis]
            d_nulls = -d_log * nulls
        else:
            d_nulls = None  # no query reads a nullable column: its null probabilities have no gradient
        d_edge = xp.empty_like(edge)  # slot i is edge i + 1 minus edge i
        d_edge[0] = 0.0
        d_edge[1:] = d_slots
        d_edge[:-1] -= d_slots
        d_edge *= edge
        d_edge -= d_edge * edge  # times s (1 - s)
        return -beta * (self.w_edges.T @ d_edge).T, d_nulls


def _marginal(xp, probs: list, by: tuple[int, ...], n: int):
    """The relaxed marginal over ``by`` (fractions, shape of its cells): matrix products, no n × cells array."""
    if not by:
        return xp.ones((), dtype=probs[0].dtype if probs else np.float32)
    if len(by) == 1:
        return probs[by[0]].sum(axis=0) / n
    if len(by) == 2:
        return probs[by[0]].T @ probs[by[1]] / n
    letters = string.ascii_lowercase[:len(by)]
    return xp.einsum(",".join("z" + c for c in letters) + "->" + letters, *[probs[b] for b in by],
                     optimize=True) / n


def _marginal_grads(xp, probs: list, by: tuple[int, ...], g, n: int) -> list:
    """d loss / d probs[b] for each b in ``by``, given d loss / d marginal ``g`` (shape of its cells)."""
    if len(by) == 1:
        return [xp.broadcast_to(g[None, :], (n, g.shape[0])) / n]
    if len(by) == 2:
        return [probs[by[1]] @ g.T / n, probs[by[0]] @ g / n]
    letters = string.ascii_lowercase[:len(by)]
    out = []
    for j in range(len(by)):
        others = [i for i in range(len(by)) if i != j]
        spec = letters + "," + ",".join("z" + letters[i] for i in others) + "->z" + letters[j]
        out.append(xp.einsum(spec, g, *[probs[by[i]] for i in others], optimize=True) / n)
    return out


def answers(table: RelaxedTable, queries: list[RelaxedQuery], beta: float) -> list[np.ndarray]:
    """Each query's relaxed answer (fractions, cells × slots) as host arrays."""
    work = Workload(table, queries)
    xp, probs, nulls, n = table.xp, table.probabilities(), table.null_probabilities(), table.rows
    member, _ = work.memberships(table, nulls, beta)
    out: list = [None] * len(queries)
    for by, members in work.marginals.items():
        block = to_numpy(_marginal(xp, probs, by, n)).reshape(-1, 1)
        for i in members:
            out[i] = block
    for by, (members, columns) in work.groups.items():
        block = to_numpy(member[columns] @ _row_factor(xp, probs, by, n) / n)  # slots × cells
        start = 0
        for i in members:
            out[i] = block[start:start + queries[i].slots].T
            start += queries[i].slots
    return out


def loss_and_grads(table: RelaxedTable, fits: list[Target[RelaxedQuery]], beta: float,
                   work: Workload | None = None) -> tuple[float, dict]:
    """sum_q w_q ||q(table) - target_q||² and its gradients by parameter name ("cat{i}", "values",
    "nulls"); ``work``: the fits compiled (``Workload(table, queries, fits)``), when the caller keeps one."""
    xp, n = table.xp, table.rows
    work = work or Workload(table, [f.query for f in fits], fits)
    probs, nulls = table.probabilities(), table.null_probabilities()
    member, saved = work.memberships(table, nulls, beta)
    d_probs: list = [None] * len(probs)

    def add(by, grads):
        for b, d in zip(by, grads):
            d_probs[b] = d if d_probs[b] is None else d_probs[b] + d
    loss = 0.0
    for by, members in work.marginals.items():
        a = _marginal(xp, probs, by, n)
        target, weight = work.targets[("marginal", by)]
        residual = a[None] - target  # fits × cells
        loss = loss + (weight * residual ** 2).sum()
        if by:
            add(by, _marginal_grads(xp, probs, by, (2.0 * weight * residual).sum(axis=0), n))
    d_member: Any = xp.zeros_like(member) if member is not None else None
    for by, (members, columns) in work.groups.items():
        f = _row_factor(xp, probs, by, n)
        target, weight = work.targets[by]
        selected = member[columns]
        residual = selected @ f / n - target  # slots × cells
        loss = loss + (weight * residual ** 2).sum()
        g = (2.0 / n) * weight * residual
        d_member[columns] += g @ f.T
        if by:
            add(by, _factor_grads(xp, probs, by, selected.T @ g, n))
    grads = {}
    for i, (logits, p, d) in enumerate(zip(table.logits, probs, d_probs)):
        if logits is not None and d is not None:
            grads[f"cat{i}"] = p * (d - (d * p).sum(axis=1, keepdims=True))
    if saved is not None:
        grads["values"], d_nulls = work.backward(table, nulls, d_member, saved, beta)
        if d_nulls is not None:
            grads["nulls"] = d_nulls
    return float(loss), grads


def _marginal_targets(xp, table: RelaxedTable, fits: list[Target[RelaxedQuery]]):
    """The targets of fits of one marginal, stacked (fits × the marginal's cells shape), and their weights."""
    shape = tuple(table.sizes[b] for b in fits[0].query.by)
    dtype = table.values.dtype
    targets = np.stack([np.asarray(f.noisy, dtype=np.float64).reshape(shape) for f in fits])
    weights = np.array([f.weight for f in fits], dtype=np.float64).reshape((-1,) + (1,) * len(shape))
    return xp.asarray(targets.astype(dtype)), xp.asarray(weights.astype(dtype))


def _targets(xp, fits: list[Target[RelaxedQuery]], dtype):
    """The fits' targets stacked (their slots × cells) and a matching column of weights."""
    targets = np.concatenate([np.asarray(f.noisy, dtype=np.float64).reshape(-1, f.query.slots).T for f in fits])
    weights = np.concatenate([np.full(f.query.slots, f.weight) for f in fits])
    return xp.asarray(targets.astype(dtype)), xp.asarray(weights.astype(dtype))[:, None]


def _parameter(table: RelaxedTable, name: str):
    if name.startswith("cat"):
        return table.logits[int(name[3:])]
    return table.values if name == "values" else table.null_logits


def _set_parameter(table: RelaxedTable, name: str, value) -> None:
    if name.startswith("cat"):
        table.logits[int(name[3:])] = value
    elif name == "values":
        table.values = table.xp.clip(value, -T.relaxed_margin, 1.0 + T.relaxed_margin)
    else:
        table.null_logits = value


def _grad_norm(grads: dict) -> float:
    return math.sqrt(float(sum((g ** 2).sum() for g in grads.values())))  # one transfer from a GPU


@dataclass(frozen=True)
class Schedule:
    """How ``project`` steps: at most ``steps`` steps per inverse temperature, beta doubling from ``beta`` to
    ``max_beta`` whenever the gradient norm is below ``tolerance`` times the first one; step size ``lr`` for
    logits, and for numeric values (in [0, 1]) ``value_lr`` at the first temperature, shrinking as 1/beta
    with the sigmoids' width (larger steps at a steep sigmoid throw values back and forth across the cuts
    and, clipped, onto the bounds)."""

    beta: float = 8.0
    max_beta: float = 1024.0
    tolerance: float = 1e-3
    steps: int = 60
    lr: float = 0.3
    value_lr: float = 0.05


def project(table: RelaxedTable, fits: list[Target[RelaxedQuery]], schedule: Schedule = Schedule()) -> dict:
    """Adam on the weighted squared error to ``fits`` (module doc), stepping as ``schedule`` says.  Changes
    ``table`` in place; returns the final loss (at its max_beta) and the steps taken."""
    xp = table.xp
    work = Workload(table, [f.query for f in fits], fits)
    # numpy: one BLAS thread, since the matrices are small (rows × a few hundred columns) and more threads
    # cost more than they gain (adult_raw, eps 1, 2 cores: 134 s with two, 117 s with one)
    with threadpool_limits(1, user_api="blas") if xp is np else contextlib.nullcontext():
        return _adam(table, fits, work, schedule)


def _adam(table: RelaxedTable, fits: list[Target[RelaxedQuery]], work: Workload, schedule: Schedule) -> dict:
    """project's loop (its doc)."""
    beta, max_beta, tolerance = schedule.beta, schedule.max_beta, schedule.tolerance
    steps, lr, value_lr = schedule.steps, schedule.lr, schedule.value_lr
    xp, start = table.xp, beta
    b1, b2, eps = 0.9, 0.999, 1e-8
    first, taken = None, 0
    adam: dict[str, list[Any]] = {}  # per parameter: first and second moments, steps taken
    while True:
        for _ in range(steps):
            loss, grads = loss_and_grads(table, fits, beta, work)
            norm = _grad_norm(grads)
            first = norm if first is None else first
            if norm <= tolerance * first:
                break
            taken += 1
            for name, g in grads.items():
                state = adam.setdefault(name, [xp.zeros_like(g), xp.zeros_like(g), 0])
                state[2] += 1
                state[0] = b1 * state[0] + (1 - b1) * g
                state[1] = b2 * state[1] + (1 - b2) * g * g
                m_hat = state[0] / (1 - b1 ** state[2])
                v_hat = state[1] / (1 - b2 ** state[2])
                rate = value_lr * start / beta if name == "values" else lr
                _set_parameter(table, name, _parameter(table, name) - rate * m_hat / (xp.sqrt(v_hat) + eps))
        if beta >= max_beta:
            break
        beta = min(2 * beta, max_beta)
    loss, _ = loss_and_grads(table, fits, beta, work)
    return {"loss": loss, "steps": taken}


def sample(table: RelaxedTable, rows: np.ndarray, rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """Discrete records from relaxed rows ``rows`` (indices, repeats allowed, each drawn afresh):
    categorical codes drawn from each row's probabilities, numeric values as they are ([0, 1]),
    NaN with the row's null probability.  Returns (codes per categorical column, m × r values)."""
    codes = []
    for p in table.probabilities():
        p = to_numpy(p).astype(np.float64)[rows]
        cum = np.cumsum(p, axis=1)
        u = rng.random(len(rows))[:, None] * cum[:, -1:]
        codes.append(np.minimum((u > cum).sum(axis=1), p.shape[1] - 1).astype(np.int32))
    values = to_numpy(table.values).astype(np.float64)[rows]
    null = rng.random(values.shape) < to_numpy(table.null_probabilities()).astype(np.float64)[rows]
    values[null] = np.nan
    return codes, values
