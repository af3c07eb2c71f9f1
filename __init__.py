"""dpsyn: differentially private synthetic data release.

    import dpsyn
    runs = dpsyn.release("private.csv", "parameters.json", public="public.csv")
    dpsyn.plan("parameters.json", public="public.csv")      # the budget, before any private data

The names below come from ``dpsyn.api`` on first use, so ``import dpsyn`` alone loads nothing heavy.
"""
from __future__ import annotations

import importlib

__all__ = ["release", "plan", "draft_schema", "Settings", "RunRelease", "ledger_path"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("dpsyn.api"), name)
    raise AttributeError(f"module 'dpsyn' has no attribute {name!r}")
