"""Static checks on every Python file of the checkout (pyproject.toml's [tool.ruff]): no undefined name, no
unused import or variable, no syntax error; and the release code's shape: no function takes more than seven
parameters (settings travel as objects) but the numba kernels, which take flat arrays, and no two classes
share a name; and mypy on the installed package, strict on the privacy core (lib/privacy)."""
import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_RELEASE = ("tests", "bench", "evaluation", "build", "wheelhouse")  # what a release never runs
MAX_PARAMETERS = 7


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _release_files() -> list[Path]:
    return [p for p in ROOT.rglob("*.py")
            if not p.relative_to(ROOT).parts[0].startswith(".") and p.relative_to(ROOT).parts[0] not in NOT_RELEASE]


def _is_numba(node: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def test_no_release_function_takes_more_than_seven_parameters():
    long = []
    for path in _release_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_numba(node):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                if len(names) > MAX_PARAMETERS:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({len(names)})")
    assert not long, long


def test_no_two_classes_share_a_name():
    where: dict[str, list[str]] = {}
    for path in _release_files():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in where.items() if len(paths) > 1}


def test_tests_import_nothing_from_bench_and_the_checkout_only_as_dpsyn():
    """Tests import their helpers by name (pytest puts tests/ on the path), never bench/, and the checkout's
    modules only as the package: one file never loads as two modules (two tuning tables)."""
    import dpsyn.api  # noqa: F401
    for path in (ROOT / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [m for m in modules if m.split(".")[0] in ("bench", "tests")], (path.name, modules)
    twice = []
    for name, module in list(sys.modules.items()):
        path = Path(getattr(module, "__file__", None) or "/").resolve()
        inside = path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] not in (".venv", "tests")
        # pytest imports the checkout's own __init__.py (a package node for the root folder): it loads nothing
        if inside and name.split(".")[0] != "dpsyn" and path != ROOT / "__init__.py":
            twice.append(name)
    assert not twice


def test_mypy_finds_nothing_in_the_package(tmp_path):
    """mypy (pyproject.toml's [tool.mypy]) on what the package installs (pyproject.toml's packages and the
    checkout's top-level modules; not bench/ or tests/), every flag of --strict on lib/privacy: the checkout is
    seen as the package dpsyn through a link, and mypy's cache stays outside the checkout."""
    (tmp_path / "dpsyn").symlink_to(ROOT, target_is_directory=True)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    tops = [p for p in packages if p != "dpsyn" and not any(p.startswith(q + ".") for q in packages if q != "dpsyn")]
    targets = [a for p in tops for a in ("-p", p)]  # -p takes subpackages too
    targets += [a for m in sorted(ROOT.glob("*.py")) for a in ("-m", "dpsyn" if m.stem == "__init__" else f"dpsyn.{m.stem}")]
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(tmp_path / "cache"), *targets], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "source files" in proc.stdout and "dpsyn/bench" not in proc.stdout
