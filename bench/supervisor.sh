#!/usr/bin/env bash
# The supervisor's figures (docs/benchmarks.md, "Supervisor"): brokered
# connect latency, start → exec with a 2,000-endpoint bundle, DNS stub
# answer. Needs root (it creates a network namespace) and python3.
#
# Latency on a VM depends on whether idle vCPUs halt: waking one costs tens
# of microseconds, and every brokered call is a round trip through the
# supervisor. So the figures are taken twice: as the machine is, and with
# both CPUs kept out of idle by two `yes > /dev/null` (a waking process
# preempts them at once). bench/wakeup.py prints the machine's own process
# round trip in each condition.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p supervisor --bench supervisor --no-run -q 2>/dev/null
echo "## as the machine is"
python3 bench/wakeup.py
cargo bench -q -p supervisor --bench supervisor 2>/dev/null
echo
echo "## CPUs kept out of idle (two yes > /dev/null)"
spinners=()
for _ in 1 2; do yes >/dev/null & spinners+=($!); done
trap 'kill "${spinners[@]}" 2>/dev/null' EXIT
sleep 0.5
python3 bench/wakeup.py
cargo bench -q -p supervisor --bench supervisor 2>/dev/null
