"""Synthesis strategies.  Each takes (codes, RunContext) and returns synthetic codes."""
from method import dpsyn, histogram

METHODS = {"dpsyn": dpsyn.synthesize, "histogram": histogram.synthesize}
