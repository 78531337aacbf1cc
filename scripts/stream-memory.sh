#!/usr/bin/env bash
# stream-memory.sh measures the coordinator's memory per open stream: for each count N given
# (default: 1000 10000), it starts a fresh coordinator (its own process, SQLite in a temporary
# data dir, Prometheus metrics on its own port), PROVIDERS simulated providers (one process each,
# SLOTS jobs at once, slow: TPS tokens a second after the first), a buyer key with credit, and
# then `shareai bench --hold -c N`: N streams open at once, each past its first token, while
# bench reads the coordinator's RSS and heap from /metrics before, during and after.
#
#   scripts/stream-memory.sh              # 1,000 and 10,000 streams
#   scripts/stream-memory.sh 500          # one run of 500
#   JSON=1 scripts/stream-memory.sh       # bench's JSON report instead of text
#
# Settings (environment): PROVIDERS (10), SLOTS (1000 per provider and model), TPS (0.5),
# MAX_TOKENS (2000: streams last MAX_TOKENS/TPS seconds, far longer than the run), SETTLE (5s:
# how long all streams stay open before the reading), PORT (18080), METRICS_PORT (19464),
# BIN (a binary to use instead of building one), KEEP=1 (keep the data dirs and logs), H2C=1
# (the buyers speak HTTP/2 without TLS: many streams per connection),
# COORDINATOR_ENV (variables for the coordinator only, such as "GOGC=50",
# "GODEBUG=adaptivestackstart=0", or "GOMEMLIMIT=230MiB": with Go's default GOGC=100 the heap
# grows to twice what is live, and the stacks scanned, before the garbage collector runs, so a
# soft memory limit is what holds the RSS near the memory actually in use).
#
# Needs PROVIDERS×SLOTS ≥ N, and file descriptors for N connections in the coordinator and in
# bench: it raises `ulimit -n` to 65536 when it may.
set -euo pipefail

PROVIDERS=${PROVIDERS:-10}
SLOTS=${SLOTS:-1000}
TPS=${TPS:-0.5}
MAX_TOKENS=${MAX_TOKENS:-2000}
SETTLE=${SETTLE:-5s}
PORT=${PORT:-18080}
METRICS_PORT=${METRICS_PORT:-19464}
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(1000 10000)

cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
	BIN=$(mktemp -d)/shareai
	go build -o "$BIN" ./cmd/shareai
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "# $(nproc) CPUs, ulimit -n $(ulimit -n), somaxconn $(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo ?), $("$BIN" version)" >&2

pids=()
stop() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap stop EXIT

for n in "${COUNTS[@]}"; do
	if [ $((PROVIDERS * SLOTS)) -lt "$n" ]; then
		echo "stream-memory: $PROVIDERS providers × $SLOTS slots < $n streams; raise PROVIDERS or SLOTS" >&2
		exit 2
	fi
	dir=$(mktemp -d -t shareai-stream-memory-XXXX)
	url=http://127.0.0.1:$PORT
	"$BIN" keys create --data-dir "$dir" --provider --account bench-provider 2>/dev/null >"$dir/provider-token"
	"$BIN" keys create --data-dir "$dir" --account bench-buyer 2>/dev/null >"$dir/api-key"
	"$BIN" admin credit --data-dir "$dir" bench-buyer 10000 >/dev/null 2>&1

	env ${COORDINATOR_ENV:-} "$BIN" coordinator --data-dir "$dir" --addr "127.0.0.1:$PORT" --metrics-addr "127.0.0.1:$METRICS_PORT" \
		--trust-new-nodes --drain-timeout 5s --log-level warn >"$dir/coordinator.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do curl -sf "$url/healthz" >/dev/null && break || sleep 0.1; done
	for i in $(seq "$PROVIDERS"); do
		"$BIN" provider --engine sim --coordinator "$url" --token "$(cat "$dir/provider-token")" \
			--data-dir "$dir/node-$i" --name "sim-$i" --control "" --max-concurrent "$SLOTS" \
			--sim-ttft 0 --sim-tps "$TPS" --log-level warn >"$dir/provider-$i.log" 2>&1 &
		pids+=($!)
	done
	for _ in $(seq 300); do
		nodes=$(curl -s -H "Authorization: Bearer $(cat "$dir/api-key")" "$url/v1/models" | grep -o '"nodes":[0-9]*' | head -1 | cut -d: -f2 || true)
		[ "${nodes:-0}" -ge "$PROVIDERS" ] && break
		sleep 0.2
	done
	if [ "${nodes:-0}" -lt "$PROVIDERS" ]; then
		echo "stream-memory: only ${nodes:-0} of $PROVIDERS providers connected; logs in $dir" >&2
		exit 1
	fi
	sleep 2 # let the coordinator settle before the first reading

	echo "## $n streams: $PROVIDERS providers × $SLOTS slots, $TPS tokens/s, max_tokens $MAX_TOKENS" >&2
	args=(--url "$url" --key "$(cat "$dir/api-key")" --hold -c "$n" --max-tokens "$MAX_TOKENS"
		--metrics "http://127.0.0.1:$METRICS_PORT/metrics" --settle "$SETTLE" --timeout 5m)
	[ -n "${JSON:-}" ] && args+=(--json)
	[ -n "${H2C:-}" ] && args+=(--h2c)
	"$BIN" bench "${args[@]}"

	stop
	if [ -n "${KEEP:-}" ]; then echo "# data and logs: $dir" >&2; else rm -rf "$dir"; fi
done
