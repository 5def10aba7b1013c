#!/usr/bin/env bash
# Language figures (issue "policy language"): whole-process `check` on a
# typical policy, whole-process check + compile of a 2,000-endpoint policy,
# and the in-process numbers from `cargo bench -p policy-lang --bench lang`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bins -q
cargo bench -p policy-lang --bench lang -q 2>/dev/null | grep -v '^$'
bin=target/release/openshell-policy
typical=policies/github-readwrite.policy
large=target/bench/large.policy
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
if command -v hyperfine >/dev/null; then
  hyperfine -N --warmup 20 --runs 200 "$bin check $typical" --export-json target/bench/check.json | grep -E 'Time|Range'
  hyperfine -N --warmup 3 --runs 30 "$bin compile $large -o target/bench/large-cli.bundle" | grep -E 'Time|Range'
else
  for cmd in "check $typical" "compile $large -o target/bench/large-cli.bundle"; do
    start=$(date +%s%N); for _ in $(seq 50); do $bin $cmd >/dev/null; done; end=$(date +%s%N)
    echo "$cmd: mean $(( (end - start) / 50000 )) µs over 50 runs"
  done
fi
