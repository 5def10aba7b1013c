#!/usr/bin/env bash
# The supervisor's figures (docs/benchmarks.md, "Supervisor"): brokered
# connect latency, start → exec with a 2,000-endpoint bundle, DNS stub
# answer. Needs root (it creates a network namespace) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p supervisor --bench supervisor
