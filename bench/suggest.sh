#!/usr/bin/env bash
# `suggest` figure (issue 27): the whole process on a 10,000-line deny
# log (bench/suggest_gen.py): read, narrow, patch, compile, prove with
# the diff --prove prover, replay every distinct denied request.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p openshell-policy
bin=target/release/openshell-policy
out=target/bench/suggest
mkdir -p "$out"
cat >"$out/bench.policy" <<'POLICY'
policy "bench" {
  run_as user sandbox group sandbox
  fs read /usr

  credential github_pat {
    secret env GITHUB_TOKEN
    inject header Authorization "Bearer {secret}"
    hosts api.github.com
  }

  allow /usr/bin/gh -> api.github.com:443 http {
    allow GET /user
  }
}
POLICY
digest=$("$bin" compile "$out/bench.policy" -o "$out/bench.bundle" | grep -o 'sha256:[0-9a-f]*')
python3 bench/suggest_gen.py 10000 bench "$digest" >"$out/deny.log"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "log: $(wc -l <"$out/deny.log") lines, $(du -k "$out/deny.log" | cut -f1) KiB"
"$bin" suggest "$out/bench.policy" --from "$out/deny.log" --format json >"$out/out.json" || true
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('answer:', len(d['suggestions']), 'rules,', len(d['replay']), 'distinct requests replayed, proof', d['proof']['verdict'])" "$out/out.json"
median_ms() { # 11 runs, the median wall time in ms
  local times=()
  for _ in $(seq 11); do
    local s e; s=${EPOCHREALTIME/[.,]/}; "$@" >/dev/null 2>&1 || true; e=${EPOCHREALTIME/[.,]/}
    times+=($(( e - s )))
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 6p | awk '{printf "%.1f ms", $1 / 1000}'
}
echo "suggest, 10,000-line log, human: $(median_ms "$bin" suggest "$out/bench.policy" --from "$out/deny.log") median of 11"
echo "suggest, 10,000-line log, json: $(median_ms "$bin" suggest "$out/bench.policy" --from "$out/deny.log" --format json) median of 11"
