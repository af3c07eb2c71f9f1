"""A run's budget plan: named nodes, each with its share of the run's rho, fixed before any private data is read.

A plan is built from public facts only (epsilon, delta, theta, the schema, the method and its
options, the public file) and handed to the run's ledger, which then charges every step to the
node it runs in and refuses a charge past that node's rho (lib/privacy/accounting.py).  A node
may split itself further at run time (the method's regime, chosen from its noisy total; the
adaptive rounds), never beyond its own rho.  ``lines`` is what ``main.py plan`` prints and what a
release logs before it measures; ``to_dict`` goes into the ledger JSON under ``"plan"``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Node:
    """One share of a run's rho: its name (what the ledger's charges name), its share of the run's
    rho, a note in words (what it measures; its noise in counts or the data's units where that is
    known in advance) and, where the split is known in advance, its children (shares of this node)."""

    name: str
    share: float
    note: str = ""
    children: tuple["Node", ...] = ()


@dataclass(frozen=True)
class Plan:
    """One run's budget: (epsilon, delta), theta, the rho they grant, and the top-level nodes, whose
    shares sum to 1."""

    epsilon: float
    delta: float
    theta: int
    rho: float
    nodes: tuple[Node, ...]

    def __post_init__(self) -> None:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"plan nodes must have distinct names, got {names}")
        if not all(n.share > 0 for n in self.nodes) or not math.isclose(math.fsum(n.share for n in self.nodes), 1.0,
                                                                          rel_tol=1e-12):
            raise ValueError(f"plan shares must be positive and sum to 1, got {[n.share for n in self.nodes]}")

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no plan node {name!r}; nodes: {', '.join(n.name for n in self.nodes)}")

    def rho_of(self, name: str) -> float:
        """The rho of top-level node ``name`` (its share of the run's rho)."""
        return self.node(name).share * self.rho

    def lines(self) -> list[str]:
        """The plan as an indented tree, one line per node: share, rho, and the note."""
        out = [f"run eps={self.epsilon:g} delta={self.delta:.3g} theta={self.theta}: rho {self.rho:.6g}"]

        def walk(nodes: tuple[Node, ...], rho: float, depth: int) -> None:
            for n in nodes:
                note = f": {n.note}" if n.note else ""
                out.append(f"{'  ' * depth}- {n.name} {100 * n.share:.3g}% (rho {n.share * rho:.4g}){note}")
                walk(n.children, n.share * rho, depth + 1)
        walk(self.nodes, self.rho, 1)
        return out

    def to_dict(self) -> dict[str, Any]:
        def node(n: Node, rho: float) -> dict[str, Any]:
            out = {"name": n.name, "share": n.share, "rho": n.share * rho, "note": n.note}
            if n.children:
                out["children"] = [node(c, n.share * rho) for c in n.children]
            return out
        return {"epsilon": self.epsilon, "delta": self.delta, "theta": self.theta, "rho": self.rho,
                "nodes": [node(n, self.rho) for n in self.nodes]}
