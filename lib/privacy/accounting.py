"""zCDP accounting: (epsilon, delta) <-> rho conversion, noise scales, and the privacy ledger.

Conversion uses the tight bound of Canonne, Kamath and Steinke (2020, Prop. 12 /
Cor. 13): a rho-zCDP mechanism is (eps, delta)-DP for

    delta(rho, eps) = min_{alpha > 1}  exp((alpha-1)(alpha*rho - eps) + alpha*ln(1 - 1/alpha)) / (alpha - 1).

It grants noticeably more rho than the classic eps = rho + 2*sqrt(rho*ln(1/delta)).
Every conversion here errs on the safe side: ``rho_from_eps_delta`` returns a rho
whose delta is <= the requested delta, ``eps_from_rho_delta`` an eps that is >= the
true one.
"""
from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

from scipy.optimize import brentq

from dpsyn.lib.privacy.plan import Plan

_BISECT_STEPS = 200


def _log_delta_at(alpha: float, rho: float, eps: float) -> float:
    return (alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)


def delta_from_rho_eps(rho: float, eps: float) -> float:
    """Smallest delta such that rho-zCDP implies (eps, delta)-DP (tight CKS bound)."""
    if rho <= 0:
        return 0.0
    # d/d(alpha) of the log objective is (2*alpha - 1)*rho - eps + ln(1 - 1/alpha), increasing in
    # alpha, -inf at alpha -> 1 and +inf as alpha -> inf: the optimum is its unique root.
    def slope(alpha: float) -> float:
        return (2 * alpha - 1) * rho - eps + math.log1p(-1 / alpha)
    hi = max(2.0, (eps + 1) / (2 * rho) + 2)
    while slope(hi) < 0:
        hi *= 2
    lo = 1 + 1e-12
    alpha = brentq(slope, lo, hi, xtol=1e-14, rtol=1e-15) if slope(lo) < 0 else lo
    return min(1.0, math.exp(_log_delta_at(alpha, rho, eps)))


def _bisect(holds: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """(lo, hi) around the point where ``holds`` (true at lo, false at hi) flips, to float precision."""
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def rho_from_eps_delta(eps: float, delta: float) -> float:
    """Largest rho (to float precision) whose zCDP guarantee implies (eps, delta)-DP.

    Bisection on rho keeps the lower end, so delta_from_rho_eps(result, eps) <= delta.
    """
    if eps <= 0 or not 0 < delta < 1:
        raise ValueError(f"need eps > 0 and 0 < delta < 1, got eps={eps}, delta={delta}")
    return _bisect(lambda rho: delta_from_rho_eps(rho, eps) <= delta, 0.0, eps + 1.0)[0]


def eps_from_rho_delta(rho: float, delta: float) -> float:
    """Smallest eps (to float precision, rounded up) with rho-zCDP => (eps, delta)-DP."""
    if rho <= 0:
        return 0.0
    classic = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # a valid (looser) bound
    return _bisect(lambda eps: delta_from_rho_eps(rho, eps) > delta, 0.0, classic * (1 + 1e-9))[1]


def classic_rho_from_eps_delta(eps: float, delta: float) -> float:
    """rho solving eps = rho + 2*sqrt(rho*ln(1/delta)) (Bun-Steinke 2016); for comparison only."""
    log_inv = math.log(1 / delta)
    return (math.sqrt(eps + log_inv) - math.sqrt(log_inv)) ** 2


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Std-dev of Gaussian noise giving rho-zCDP for L2 sensitivity ``sensitivity``: Δ/sqrt(2ρ)."""
    if rho <= 0:
        raise ValueError("rho must be > 0")
    return sensitivity / math.sqrt(2 * rho)


class BudgetExceeded(RuntimeError):
    """A charge would push the ledger's total rho past its budget."""


GRANT_SLACK = 1e-9  # relative float error tolerated in the last share of a split budget


@dataclass(frozen=True)
class Charge:
    """One recorded use of private data: what was measured, how, and what it cost."""

    step: str
    mechanism: str
    sensitivity: float
    noise_scale: float
    rho: float
    sensitivity_reason: str = ""
    sampler: str = ""
    node: str = ""  # the plan node it was charged to (lib/privacy/plan.py)


@dataclass
class Ledger:
    """Every private-data access of one run, with its zCDP cost; never exceeds the budget.

    The budget is rho = rho_from_eps_delta(epsilon, delta).  The total spent (an exact
    ``math.fsum`` of the charges) never exceeds it: ``grant`` tells a mechanism how much
    rho a step may take before it draws noise, and ``charge`` records a granted step.
    ``hold`` keeps a later stage's share out of reach of charges until ``unhold`` (holds nest: a
    stage inside a held block may hold a share of what it sees, and ``unhold`` frees the latest).
    With a ``plan`` (lib/privacy/plan.py), every charge is made inside ``spending(node)``, names
    that node, and is refused past the node's rho; ``remaining`` is then what is left of the node.
    """

    epsilon: float
    delta: float
    budget: float = field(init=False)
    charges: list[Charge] = field(default_factory=list)
    held: list[float] = field(default_factory=list, init=False)
    plan: Plan | None = None
    node: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.budget = rho_from_eps_delta(self.epsilon, self.delta)
        if self.plan is not None and not math.isclose(self.plan.rho, self.budget, rel_tol=1e-12):
            raise ValueError(f"the plan's rho {self.plan.rho} is not this ledger's budget {self.budget}")

    def node_rho(self, name: str) -> float:
        """The rho of plan node ``name``; the plan's last node takes exactly what the others leave."""
        plan = self._the_plan()
        names = [n.name for n in plan.nodes]
        if name == names[-1]:
            return max(self.budget - math.fsum(plan.rho_of(n) for n in names[:-1]), 0.0)
        return plan.rho_of(name)

    def _the_plan(self) -> Plan:
        if self.plan is None:
            raise ValueError("this ledger has no plan")
        return self.plan

    def node_spent(self, name: str) -> float:
        return math.fsum(c.rho for c in self.charges if c.node == name)

    @contextmanager
    def spending(self, name: str) -> Iterator[None]:
        """Within the block, charges go to plan node ``name`` and may not pass its rho."""
        if self.plan is None:
            raise ValueError("this ledger has no plan")
        if self.node is not None:
            raise BudgetExceeded(f"{name}: charges already go to plan node {self.node!r}; nodes do not nest")
        self.plan.node(name)  # KeyError for a node the plan does not have
        self.node = name
        try:
            yield
        finally:
            self.node = None

    @property
    def spent(self) -> float:
        return math.fsum(c.rho for c in self.charges)

    @property
    def remaining(self) -> float:
        """The largest rho one more charge can take (spent + remaining <= budget exactly)."""
        rhos = [c.rho for c in self.charges] + self.held
        left = self.budget - math.fsum(rhos)
        if self.node is not None:
            left = min(left, self.node_rho(self.node) - math.fsum([self.node_spent(self.node)] + self.held))
        while left > 0 and not self._fits(left):
            left = math.nextafter(left, 0.0)
        return max(left, 0.0)

    def hold(self, rho: float) -> None:
        """Keep ``rho`` (at most what remains) out of reach of every charge until ``unhold``."""
        if not 0 <= rho <= self.remaining:
            raise BudgetExceeded(f"cannot hold rho={rho:.6g}: {self.remaining:.6g} remains")
        self.held.append(float(rho))

    def unhold(self) -> None:
        """Make the latest held share available again."""
        self.held.pop()

    def grant(self, rho: float, step: str) -> float:
        """The rho a step asking for ``rho`` takes: ``rho`` itself when it fits; exactly what
        remains when it asks for at most GRANT_SLACK (relative to the budget) more, which is
        how the last of several shares that sum to the budget in exact arithmetic lands on it;
        otherwise BudgetExceeded.  Records nothing."""
        if not rho > 0:
            raise ValueError(f"{step}: a charge must have rho > 0, got {rho}")
        if self._fits(rho):
            return rho
        left = self.remaining
        if left > 0 and rho <= left + GRANT_SLACK * self.budget:
            return left
        raise BudgetExceeded(f"{step}: charging rho={rho:.6g} would exceed the budget "
                             f"(spent {self.spent:.6g} of {self.budget:.6g})")

    def charge(self, step: str, mechanism: str, sensitivity: float, noise_scale: float, rho: float,
               sensitivity_reason: str = "", sampler: str = "") -> Charge:
        """Record a step that costs ``rho`` (from ``grant``); BudgetExceeded if it does not fit."""
        if self.plan is not None and self.node is None:
            raise BudgetExceeded(f"{step}: a charge outside every plan node; charges go inside spending(node)")
        if not (rho > 0 and self._fits(rho)):
            where = f" (node {self.node!r}: spent {self.node_spent(self.node):.6g} of {self.node_rho(self.node):.6g})" \
                if self.node else ""
            raise BudgetExceeded(f"{step}: rho={rho:.6g} was not granted (spent {self.spent:.6g} of "
                                 f"{self.budget:.6g}){where}")
        c = Charge(step, mechanism, float(sensitivity), float(noise_scale), float(rho),
                   sensitivity_reason, sampler, self.node or "")
        self.charges.append(c)
        return c

    def _fits(self, rho: float) -> bool:
        if math.fsum([c.rho for c in self.charges] + [rho] + self.held) > self.budget:
            return False
        return self.node is None or math.fsum([self.node_spent(self.node), rho] + self.held) <= \
            self.node_rho(self.node)

    def epsilon_spent(self) -> float:
        """The epsilon the charges amount to.  The budget is the largest rho whose guarantee
        implies (epsilon, delta)-DP and delta(rho, eps) grows with rho, so any total up to the
        budget spends at most ``epsilon``; below it the tight conversion (rounded up) says less."""
        return min(self.epsilon, eps_from_rho_delta(self.spent, self.delta))

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho_budget": self.budget,
            "rho_spent": self.spent,
            "epsilon_spent": self.epsilon_spent(),
            "conversion": "zCDP -> (eps, delta): Canonne-Kamath-Steinke 2020 tight bound",
            "charges": [asdict(c) for c in self.charges],
            **({"plan": self._plan_dict()} if self.plan is not None else {}),
        }

    def _plan_dict(self) -> dict[str, Any]:
        """The plan with each top-level node's rho as the ledger grants it and the rho its charges spent."""
        plan = self._the_plan().to_dict()
        for node in plan["nodes"]:
            node["rho"] = self.node_rho(node["name"])
            node["spent"] = self.node_spent(node["name"])
        return plan

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
