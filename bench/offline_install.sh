#!/usr/bin/env bash
# Proof that the release installs and runs in a sealed room: a fresh clone of this checkout with a
# wheelhouse (./run.sh bundle), in a network namespace with no network at all and with pip's own
# configuration and environment switched off, sets itself up and releases the bundled demo.
#
#     bash bench/offline_install.sh          (as root: it makes a network namespace; a few minutes)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
[ -d "$here/wheelhouse" ] || (cd "$here" && ./run.sh bundle >/dev/null)
git clone --quiet "$here" "$work/repo"
cp -r "$here/wheelhouse" "$work/repo/wheelhouse"
cd "$work/repo"
# no network (a fresh namespace has only a loopback that is down) and no pip configuration or index
unshare --net env -i PATH="$PATH" HOME="$work" PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 \
  bash -c 'ip link show 2>/dev/null | grep -q "state UP" && { echo "network is up" >&2; exit 1; }
           ./run.sh --seed 1 --quiet --output output/submission.csv'
echo "offline install and demo release: ok ($(wc -l < output/submission.csv) lines in output/submission.csv)"
