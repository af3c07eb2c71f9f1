"""Our MST and AIM (bench/peers.py) against private-pgm's own scripts, on adult at ε = 1.

    python bench/peer_check.py --private-pgm DIR [--methods mst aim] [--seeds 3] [--first-seed 0]
                               [--out bench/RESULTS.md]

DIR is a checkout of github.com/ryan112358/private-pgm: its mechanisms/ folder (mst.py, aim.py) is imported
from there and run as it is, never copied.  Those scripts were written for an older mbi; adapters let them
run on the mbi of requirements-bench.txt without editing them: ``estimation.mirror_descent(domain, measurements,
iters, potentials=None, callback_fn=None)`` becomes mbi's ``MirrorDescent().estimate`` warm-started from
``potentials`` (JAX's caches cleared after each, as bench/peers.py does), the model it returns gives its
cliques as a list (aim.py adds a clique to them with ``+``), a Dataset takes its records as a DataFrame and gives
them as one, ``df``, and a Domain gives its attributes as ``attrs`` (mst.py's domain compression needs these).

For each seed both implementations get the same codes (bench/run_bench.py's adult, ``Dataset.codes`` with the
seed's generator); ours draws from that generator, the reference scripts from numpy's global generator seeded
with the seed (aim.py's own generator too).  Each is scored by the mean TVD of every 2-way marginal on the
encoded domain against the codes it was given, and timed.  The reference AIM takes about 65 minutes a run on one
core (ours 7), so runs can be spread over sessions: the page section "## Peers against their reference scripts" of
``--out`` keeps its rows for (method, seed) pairs this run does not make, and gives the mean of each column over
the seeds it holds.

AIM has no rows in the section until a run makes them (``--methods aim``).
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from bench.sections import existing, replaced  # noqa: E402
from dpsyn.evaluation.metrics import mean_tvd  # noqa: E402

SECTION = "## Peers against their reference scripts"
EPSILON = 1.0
ROW = re.compile(r"^\| (MST|AIM) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| (\d+) \| (\d+) \|$", re.M)


def _adapt_mbi() -> None:
    """The adapters of the module doc, installed into mbi for the reference scripts."""
    import jax
    import mbi
    import pandas as pd
    jax.config.update("jax_enable_x64", True)
    from mbi import estimation

    @dataclasses.dataclass
    class ListedCliques:
        model: object

        @property
        def cliques(self) -> list:
            return list(self.model.cliques)

        def __getattr__(self, name: str):
            return getattr(self.model, name)

    def mirror_descent(domain, measurements, iters=1000, potentials=None, callback_fn=None):
        model = estimation.MirrorDescent().estimate(domain, measurements, iters=iters, warm_start=potentials,
                                                    callback_fn=callback_fn or (lambda *_: None))
        jax.clear_caches()
        return ListedCliques(model)

    estimation.mirror_descent = mirror_descent
    made = mbi.Dataset.__init__

    def from_frame(self, data, domain, weights=None):
        if isinstance(data, pd.DataFrame):
            data = {c: data[c].to_numpy().astype(np.int64) for c in data.columns}
        made(self, data, domain, weights)

    mbi.Dataset.__init__ = from_frame
    mbi.Dataset.df = property(lambda self: pd.DataFrame({n: np.asarray(self.data[n]) for n in self.domain}))
    mbi.Domain.attrs = property(lambda self: tuple(self.attributes))


def reference(method: str, codes: np.ndarray, names: list[str], sizes: list[int], delta: float,
              seed: int) -> np.ndarray:
    """The reference script's synthetic codes (mechanisms/ on sys.path, mbi adapted)."""
    import mbi
    np.random.seed(seed)
    data = mbi.Dataset({n: codes[:, j] for j, n in enumerate(names)}, mbi.Domain(names, sizes))
    if method == "mst":
        import mst
        synth = mst.MST(data, EPSILON, delta)
    else:
        import aim
        mech = aim.AIM(EPSILON, delta)
        mech.prng = np.random.RandomState(seed)  # aim.py passes its prng where Mechanism takes ``bounded``
        _, synth = mech.run(data, [(cl, 1.0) for cl in itertools.combinations(names, 2)])
    return np.column_stack([np.asarray(synth.data[n]) for n in names])


def one(method: str, seed: int) -> tuple[float, float, float, float]:
    """(our 2-way TVD, the reference's, our seconds, the reference's) for one seed."""
    from bench import peers
    from bench.run_bench import DATASETS
    data = DATASETS["adult"]()
    rng = np.random.default_rng(seed)
    codes, encoder = data.codes(rng)
    names, sizes = list(encoder.names), [int(s) for s in encoder.sizes]
    start = time.perf_counter()
    ours = (peers.mst(codes, sizes, names, EPSILON, data.delta, rng, data.theta) if method == "mst" else
            peers.aim(codes, sizes, names, EPSILON, data.delta, rng, None, data.theta))
    middle = time.perf_counter()
    theirs = reference(method, codes, names, sizes, data.delta, seed)
    end = time.perf_counter()
    return mean_tvd(codes, ours, tuple(sizes)), mean_tvd(codes, theirs, tuple(sizes)), middle - start, end - middle


def section(rows: dict[tuple[str, int], tuple[float, float, float, float]]) -> str:
    lines = [SECTION, "",
             "Our re-implementations of MST and AIM (bench/peers.py, at the reference settings) against private-pgm's "
             "own mechanisms/mst.py and aim.py run unchanged on mbi 2.0 through adapters (bench/peer_check.py "
             "says which), on adult at ε = 1 (δ 1e-9), both on the same codes each seed: mean 2-way TVD on the "
             "encoded domain and seconds on one core (`python bench/peer_check.py --private-pgm DIR`; rows for "
             "seeds a run does not make are kept; a reference AIM run takes about an hour a seed).", "",
             "| method | seed | ours: 2-way TVD | reference: 2-way TVD | ours: s | reference: s |",
             "|---|---|---|---|---|---|"]
    for method in ("MST", "AIM"):
        mine = sorted((seed, v) for (m, seed), v in rows.items() if m == method)
        lines += [f"| {method} | {seed} | {a:.4f} | {b:.4f} | {c:.0f} | {d:.0f} |" for seed, (a, b, c, d) in mine]
        if mine:
            means = np.mean([v for _, v in mine], axis=0)
            lines.append(f"| {method} | mean of {len(mine)} | {means[0]:.4f} | {means[1]:.4f} | {means[2]:.0f} | "
                         f"{means[3]:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--private-pgm", type=Path, required=True, help="a checkout of private-pgm")
    parser.add_argument("--methods", nargs="*", choices=("mst", "aim"), default=["mst", "aim"],
                        help="none: rewrite the section from the rows it holds")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    mechanisms = args.private_pgm / "mechanisms"
    if not (mechanisms / "aim.py").is_file():
        parser.error(f"{mechanisms} has no aim.py: give a checkout of github.com/ryan112358/private-pgm")
    sys.path.insert(0, str(mechanisms))
    _adapt_mbi()
    made = {}
    for method in args.methods:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            made[(method.upper(), seed)] = one(method, seed)
            print(f"{method} seed {seed}: ours {made[(method.upper(), seed)][0]:.4f}, reference "
                  f"{made[(method.upper(), seed)][1]:.4f}", flush=True)
    page = args.out.read_text() if args.out.exists() else ""  # read now: another run may have written meanwhile
    rows = {(m, int(s)): (float(a), float(b), float(c), float(d))
            for m, s, a, b, c, d in ROW.findall(existing(page, SECTION))}
    args.out.write_text(replaced(page, SECTION, section({**rows, **made})))


if __name__ == "__main__":
    main()
