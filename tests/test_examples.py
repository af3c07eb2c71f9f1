"""The examples in the public API's docstrings run and say what they show (doctest)."""
import doctest
import importlib
import logging

import pytest

PUBLIC = ("dpsyn.api", "dpsyn.lib.privacy.unit")


@pytest.mark.parametrize("name", PUBLIC)
def test_the_examples_run(name):
    logging.disable(logging.WARNING)  # the seeded example's warning goes to the log, not into the example
    try:
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    finally:
        logging.disable(logging.NOTSET)
    assert result.attempted > 0 and result.failed == 0
