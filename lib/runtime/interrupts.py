"""Stop signals: SIGTERM raised like SIGINT, and both held while a step must not be cut in two.

``raise_on_stop()`` makes SIGTERM raise KeyboardInterrupt, as SIGINT does, so that a stopped run
unwinds through the same ``finally`` blocks.  ``held()`` records SIGINT and SIGTERM instead of
raising them for the length of a ``with`` block (an all-or-nothing commit); the caller decides
what a signal that arrived meanwhile means once the step is done.  Both act in the main thread
only: Python delivers signals there, and elsewhere they change nothing.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def raise_on_stop() -> None:
    """SIGTERM raises KeyboardInterrupt from now on (SIGINT already does)."""
    if _main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


@contextmanager
def held() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM are recorded (in the yielded list), not raised; the
    previous handlers are back after it, and a recorded signal is not delivered again."""
    received: list[int] = []
    if not _main_thread():
        yield received
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
