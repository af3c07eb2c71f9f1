"""Optional packages: the distribution's extra that brings each, and one clear refusal when one is missing."""
from __future__ import annotations

import importlib.util

# module -> (the extra of `pip install dpsyn[...]` that installs it)
EXTRAS = {"cvxpy": "reweighting", "sklearn": "evaluation", "matplotlib": "evaluation", "dask": "dask",
          "distributed": "dask"}


class MissingExtra(Exception):
    """What was asked for needs a package that is not installed."""


def require(module: str, what: str) -> None:
    """Raises MissingExtra, naming the extra to install, unless ``module`` can be imported; imports nothing."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtra(f"{what} needs the package {module}, which is not installed: "
                           f"pip install 'dpsyn[{EXTRAS[module]}]'")
