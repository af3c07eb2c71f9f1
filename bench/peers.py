"""The peers users would otherwise pick: private-pgm's MST and AIM, on mbi 2.0's estimation engine.

mbi 2.0 (PyPI) ships only the graphical-model engine; MST (McKenna, Miklau and Sheldon
2021) and AIM (McKenna et al. 2022) live in the private-pgm repository's mechanisms/.
They are re-implemented here on mbi's API after those scripts, with their reference settings:

* MST: rho in thirds; noisy 1-way marginals (sigma = sqrt(3/(2 rho))), domain compression
  (values with noisy count < 3 sigma merged), a maximum spanning tree of pairs chosen by the
  exponential mechanism on the L1 error of the independent model (2,500 mirror-descent iterations;
  r - 1 draws at eps = sqrt(8 (rho/3) / (r - 1))), noisy 2-way marginals of the tree edges, mirror
  descent for 10,000 iterations (mechanisms/mst.py).
* AIM: workload all 2-way marginals; 10% of each round's rho for the exponential
  mechanism, 90% for a Gaussian measurement; 16·d rounds at the start; the step size
  doubles when a measurement changes the model less than its noise; candidates whose
  junction tree would exceed max_model_size (80) · (rho used / rho) MB are skipped; every
  estimation (each round's and the last) max_iters = 1,000 iterations (mechanisms/aim.py's
  defaults).  No time cap by default, as the reference; with ``time_cap`` seconds, once they have
  passed the next round spends the whole remaining budget (AIM's own last-round rule), so the
  guarantee is kept, and a table made so says it ran below the reference settings.  AIM prints each round's choice and its noise sd,
  and a summary, on stderr.
  After each round's estimation JAX's caches are cleared: mbi compiles new programs every round,
  and their code, kept, grew the process's memory maps by about 100 a second on the demo until
  LLVM could map no more (``vm.max_map_count`` 65,530: "Cannot allocate memory" after about
  6 minutes); cleared, they stayed between 1,500 and 4,142 in a 400 s run, at the cost of recompiling
  (bench/RESULTS.md).

The models' marginals on candidate cliques (AIM's candidates, MST's pairs under the independent
model) are computed in numpy (``_project``: mbi's ``model.project`` numbers to 1e-14 of the total), since mbi
runs a new JAX program per projection; a pair no model marginal holds is contracted along the model's junction
tree (``_Tree``), not by one einsum over every potential, which took over 50 minutes for one round of uncapped AIM
on adult (the whole run now takes 7 minutes on one core).

Both take integer codes (the columns our encoder produces, so every method sees the same
domain), treat group columns as ordinary attributes and use numpy's floating-point Gaussian noise,
as private-pgm does.  ``theta`` is the most rows an individual has in ``codes`` (the caller truncates):
every noise sd and every selection's quality sensitivity is multiplied by it, as the release's
contribution bounding does (bench/run_bench.py runs sprint2 at theta 7).  Benchmark code only: the
release tool never imports it.
Needs requirements-bench.txt (mbi, jax).
"""
from __future__ import annotations

import itertools
import math
import sys
import time

import numpy as np

from dpsyn.lib.privacy.accounting import rho_from_eps_delta

MST_SELECT_ITERS = 2500  # mechanisms/mst.py: the independent model that scores the pairs
MST_ITERS = 10000        # mechanisms/mst.py: the final estimation
AIM_ITERS = 1000         # mechanisms/aim.py's max_iters: every estimation, the last one included
AIM_MAX_MODEL_MB = 80    # mechanisms/aim.py's max_model_size


def _mbi():
    import jax
    jax.config.update("jax_enable_x64", True)
    import mbi
    return mbi


def _measure(mbi, data, cliques, sigma, rng):
    out = []
    for cl in cliques:
        x = np.asarray(data.project(cl).datavector())
        out.append(mbi.LinearMeasurement(x + rng.normal(0, sigma, x.size), cl, sigma))
    return out


def _compress(mbi, codes, sizes, names, oneway, sigma):
    """MST's domain compression: values with noisy count < 3 sigma of a column become one value."""
    new_codes, new_sizes, measurements, supports = codes.copy(), list(sizes), [], {}
    for j, m in enumerate(oneway):
        y = np.asarray(m.noisy_measurement)
        sup = y >= 3 * sigma
        if sup.all():
            measurements.append(m)
            continue
        supports[j] = sup
        mapping = np.full(len(y), sup.sum())
        mapping[sup] = np.arange(sup.sum())
        new_codes[:, j] = mapping[codes[:, j]]
        new_sizes[j] = int(sup.sum()) + 1
        merged = len(y) - int(sup.sum())
        weights = np.ones(new_sizes[j])
        weights[-1] = 1 / math.sqrt(merged)
        y2 = np.append(y[sup], y[~sup].sum() / math.sqrt(merged))
        measurements.append(mbi.LinearMeasurement(y2, (names[j],), sigma, query=mbi.WeightedQuery(weights)))
    return new_codes, new_sizes, measurements, supports


def _uncompress(codes, supports, rng):
    out = codes.copy()
    for j, sup in supports.items():
        kept, merged = np.flatnonzero(sup), np.flatnonzero(~sup)
        col = codes[:, j]
        other = col == len(kept)
        out[~other, j] = kept[col[~other]]
        out[other, j] = rng.choice(merged, other.sum())
    return out


def _dataset(mbi, codes, sizes, names):
    domain = mbi.Domain(names, sizes)
    return mbi.Dataset({n: codes[:, j] for j, n in enumerate(names)}, domain), domain


def _to_codes(synth, names) -> np.ndarray:
    return np.column_stack([np.asarray(synth.data[n]) for n in names]).astype(np.int32)


def _exponential(qualities: np.ndarray, epsilon: float, sensitivity: float, rng) -> int:
    p = np.exp(0.5 * epsilon / sensitivity * (qualities - qualities.max()))
    return int(rng.choice(len(p), p=p / p.sum()))


def mst(codes: np.ndarray, sizes, names, epsilon: float, delta: float, rng: np.random.Generator,
        theta: int = 1) -> np.ndarray:
    """MST synthetic codes, (epsilon, delta)-DP for at most ``theta`` rows per individual."""
    mbi = _mbi()
    names, sizes = list(names), [int(s) for s in sizes]
    rho = rho_from_eps_delta(epsilon, delta)
    sigma = theta * math.sqrt(3 / (2 * rho)) * math.sqrt(len(names))  # rho/3 over the d 1-way marginals
    data, domain = _dataset(mbi, codes, sizes, names)
    oneway = _measure(mbi, data, [(n,) for n in names], sigma, rng)
    small, small_sizes, log1, supports = _compress(mbi, codes, sizes, names, oneway, sigma)
    data, domain = _dataset(mbi, small, small_sizes, names)
    independent = mbi.estimation.MirrorDescent().estimate(domain, log1, iters=MST_SELECT_ITERS)
    pairs = list(itertools.combinations(names, 2))
    errors = {e: float(np.abs(np.asarray(data.project(e).datavector()) - _project(independent, e)).sum())
              for e in pairs}
    parent = {n: n for n in names}

    def root(n):
        while parent[n] != n:
            n = parent[n]
        return n
    edges, eps_each = [], math.sqrt(8 * (rho / 3) / (len(names) - 1))
    for _ in range(len(names) - 1):  # Kruskal with noisy choices (permute-and-flip ~ exponential mechanism)
        cand = [e for e in pairs if root(e[0]) != root(e[1])]
        e = cand[_exponential(np.array([errors[c] for c in cand]), eps_each, float(theta), rng)]
        edges.append(e)
        parent[root(e[0])] = root(e[1])
    sigma2 = theta * math.sqrt(3 / (2 * rho)) * math.sqrt(len(edges))
    log2 = _measure(mbi, data, edges, sigma2, rng)
    model = mbi.estimation.MirrorDescent().estimate(domain, log1 + log2, iters=MST_ITERS)
    return _uncompress(_to_codes(model.synthetic_data(), names), supports, rng)


def _project(model, clique) -> np.ndarray:
    """``model.project(clique).datavector()`` (counts, C order), computed in numpy: summed out of the
    smallest of the model's marginals that holds the clique, else from the model's junction tree (``_Tree``).
    mbi sums each projection in a new JAX program: on adult (2 cores) the 91 pairs of one AIM round took
    about 50 s against 3.5 s for the round's estimation, so AIM finished 3 rounds in a 300 s cap."""
    clique = tuple(clique)
    parent = model.marginals.parent(clique)
    if parent is not None:
        factor = model.marginals[parent]
        attrs = list(factor.domain.attributes)
        values = np.asarray(factor.values, dtype=np.float64)
        kept = [a for a in attrs if a in clique]
        summed = values.sum(axis=tuple(i for i, a in enumerate(attrs) if a not in clique))
        return np.transpose(summed, [kept.index(a) for a in clique]).ravel()
    return _Tree(model).project(clique)


class _Tree:
    """A model's distribution on a junction tree of its potentials' cliques (lib/estimation/maxent.py's tree and
    calibration), answering a clique spread over the tree by contracting along the path between its columns:
    the columns at one end, summed onto what the next clique shares, times that clique's table conditioned on
    the shared columns, and so on (the shared columns separate both sides).  Every clique's table is built once
    a model; a pair costs about the cells of the cliques on its path, where one einsum over every potential
    could take hours once the model has grown (uncapped AIM on adult)."""

    _cache: dict = {}

    def __new__(cls, model):
        key = id(model)
        if key not in cls._cache:
            cls._cache.clear()  # one model at a time: a round's candidates
            cls._cache[key] = super().__new__(cls)
            cls._cache[key]._build(model)
        return cls._cache[key]

    def _build(self, model) -> None:
        from dpsyn.lib.estimation.maxent import calibrate, junction_tree
        self.model, self.attrs = model, list(model.potentials.domain.attributes)
        sizes = [model.potentials.domain[a] for a in self.attrs]
        sets = [tuple(self.attrs.index(a) for a in cl) for cl in model.potentials.cliques]
        self.tree = junction_tree(sets, range(len(self.attrs)), sizes)
        logs = [np.zeros(tuple(sizes[c] for c in node)) for node in self.tree.cliques]
        for cl, cols in zip(model.potentials.cliques, sets):
            factor = model.potentials[cl]
            order = [self.attrs.index(a) for a in factor.domain.attributes]
            node = self.tree.host(order)
            clique = self.tree.cliques[node]
            table = np.transpose(np.asarray(factor.values, dtype=np.float64), np.argsort(order))
            logs[node] = logs[node] + table.reshape([sizes[c] if c in order else 1 for c in clique])
        self.beliefs = calibrate(self.tree, logs)

    def _path(self, start: int, end: int) -> list[int]:
        up = [start]
        while self.tree.parent[up[-1]] >= 0:
            up.append(self.tree.parent[up[-1]])
        down = [end]
        while down[-1] not in up:
            down.append(self.tree.parent[down[-1]])
        return up[:up.index(down[-1])] + down[::-1]

    def project(self, clique) -> np.ndarray:
        """The model's counts on ``clique`` (one or two columns; more: mbi's own), C order."""
        if len(clique) > 2:
            return np.asarray(self.model.project(clique).datavector(), dtype=np.float64)
        cols = [self.attrs.index(a) for a in clique]
        tree = self.tree
        path = self._path(tree.host(cols[:1]), tree.host(cols[1:]) if len(cols) > 1 else tree.host(cols[:1]))
        far = set(cols[1:])
        shared = [sorted(set(tree.cliques[i]) & set(tree.cliques[j])) for i, j in zip(path, path[1:])]
        keep = sorted(set(cols[:1]) | set(shared[0] if shared else far))
        table = self._onto(path[0], keep)
        for k, node in enumerate(path[1:], start=1):
            clique = list(tree.cliques[node])
            on = self._onto(node, shared[k - 1])
            spread = on.reshape([on.shape[shared[k - 1].index(c)] if c in shared[k - 1] else 1 for c in clique])
            conditional = np.divide(self.beliefs[node], spread, out=np.zeros_like(self.beliefs[node]),
                                    where=spread > 0)
            nxt = sorted(set(cols[:1]) | (set(shared[k]) if k < len(shared) else far))
            table = np.einsum(table, keep, conditional, clique, nxt)
            keep = nxt
        joint = np.transpose(table, [keep.index(c) for c in cols])
        return (float(self.model.total) * joint / joint.sum()).ravel()

    def _onto(self, node: int, cols: list[int]) -> np.ndarray:
        clique = self.tree.cliques[node]
        drop = tuple(i for i, c in enumerate(clique) if c not in cols)
        return self.beliefs[node].sum(axis=drop) if drop else self.beliefs[node]


def _model_mb(mbi, domain, cliques) -> float:
    jtree, _ = mbi.junction_tree.make_junction_tree(domain, cliques)
    return sum(domain.size(cl) for cl in jtree.nodes) * 8 / 2 ** 20


def aim(codes: np.ndarray, sizes, names, epsilon: float, delta: float, rng: np.random.Generator,
        time_cap: float | None = None, theta: int = 1) -> np.ndarray:
    """AIM synthetic codes for the all-2-way workload, (epsilon, delta)-DP for at most ``theta`` rows
    per individual (a measurement at noise sd sigma costs theta² / (2 sigma²)); ``time_cap`` (seconds,
    None: none, as the reference) ends the selection early with one last round."""
    mbi = _mbi()
    import jax
    names, sizes = list(names), [int(s) for s in sizes]
    start = time.perf_counter()
    rho = rho_from_eps_delta(epsilon, delta)
    data, domain = _dataset(mbi, codes, sizes, names)
    workload = list(itertools.combinations(names, 2))
    candidates = {cl: float(sum(len(set(cl) & set(w)) for w in workload))
                  for cl in [(n,) for n in names] + workload}
    answers = {cl: np.asarray(data.project(cl).datavector()) for cl in candidates}
    rounds = 16 * len(names)
    sigma = theta * math.sqrt(rounds / (2 * 0.9 * rho))
    eps = math.sqrt(8 * 0.1 * rho / rounds)
    measurements = _measure(mbi, data, [(n,) for n in names], sigma, rng)
    used = len(names) * 0.5 * theta ** 2 / sigma ** 2
    engine = mbi.estimation.MirrorDescent()
    model = engine.estimate(domain, measurements, iters=AIM_ITERS)
    last, done = False, 0
    while not last:
        over = time_cap is not None and time.perf_counter() - start > time_cap
        if rho - used < 2 * (0.5 * theta ** 2 / sigma ** 2 + eps ** 2 / 8) or over:
            remaining = rho - used
            sigma, eps, last = theta * math.sqrt(1 / (2 * 0.9 * remaining)), math.sqrt(8 * 0.1 * remaining), True
        used += eps ** 2 / 8 + 0.5 * theta ** 2 / sigma ** 2
        limit = AIM_MAX_MODEL_MB * used / rho
        cliques = list(model.cliques)
        free = {tuple(sub) for cl in cliques for r in range(1, len(cl) + 1) for sub in itertools.combinations(cl, r)}
        small = [cl for cl in candidates if cl in free or _model_mb(mbi, domain, cliques + [cl]) <= limit]
        errors = np.array([candidates[cl] * (np.abs(answers[cl] - _project(model, cl)).sum()
                                             - math.sqrt(2 / math.pi) * sigma * domain.size(cl)) for cl in small])
        cl = small[_exponential(errors, eps, theta * max(candidates[c] for c in small), rng)]
        n = domain.size(cl)
        print(f"aim: round {done + 1}: {' x '.join(cl)} at noise sd {sigma:.4g}", file=sys.stderr, flush=True)
        measurements += _measure(mbi, data, [cl], sigma, rng)
        before = _project(model, cl)
        model = engine.estimate(domain, measurements, iters=AIM_ITERS, warm_start=model)
        jax.clear_caches()  # each round compiles new programs; kept, their code maps pile up (below)
        after = _project(model, cl)
        if np.abs(after - before).sum() <= sigma * math.sqrt(2 / math.pi) * n:
            sigma, eps = sigma / 2, eps * 2
        done += 1
    model = engine.estimate(domain, measurements, iters=AIM_ITERS, warm_start=model)
    print(f"aim: eps {epsilon:g}: {done} rounds (the last after {'the time cap' if over else 'the budget ran low'}) "
          f"in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return _to_codes(model.synthetic_data(), names)
