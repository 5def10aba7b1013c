#!/usr/bin/env bash
# Peak and idle memory of one gateway process for one big proposal
# (issue 29, item 7): a base of N endpoints (bench/prover_gen.py) approved,
# then its one-widening variant proposed and proved. Prints VmHWM (peak)
# and VmRSS after the proof and after an idle pause, from /proc/PID/status.
#
# Usage: bench/gateway_big.sh [N] [GATEWAY_BINARY] [SERVE_FLAGS...]
# (default N=2000, target/release/openshell-gateway; SQLite in a temp dir).
# IDLE=S sets the pause (default 15); SMAPS=1 adds the biggest resident
# mappings at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
gw=${2:-target/release/openshell-gateway}
shift $(( $# > 2 ? 2 : $# ))
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 bench/prover_gen.py "$work/p" "$n" 50
"$gw" init --dir "$work/d" >/dev/null
port=$(( 20000 + RANDOM % 20000 ))
"$gw" serve --dir "$work/d" --listen "127.0.0.1:$port" --prove-timeout-ms 60000 "$@" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/serve.log" && break; sleep 0.1; done
conn=(--gateway "https://127.0.0.1:$port" --ca "$work/d/ca.pem")
mem() { awk '/VmHWM|VmRSS/ {printf "%s %s %s  ", $1, $2, $3}' "/proc/$pid/status"; echo; }
for who in alice bob; do
  "$gw" token create "$who" --role author "${conn[@]}" --token-file "$work/d/admin.token" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' >"$work/$who.token"
done
echo "N=$n endpoints, source $(wc -c <"$work/p/old.policy") bytes; started: $(mem)"
if "$gw" propose big "$work/p/old.policy" "${conn[@]}" --token-file "$work/alice.token" | head -1; then
  "$gw" approve 1 "${conn[@]}" --token-file "$work/bob.token"
fi
echo "base approved (or refused): $(mem)"
start=$(date +%s.%N)
"$gw" propose big "$work/p/new.policy" "${conn[@]}" --token-file "$work/alice.token" | head -1 || true
echo "big proposal answered in $(echo "$(date +%s.%N) - $start" | bc) s: $(mem)"
sleep "${IDLE:-15}"
echo "idle ${IDLE:-15} s later: $(mem)"
[ -n "${SMAPS:-}" ] && awk '/^[0-9a-f]+-/ {name=$6} /^Rss:/ {r[name]+=$2} END {for (n in r) if (r[n] > 4096) print r[n], "kB", (n==""?"[anon]":n)}' "/proc/$pid/smaps" | sort -rn | head -5
true
