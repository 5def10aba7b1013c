#!/usr/bin/env bash
# Prover figures (issue 3): whole-process `diff --prove` of two typical
# policies, of two generated 1,000-endpoint × 50-binary policies with one
# widening buried inside (it must be found), and peak memory of the latter.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bins -q
bin=target/release/openshell-policy
out=target/bench/prover
mkdir -p "$out/fragments"
cp policies/fragments/*.policy "$out/fragments/"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(z3 --version 2>/dev/null || echo 'libz3')"

# Typical: github-readwrite against itself with one deny rule removed
# (a widening), and claude-code against itself (no finding).
cp policies/github-readwrite.policy "$out/old.policy"
grep -v 'deny \* /repos/\*/\*/rulesets/\*\*' policies/github-readwrite.policy >"$out/new.policy"
cp policies/claude-code.policy "$out/claude.policy"
median_ms() { # runs a command 21 times, prints the median wall time in ms
  local times=()
  for _ in $(seq 21); do
    local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N)
    times+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 11p | awk '{printf "%.1f ms", $1 / 1000}'
}
echo "typical, widened (github-readwrite minus a deny rule): $(median_ms $bin diff --prove "$out/old.policy" "$out/new.policy" --format json) median of 21"
echo "typical, unchanged (claude-code): $(median_ms $bin diff --prove "$out/claude.policy" "$out/claude.policy" --format json) median of 21"

# Large: 1,000 endpoints × 50 binaries, one widening buried inside.
host=$(python3 bench/prover_gen.py "$out/large" 1000 50)
set +e
/usr/bin/time -f '%e %M' -o "$out/large.time" $bin diff --prove "$out/large/old.policy" "$out/large/new.policy" --format json >"$out/large.json"
rc=$?
set -e
read -r wall rss < <(tail -1 "$out/large.time")
found=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(any(f['witness']['host']==sys.argv[2] for f in d['findings']))" "$out/large.json" "$host")
echo "large (1,000 endpoints × 50 binaries): ${wall} s wall, peak RSS $((rss / 1024)) MiB, exit $rc, buried widening at $host found: $found"
set +e
/usr/bin/time -f '%e %M' -o "$out/check.time" $bin check "$out/large/old.policy" --format json >/dev/null
set -e
read -r wall rss < <(tail -1 "$out/check.time")
echo "large check (single-policy risk queries included): ${wall} s wall, peak RSS $((rss / 1024)) MiB"
