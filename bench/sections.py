"""Sections of bench/RESULTS.md that one bench command writes and the others keep: a "## " heading and
everything up to the next such heading or the end of the page."""
from __future__ import annotations

import re


def _pattern(heading: str) -> re.Pattern:
    return re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)


def existing(page: str, heading: str) -> str:
    """The section of ``page`` under ``heading``, or "" where it has none."""
    found = _pattern(heading).search(page)
    return found.group(0) if found else ""


def replaced(page: str, heading: str, section: str) -> str:
    """``page`` with its section under ``heading`` replaced by ``section`` (appended where it has none)."""
    if _pattern(heading).search(page):
        return _pattern(heading).sub(lambda _: section.rstrip("\n") + "\n\n", page, count=1).rstrip("\n") + "\n"
    return page.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
