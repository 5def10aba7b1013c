#!/usr/bin/env bash
# Gateway figures (issue 9), both backends: the benchmark program
# gateway/benches/gateway.rs against the release openshell-gateway, over
# HTTPS on loopback. PostgreSQL is the test server of
# scripts/postgres-test-server.
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 8192 # 1,000 parked polls: a socket each, on both sides
pg=$(scripts/postgres-test-server)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/ {print $2}') GiB"
RUST_BACKTRACE=0 cargo bench -q -p gateway --bench gateway -- sqlite "$pg"
