"""The method protocol: what a synthesis strategy declares, receives and returns.

A method is one module that defines a :class:`Method` (name, summary, options class,
``synthesize``) and one line in method/__init__.py's registry.  ``synthesize`` gets

* the :class:`~lib.privacy.private_table.PrivateTable`, its only way to the private data
  (measuring calls that set the sensitivity and charge the ledger),
* the :class:`PublicData` (or None), free to use,
* the :class:`RunContext` (the run's public settings and the method's own generator),
* its options (an instance of its options class),

and returns a :class:`SynthesisResult`: synthetic codes for every domain column, plus raw
values for columns it synthesized without bins.  The measurements it made travel with
the run's result (the private table keeps them), for post-processing stages to read.

Options are a frozen dataclass whose fields are declared with :func:`option`; the CLI
builds each method's argument group from them (so a flag of another method is an
error) and the Python API accepts them as a dict or the dataclass itself.
"""
from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from dpsyn.lib.runtime.tasks import run_tasks
from dpsyn.lib.records.constraints import NO_BOXES, Boxes
from dpsyn.lib.records.domain import Domain
from dpsyn.lib.privacy.plan import Node
from dpsyn.lib.privacy.private_table import PrivateTable


class OptionError(ValueError):
    """Bad method or release options; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def option(default: Any, help: str, *, type: type = str, choices: tuple | None = None,
           minimum: int | float | None = None, expert: bool = False) -> Any:
    """A field of a method's options dataclass: its default, help text, value type, and the
    allowed values (``choices``) or lower bound (``minimum``) that ``check_options`` enforces.
    ``expert``: a knob for experiments and benchmarks, accepted but left out of ``--help`` (``main.py
    plan --tuning`` lists it)."""
    return field(default=default, metadata={"help": help, "type": type, "choices": choices, "minimum": minimum,
                                            "expert": expert})


def spread(values) -> str:
    """``values`` (noise sds, say) for a log line: one figure where they agree to 3 digits, else their range."""
    low, high = f"{min(values):.3g}", f"{max(values):.3g}"
    return low if low == high else f"{low} to {high}"


def flag(name: str) -> str:
    """The command-line flag of an option field: ``group_round`` -> ``--group-round``."""
    return "--" + name.replace("_", "-")


def check_options(options) -> list[str]:
    """One line per option whose value has the wrong type, is not a choice, or is below its minimum."""
    problems = []
    values = dataclasses.asdict(options)
    for f in dataclasses.fields(options):
        value, meta = values[f.name], f.metadata
        if value is None and f.default is None:
            continue
        kind = meta["type"]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            problems.append(f"{flag(f.name)} must be {kind.__name__}, got {value!r}")
        elif meta["choices"] is not None and value not in meta["choices"]:
            problems.append(f"{flag(f.name)} must be one of {', '.join(map(str, meta['choices']))}, got {value!r}")
        elif meta["minimum"] is not None and value < meta["minimum"]:
            problems.append(f"{flag(f.name)} must be >= {meta['minimum']}, got {value!r}")
    return problems


@dataclass(frozen=True)
class PublicData:
    """Encoded public records (-1 where a category is unknown) and the raw values of their
    numeric columns (NaN = null or unreadable).  Public: free to use, no budget."""

    codes: np.ndarray
    numeric: Mapping[str, np.ndarray]


@dataclass
class RunContext:
    """A run's public settings: the domain, epsilon, delta, the row cap, the group columns,
    worker processes, the method's generator for synthesis (post-processing randomness;
    the noise is the private table's), ``timings`` (seconds per stage), the columns the
    release sets after synthesis (``skip``: derived and group-level columns, which a method
    need not measure) and the edit rules' forbidden boxes that synthesis must avoid (over
    the other columns); ``tasks``: how independent synthesis tasks run (``run_tasks``)."""

    domain: Domain
    epsilon: float
    delta: float
    max_records: int
    group_columns: tuple[str, ...]
    jobs: int
    rng: np.random.Generator
    timings: dict[str, float] = field(default_factory=dict)
    skip: tuple[str, ...] = ()
    boxes: Boxes = NO_BOXES
    tasks: Callable | None = None

    def run_tasks(self, fn: Callable, state, tasks, done: Callable[[], None] = lambda: None) -> list:
        """[fn(state, task) for task in tasks] in order: through the release's engine (``tasks``: its map, one
        cluster task each under the Dask engine), else in ``jobs`` forked processes (lib/runtime/tasks.py).  Public
        inputs only; results do not depend on where the tasks ran."""
        if self.tasks is not None:
            return self.tasks(fn, state, tasks, done)
        return run_tasks(fn, state, tasks, self.jobs, done)

    @contextmanager
    def timed(self, stage: str):
        """Add the wall time of the ``with`` block to ``timings[stage]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - start


@dataclass(frozen=True)
class SynthesisResult:
    """Synthetic codes (m × d, domain order) and, for numeric columns synthesized without bins, their
    raw values (NaN = null), used instead of decoding the codes: the release recomputes those
    columns' codes from them."""

    codes: np.ndarray
    raw: Mapping[str, np.ndarray] = field(default_factory=dict)
    individuals: np.ndarray | None = None  # each row's synthetic individual (stages/individuals.py), or None


@dataclass(frozen=True)
class NoOptions:
    """A method without options of its own."""


@dataclass(frozen=True)
class Method:
    """A registered strategy: ``synthesize(private, public, ctx, options) -> SynthesisResult``;
    ``check(options, schema)`` (optional) lists what the schema or the machine cannot honour, one
    line each, before any data is read.  ``raw_numeric``: the method returns every numeric column as raw
    values (``SynthesisResult.raw``), so the release measures nothing inside their bins for it
    (stages/bin_values.py).  ``plan(options, epsilon, theta, has_groups, rho)`` (optional): the
    method's own budget nodes known before any data is read, shares of its ``rho`` (lib/privacy/plan.py);
    without it the method's node is split at run time."""

    name: str
    summary: str
    synthesize: Callable[[PrivateTable, PublicData | None, RunContext, Any], SynthesisResult]
    options: type = NoOptions
    check: Callable[[Any, Any], list[str]] | None = None
    raw_numeric: bool = False
    plan: Callable[[Any, float, int, bool, float], tuple[Node, ...]] | None = None

    def make_options(self, given: Mapping[str, Any] | Any | None = None):
        """This method's options from a dict (missing fields take their defaults), an instance of
        its options class, or None; OptionError lists unknown names and bad values."""
        if isinstance(given, self.options):
            options = given
        else:
            given = dict(given or {})
            known = {f.name for f in dataclasses.fields(self.options)}
            unknown = sorted(set(given) - known)
            if unknown:
                raise OptionError([f"method {self.name} has no option {name!r}" + (
                    f" (its options: {', '.join(sorted(known))})" if known else " (it takes none)")
                    for name in unknown])
            options = self.options(**given)
        problems = check_options(options)
        if problems:
            raise OptionError(problems)
        return options
