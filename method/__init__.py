"""Synthesis strategies.  Each takes (codes, RunContext) and returns synthetic codes."""
from method import histogram

METHODS = {"histogram": histogram.synthesize}
