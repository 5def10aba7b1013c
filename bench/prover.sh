#!/usr/bin/env bash
# Prover figures (issue 3): whole-process `diff --prove` of two typical
# policies, of two generated 1,000-endpoint × 50-binary policies with one
# widening buried inside (it must be found), and peak memory of the latter.
set -euo pipefail
cd "$(dirname "$0")/.."
# The CLI alone, as shipped: without libz3; the solver it hands large
# proofs to is built apart (one build would link Z3 into both).
cargo build --release --bins -q -p openshell-policy-solver
scripts/build-cli --release -q
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
  # $EPOCHREALTIME is read without a fork; `$(date +%s%N)` forked and
  # exec'd `date` inside the timed interval, adding 2-3 ms to every row.
  local times=()
  for _ in $(seq 21); do
    local s e; s=${EPOCHREALTIME/[.,]/}; "$@" >/dev/null 2>&1 || true; e=${EPOCHREALTIME/[.,]/}
    times+=($(( e - s )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 11p | awk '{printf "%.1f ms", $1 / 1000}'
}
echo "typical, widened (github-readwrite minus a deny rule): $(median_ms $bin diff --prove "$out/old.policy" "$out/new.policy" --format json) median of 21"
echo "typical, unchanged (claude-code): $(median_ms $bin diff --prove "$out/claude.policy" "$out/claude.policy" --format json) median of 21"
# A change that adds a deny rule: nothing new, every question unsatisfiable.
sed 's#^    deny DELETE /repos/\*/\*$#    deny DELETE /repos/*/*\n    deny * /repos/*/*/keys/**#' policies/github-readwrite.policy >"$out/narrowed.policy"
echo "typical, narrowed (github-readwrite plus a deny rule, no finding): $(median_ms $bin diff --prove "$out/old.policy" "$out/narrowed.policy" --format json) median of 21"
# The same policy in two files with different layout: not byte-identical,
# the same digest.
sed 's/^  /    /' policies/claude-code.policy >"$out/claude-indented.policy"
echo "typical, same digest, different text (claude-code reindented): $(median_ms $bin diff --prove "$out/claude.policy" "$out/claude-indented.policy" --format json) median of 21"
echo "process start alone (--version): $(median_ms $bin --version) median of 21"

# Where the time of the typical widened pair goes, inside the process
# (PROVER_TIMING=1; median of 21 of each phase).
phases() {
  for _ in $(seq 21); do
    PROVER_TIMING=1 $bin diff --prove "$@" --format json 2>&1 >/dev/null | python3 -c '
import re, sys
units = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}
def ms(t):
    m = re.match(r"([0-9.]+)(ns|µs|us|ms|s)$", t)
    return float(m.group(1)) * units[m.group(2)] if m else 0.0
out = {}
for line in sys.stdin:
    m = re.match(r"diff: compile old (\S+), new (\S+), registry (\S+), prove (\S+)", line)
    if m:
        out.update(compile_old=ms(m.group(1)), compile_new=ms(m.group(2)), registry=ms(m.group(3)), prove=ms(m.group(4)))
    m = re.match(r"prover: partitions: binaries ([^,\s]+), hosts ([^,\s]+), paths ([^,\s]+)", line)
    if m:
        out.update(binaries=ms(m.group(1)), hosts=ms(m.group(2)), paths=ms(m.group(3)))
    m = re.match(r"prover: domain (\S+)", line)
    if m:
        out["domain"] = ms(m.group(1))
    m = re.match(r"prover: .* regions in (\S+) \(", line)
    if m:
        out["questions"] = out.get("questions", 0.0) + ms(m.group(1))
    m = re.match(r"prover: setup (\S+)", line)
    if m:
        out["setup"] = ms(m.group(1))
print(" ".join(f"{k}={v:.3f}" for k, v in out.items()))
'
  done | python3 -c '
import sys, statistics
rows = [dict(kv.split("=") for kv in l.split()) for l in sys.stdin if l.strip()]
keys = rows[0].keys() if rows else []
print(", ".join(f"{k} {statistics.median(float(r[k]) for r in rows):.2f} ms" for k in keys))
'
}
echo "in process, typical widened pair: $(phases "$out/old.policy" "$out/new.policy")"
echo "in process, typical narrowed pair: $(phases "$out/old.policy" "$out/narrowed.policy")"
echo "  (domain and setup are cumulative from the start of prove: setup includes domain and models;"
echo "   binaries, hosts and paths are the string atoms inside domain; questions is the sum of every"
echo "   question's search, Z3 included when one needs it)"

# One change in a large policy costs about what the change costs: the
# generated pairs (one deny rule removed), whole process, medians of 21.
for n in 300 1000 3000; do
  python3 bench/prover_gen.py "$out/gen$n" $n >/dev/null
  echo "generated, $n endpoints, one widening: $(median_ms $bin diff --prove "$out/gen$n/old.policy" "$out/gen$n/new.policy" --format json) median of 21"
done

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
/usr/bin/time -f '%e %M' -o "$out/check.time" $bin check --prove "$out/large/old.policy" --format json >/dev/null
set -e
read -r wall rss < <(tail -1 "$out/check.time")
echo "large check (single-policy risk queries included): ${wall} s wall, peak RSS $((rss / 1024)) MiB"
