"""The checkout as a package: `pip install .` gives `import dpsyn` and the `dpsyn` command, which work
from an empty folder, and a release through the core install imports none of the extras."""
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]  # the one list
# what a wheel is built from: the metadata, the root's modules and every package's folder
PACKAGE_FILES = ("pyproject.toml", "README.md", *sorted(p.name for p in ROOT.glob("*.py")),
                 *sorted({p.split(".")[1] for p in PACKAGES if "." in p}))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh virtual environment with the checkout's wheel installed (no dependencies from an index:
    they come from this interpreter's site-packages through a .pth line, which does not run this
    interpreter's own .pth files, so the editable checkout is not on its path)."""
    tmp = tmp_path_factory.mktemp("package")
    source = tmp / "source"  # a copy, so the build's folders stay out of the checkout
    source.mkdir()
    for name in PACKAGE_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", tmp / "wheel", source],
                   check=True, cwd=tmp)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp / "venv"], check=True)
    python = tmp / "venv" / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel, = (tmp / "wheel").glob("dpsyn-*.whl")
    subprocess.run([*pip, "--python", python, "install", "--no-deps", "--no-index", wheel], check=True)
    empty = tmp / "empty"
    empty.mkdir()
    return tmp / "venv" / "bin", empty


def test_command_runs_from_an_empty_folder(installed):
    bin_, empty = installed
    help_ = subprocess.run([bin_ / "dpsyn", "--help"], cwd=empty, capture_output=True, text=True)
    assert help_.returncode == 0 and help_.stdout.startswith("usage: dpsyn")
    plan = subprocess.run([bin_ / "dpsyn", "plan", "--params", ROOT / "parameters.json"], cwd=empty,
                          capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    assert "run eps=0.1" in plan.stdout
    module = subprocess.run([bin_ / "python", "-m", "dpsyn", "--help"], cwd=empty, capture_output=True, text=True)
    assert module.returncode == 0 and module.stdout == help_.stdout  # python -m dpsyn is the same command


def test_import_releases_with_the_core_install_only(installed, sprint2_files, tmp_path):
    bin_, empty = installed
    params, private, public = sprint2_files
    script = f"""
import sys
import dpsyn
runs = dpsyn.release({str(private)!r}, {str(params)!r}, public={str(public)!r}, output={str(tmp_path / 'out.csv')!r},
                     seed=1, on_invalid="clip", group_columns=["YEAR"])
print(dpsyn.__file__)
print(len(runs[0].table), runs[0].ledger.spent <= runs[0].ledger.budget)
print(sorted(m for m in ("sklearn", "matplotlib", "cvxpy", "dask", "distributed") if m in sys.modules))
"""
    proc = subprocess.run([bin_ / "python", "-c", script], cwd=empty, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    where, sizes, extras = proc.stdout.strip().splitlines()[-3:]
    assert "site-packages" in where and not where.startswith(str(ROOT))
    assert int(sizes.split()[0]) > 0 and sizes.split()[1] == "True"
    assert extras == "[]"
    assert (tmp_path / "out.csv").exists()


def test_a_missing_extra_is_one_line_before_any_private_read(sprint2_files, monkeypatch, capsys):
    import importlib.util

    from dpsyn import main

    params, _, public = sprint2_files
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cvxpy" else real_find_spec(name, *a))
    code = main.main(["--params", str(params), "--private", "/nonexistent/private.csv", "--public", str(public),
                      "--reweight", "moments:AGE", "--output", "/tmp/never.csv"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: reweighting needs the package cvxpy, which is not installed: pip install 'dpsyn[reweighting]'")


def test_the_tests_import_nothing_from_bench():
    """The suite runs on a clean checkout without the benchmarks: bench/ may use tests' fixtures, never the
    other way round."""
    import ast
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(m == "bench" or m.startswith("bench.") for m in modules), path.name


def test_every_import_of_our_modules_names_the_package():
    """pytest puts the checkout on the path, so ``import lib.tuning`` would load a second copy of a module
    (two tuning tables): every import of our code goes through ``dpsyn``."""
    import ast
    ours = {p.split(".")[1] for p in PACKAGES if "." in p} | {p.stem for p in ROOT.glob("*.py")}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if any(part in (".venv", "build", ".git") for part in path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in ours]
    assert found == []
