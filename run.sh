#!/usr/bin/env bash
# ./run.sh            install what is missing, then release the bundled demo data into output/
# ./run.sh test       install what is missing, then run the test suite (extra args go to pytest)
# ./run.sh OPTIONS    the demo release with extra main.py options, e.g. ./run.sh --seed 1
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv
if [ ! -x "$VENV/bin/python" ] || ! cmp -s requirements.txt "$VENV/.installed-requirements"; then
  echo "setting up $VENV (Python packages from requirements.txt)..." >&2
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$VENV/.installed-requirements"
fi
if [ "${1:-}" = "test" ]; then
  shift
  exec "$VENV/bin/python" -m pytest -q "$@"
fi
# --on-invalid drop: 62 private rows carry an industry code (INDP) that never occurs in the
# public states, so it is not in the schema; they are dropped and the log says so.
exec "$VENV/bin/python" main.py --params parameters.json --private data/demo/private.csv \
  --public data/demo/public.csv --output output/submission.csv --on-invalid drop "$@"
