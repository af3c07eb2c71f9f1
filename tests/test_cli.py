"""The command line: what it imports, the method option groups, and a captured log free of bars."""
import subprocess
import sys
from pathlib import Path

import pytest

from dpsyn import main

ROOT = Path(__file__).resolve().parent.parent


def test_synthesis_imports_no_evaluation_libraries():
    """scikit-learn and matplotlib cost about a second; only score and report need them."""
    code = ("import sys, main; main.build_parser().parse_args(['synthesize', '--params', 'p', '--private', 'x']); "
            "print(sorted(m for m in ('sklearn', 'matplotlib', 'evaluation') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_lists_each_methods_options_in_its_own_group_and_hides_expert_ones(capsys):
    with pytest.raises(SystemExit):
        main.main(["synthesize", "--help"])
    text = capsys.readouterr().out
    assert "rap options:" in text and "only with --method rap" in text and "--device" in text.split("rap options:")[1]
    assert "superquail options:" in text and "--fair" in text.split("superquail options:")[1]
    for flag in ("--regime", "--marginals", "--group-floor", "--group-round", "--rows", "--alpha"):
        assert flag not in text  # expert knobs: accepted, listed by plan --tuning


def test_expert_options_are_still_accepted(tmp_path):
    args = main.parse_args(["--params", "p.json", "--private", "x.csv", "--regime", "two-way", "--group-round", "2"])
    assert main.method_options(args) == {"regime": "two-way", "group_round": 2}


def test_a_captured_log_holds_no_progress_bar(sprint2_files, tmp_path):
    """stderr to a pipe is not a terminal: log lines only, no carriage returns or cursor moves."""
    params, private, public = sprint2_files
    proc = subprocess.run([sys.executable, "main.py", "--params", params, "--private", private, "--public", public,
                           "--output", tmp_path / "s.csv", "--on-invalid", "clip", "--seed", "2",
                           "--group-columns", "YEAR"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "dpsyn eps=1" in proc.stderr and "run eps=10" in proc.stderr
    assert "\r" not in proc.stderr and "\x1b[" not in proc.stderr
