#!/usr/bin/env bash
# The evaluation report as a reader first sees it: releases the demo (seeded, histogram, fast), writes
# its report, and renders the page in headless Chromium; prints the screenshot's path.
#
#     bash bench/report_screenshot.sh [OUT_DIR]        (needs chromium: apt-get install chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/out/report}"
mkdir -p "$out"
py=.venv/bin/python
"$py" main.py --params parameters.json --private data/demo/private.csv --public data/demo/public.csv \
  --output "$out/submission.csv" --on-invalid drop --seed 1 --quiet >/dev/null
"$py" main.py report --params parameters.json --real data/demo/private.csv \
  --synthetic "dpsyn=$out/submission.csv" --target OWN_RENT --output "$out/report.html" --quiet >/dev/null
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1800 \
  --screenshot="$out/report.png" "file://$(realpath "$out/report.html")" 2>/dev/null
echo "$out/report.png"
