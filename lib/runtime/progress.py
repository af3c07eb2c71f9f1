"""Progress bars that appear only where someone watches them.

A bar is drawn on stderr only when stderr is a terminal and the log shows INFO; a captured
log (stderr to a file or pipe) never gets a bar's control characters.  While bars are
drawn, log lines go through tqdm so they are printed above the bars, never inside one.
"""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm


def bars_wanted(log: logging.Logger) -> bool:
    """Whether bars are drawn: stderr is a terminal and ``log`` shows INFO."""
    return sys.stderr.isatty() and log.isEnabledFor(logging.INFO)


def progress(total: int, desc: str, unit: str, log: logging.Logger, minimum: int = 1) -> tqdm:
    """A bar over ``total`` steps (disabled, and silent, unless ``bars_wanted`` and total >= minimum)."""
    return tqdm(total=total, desc=desc, unit=unit, leave=False, file=sys.stderr,
                disable=not bars_wanted(log) or total < minimum)


@contextmanager
def log_above_bars(log: logging.Logger):
    """Within the block, log records are written above the bars (only when bars are drawn)."""
    if bars_wanted(log):
        with logging_redirect_tqdm():
            yield
    else:
        yield
