"""Synthesis strategies behind one protocol (method/base.py).  Adding a method: one module that
defines ``METHOD`` and one line here."""
from dpsyn.method import dpsyn, histogram, rap, superquail

METHODS = {m.name: m for m in (dpsyn.METHOD, histogram.METHOD, rap.METHOD, superquail.METHOD)}
