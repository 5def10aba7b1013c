#!/usr/bin/env bash
# Advisor narrowness on the community histories (issue 27): for each
# consecutive pair of one sandbox's OpenShell YAML under
# ../shared/fixtures/community*/, the later version's new endpoints are
# replayed as denials against the earlier one, `suggest` proposes a change,
# and the requests the suggestion and the authors' later version each admit
# beyond the earlier version are counted on a sampled domain
# (bench/suggest_history.py says how). Prints a Markdown table; per-pair
# progress goes to stderr, the logs and bundles to target/bench/suggest-history.
# Uses target/release/openshell-policy as built by `scripts/build-cli --release`;
# set OPENSHELL_POLICY to another binary, FIXTURES to another fixture tree.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${OPENSHELL_POLICY:-target/release/openshell-policy}
fixtures=${FIXTURES:-../shared/fixtures}
[ -x "$bin" ] || scripts/build-cli --release
out=target/bench/suggest-history
rm -rf "$out"
mkdir -p "$out"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "date: $(date -u +%Y-%m-%d)"
echo "binary: $bin ($("$bin" --version))"
echo
start=${EPOCHREALTIME/[.,]/}
python3 bench/suggest_history.py "$(realpath "$bin")" "$(realpath "$out")" "$(realpath "$fixtures")"
end=${EPOCHREALTIME/[.,]/}
echo
echo "wall time: $(( (end - start) / 1000000 )).$(( (end - start) / 100000 % 10 )) s"
