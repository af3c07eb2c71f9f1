"""The privacy unit: who a run's guarantee protects, and what bounding enforces about them.

Neighbouring tables differ by one individual.  An individual has at most ``theta`` rows after bounding; with
an id column the rows are grouped by its exact text and cut to ``theta`` at random; without one each row's
individual is unknown and the parameters' theta is taken as declared.  ``distinct``: encoded columns in
which no two rows of one individual agree (enforced by bounding where there are ids), which lets a query
whose cells include all of them charge sqrt(theta) in L2 instead of theta (lib/privacy/queries.py).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass


@dataclass(frozen=True)
class PrivacyUnit:
    """One run's unit of privacy: ``theta`` rows at most per individual, the ``id_column`` naming them (None:
    no ids; theta as declared) and the columns ``distinct`` per individual.  Public: every field comes from
    the parameters and the settings.

    >>> unit = PrivacyUnit(7, ("YEAR",), "sim_individual_id")
    >>> unit.separates(("PUMA", "YEAR")), unit.separates(("PUMA",))
    (True, False)
    >>> PrivacyUnit(7, ("YEAR",)).problems()[0][:60]
    'distinct_per_individual (YEAR) with max_records_per_individu'
    """

    theta: int
    distinct: tuple[str, ...] = ()
    id_column: str | None = None

    def __post_init__(self) -> None:
        try:
            theta = operator.index(self.theta)
        except TypeError:
            raise ValueError(f"theta must be an integer >= 1, got {self.theta!r}") from None
        if theta < 1:
            raise ValueError(f"theta must be >= 1, got {theta}")
        object.__setattr__(self, "theta", int(theta))
        object.__setattr__(self, "distinct", tuple(self.distinct))

    def separates(self, attrs: tuple[str, ...]) -> bool:
        """Whether cells over ``attrs`` put one individual's rows in different cells: true when every
        distinct column is among them (bounding kept at most one row per individual per combination)."""
        return bool(self.distinct) and set(self.distinct) <= set(attrs)

    def problems(self) -> list[str]:
        """Why this unit cannot be enforced (one line each; none when it can): a distinct declaration with
        theta > 1 needs ids, or its sqrt(theta) noise would be too small if the declaration were false."""
        if self.distinct and self.id_column is None and self.theta > 1:
            return [f"distinct_per_individual ({', '.join(self.distinct)}) with max_records_per_individual "
                    f"{self.theta} needs an id column (--id-column): without ids the declaration cannot be enforced, "
                    f"and its sqrt(theta) noise would be too small if it were false; name the id column, or drop "
                    f"the declaration (--distinct-per-individual none)"]
        return []
