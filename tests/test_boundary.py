"""The measurement boundary: lib/ imports nothing of ours, methods reach private data only through
the private table's measuring calls, and the table answers only its own kinds of queries."""
import ast
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsyn.api import release
from dpsyn.lib.records.domain import Domain
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.private_table import PrivateRecords, PrivateTable
from dpsyn.lib.privacy.queries import Marginal, Sensitivity
from dpsyn.lib.privacy.unit import PrivacyUnit
from dpsyn.method import METHODS
from dpsyn.method.base import Method, SynthesisResult

ROOT = Path(__file__).resolve().parent.parent
OURS = ("api", "budget", "main", "settings", "release_log", "dataloader", "method", "stages", "evaluation", "bench", "tests")
PRIVATE_SIDE = ("dpsyn.lib.privacy.bounding", "dpsyn.lib.privacy.samplers", "dpsyn.lib.privacy.mechanisms")


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import statement in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", [alias.name for alias in node.names]))
    return out


def test_lib_imports_nothing_of_ours():
    for path in (ROOT / "lib").rglob("*.py"):
        for module, _ in imports(path):
            assert module.removeprefix("dpsyn.").split(".")[0] not in OURS, f"{path.relative_to(ROOT)} imports {module}"


def test_methods_reach_private_data_only_through_the_private_table():
    """No method module imports the data layer, the pipeline, or the privacy side's internals (bounding,
    samplers, mechanisms, underscore names), nor touches an underscore attribute (the table's records,
    ledger and noise generator are underscore attributes)."""
    for path in (ROOT / "method").glob("*.py"):
        where = path.relative_to(ROOT)
        for module, names in imports(path):
            assert module.split(".")[0] not in ("dataloader", "api", "main", "evaluation"), f"{where}: {module}"
            assert module not in PRIVATE_SIDE, f"{where} imports {module}"
            assert not [n for n in names if n.startswith("_")], f"{where} imports {names} from {module}"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                assert not (node.attr.startswith("_") and not node.attr.endswith("__")), \
                    f"{where}:{node.lineno} reads .{node.attr}"
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "vars"):
                raise AssertionError(f"{where}:{node.lineno} calls {node.func.id}")


def small_table() -> PrivateTable:
    domain = Domain(("A", "B"), (2, 3))
    codes = np.array([[0, 1], [1, 2], [1, 0]], dtype=np.int32)
    return PrivateTable(PrivateRecords(codes, {}), domain, PrivacyUnit(1), Ledger(1.0, 1e-9), np.random.default_rng(0))


def test_a_query_of_raw_values_the_table_does_not_hold_is_refused_before_any_charge():
    from dpsyn.lib.privacy.queries import CellHistogram, Moments
    domain = Domain(("A", "X", "Y"), (2, 3, 3), {"X": (0.0, 3.0), "Y": (0.0, 3.0)})
    codes = np.array([[0, 1, 2], [1, 2, 0]], dtype=np.int32)
    ledger = Ledger(1.0, 1e-9)
    private = PrivateTable(PrivateRecords(codes, {"X": np.array([1.5, 2.5])}), domain, PrivacyUnit(1), ledger,
                           np.random.default_rng(0))
    assert private.raw_columns == ("X",)
    for query in (Moments(("X", "Y")), CellHistogram("Y", (), ((0.0, 1.5, 3.0),))):
        with pytest.raises(ValueError, match="reads the raw values of Y, which this table does not hold"):
            private.measure(query, 1e-4)
    assert ledger.spent == 0.0
    private.measure(CellHistogram("X", (), ((0.0, 1.5, 3.0),)), 1e-4)
    private.measure(Marginal(("Y",)), 1e-4)  # codes only


def test_a_method_inside_its_node_cannot_reach_another():
    from dpsyn.lib.privacy.accounting import BudgetExceeded
    from dpsyn.lib.privacy.plan import Node, Plan
    domain = Domain(("A", "B"), (2, 3))
    budget = Ledger(1.0, 1e-9).budget
    ledger = Ledger(1.0, 1e-9, plan=Plan(1.0, 1e-9, 1, budget, (Node("reweighting", 0.1), Node("method", 0.9))))
    private = PrivateTable(PrivateRecords(np.zeros((3, 2), dtype=np.int32), {}), domain, PrivacyUnit(1), ledger,
                           np.random.default_rng(0))
    with private.spending("method"):
        assert private.remaining == pytest.approx(0.9 * budget)
        with pytest.raises(BudgetExceeded, match="do not nest"):
            with private.spending("reweighting"):
                pass
        private.measure(Marginal(("A",)), private.remaining)
        with pytest.raises(BudgetExceeded):
            private.measure(Marginal(("B",)), 1e-9)
    assert ledger.node_spent("reweighting") == 0.0


def test_the_unit_is_enforced_or_refused_and_cannot_be_changed():
    """A distinct declaration with theta > 1 needs ids (its sqrt(theta) noise holds only where bounding
    enforces it); with ids, bounding needs its own generator; the table's unit is read-only."""
    domain = Domain(("A", "B"), (2, 3))
    codes = np.array([[0, 1], [1, 2], [1, 0]], dtype=np.int32)
    with pytest.raises(ValueError, match="need each row's individual"):
        PrivateTable(PrivateRecords(codes, {}), domain, PrivacyUnit(3, ("B",), "pid"), Ledger(1.0, 1e-9),
                     np.random.default_rng(0))
    with pytest.raises(ValueError, match="its own generator"):
        PrivateTable(PrivateRecords(codes, {}, np.array(["a", "b", "a"], dtype=object)), domain, PrivacyUnit(3),
                     Ledger(1.0, 1e-9), np.random.default_rng(0))
    PrivateTable(PrivateRecords(codes, {}), domain, PrivacyUnit(1, ("B",)), Ledger(1.0, 1e-9),
                 np.random.default_rng(0))  # theta 1: nothing to enforce
    private = small_table()
    with pytest.raises(AttributeError):
        private.unit = PrivacyUnit(1)


def test_the_table_shows_no_records():
    private = small_table()
    public = {name for name in dir(private) if not name.startswith("_")}
    assert public == {"domain", "unit", "theta", "raw_columns", "budget", "remaining", "released", "sensitivity",
                      "measure", "select", "holding", "spending"}
    for name in ("codes", "records", "numeric", "ids"):
        with pytest.raises(AttributeError):
            getattr(private, name)
    with pytest.raises(TypeError):
        vars(private)


def test_the_table_refuses_a_query_kind_of_a_methods_making():
    @dataclass(frozen=True)
    class Understated(Marginal):
        def sensitivity(self, theta: int) -> Sensitivity:
            return Sensitivity(1, 1, "claims one row whatever theta is")

    private = small_table()
    with pytest.raises(TypeError, match="answers only"):
        private.measure(Understated(("A",)), 0.001)
    with pytest.raises(ValueError, match="not domain columns"):
        private.measure(Marginal(("Z",)), 0.001)
    with pytest.raises(TypeError, match="answers only"):  # even a kind that is no dict key
        private.select([["A"]], [np.zeros(2)], 0.001)
    assert private._ledger.charges == []


def test_a_method_gets_no_private_array(monkeypatch):
    """A spy method records what it is handed: only the private table holds arrays of private rows."""
    seen = {}

    def spy(private, public, ctx, options):
        seen["args"] = (public, ctx, options)
        seen["private"] = private
        m = private.measure(Marginal(("A",)), private.budget)
        return SynthesisResult(np.zeros((int(max(m.total, 0)), 2), dtype=np.int32))

    monkeypatch.setitem(METHODS, "spy", Method("spy", "records its arguments", spy))
    private = pd.DataFrame({"A": ["x", "y"] * 50, "B": ["1", "2"] * 50})
    params = {"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 1000, "max_records_per_individual": 1}],
              "schema": {"A": {"values": ["x", "y"]}, "B": {"values": [1, 2]}}}
    (run,) = release(private, params, method="spy", seed=0)
    public, ctx, options = seen["args"]
    assert public is None and not any(isinstance(v, np.ndarray) for v in vars(ctx).values())
    assert isinstance(seen["private"], PrivateTable)
    assert [m.label for m in run.measurements] == ["1-way marginal A"]
    assert run.ledger.spent == run.ledger.budget
