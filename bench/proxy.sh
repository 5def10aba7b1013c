#!/usr/bin/env bash
# The L7 proxy's figures (docs/benchmarks.md, "L7 proxy"): added latency per
# request, throughput with 8 concurrent clients, RSS with 1,000 open
# connections, a judged WebSocket message, against a local HTTPS upstream
# (BENCH_ONLY=websocket, graphql or credential: those figures alone). Needs
# root (it creates a network namespace); everything stays on loopback
# inside it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p supervisor --bench proxy
