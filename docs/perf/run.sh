#!/bin/bash
# Reproduces docs/perf/loadgen/*.json (loadgen's fanout scenario against
# this hub and the broadcaster, S from 1 000 to 19 000), then regenerates
# docs/performance.md's curves and docs/perf/*.svg with perfdoc.
#
#	docs/perf/run.sh                       # everything, 2 runs each
#	RUNS="3" SUBS="19000" HUBS="default" docs/perf/run.sh   # redo one point
#	GENERATE=0 docs/perf/run.sh            # measure only
#
# Each run writes docs/perf/loadgen/<hub>-fanout-<S>-<run>.json (loadgen's
# -json-out, as written) and a sidecar <same>.uptime: the commit measured,
# the date, and `uptime` before and after the run (the machine may be
# shared: the load averages say how much).
# The hub is pinned to CPU 0 and loadgen to CPU 1 (a 2-core machine).
# Hubs: default (examples/standalone), goroutine (the same with
# -goroutine-streams), broadcaster (internal/cmd/broadcaster).
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN=${BIN:-/tmp/perf}
OUT=${OUT:-docs/perf/loadgen}
RUNS=${RUNS:-"1 2"}
SUBS=${SUBS:-"1000 2000 5000 10000 19000"}
HUBS=${HUBS:-"default broadcaster"}
WAIT_QUIET=${WAIT_QUIET:-30s}
GENERATE=${GENERATE:-1}

mkdir -p "$BIN" "$OUT"
go build -o "$BIN/standalone" ./examples/standalone
go build -o "$BIN/broadcaster" ./internal/cmd/broadcaster
(cd ../shared/loadgen 2>/dev/null || cd "${LOADGEN_DIR:?set LOADGEN_DIR to the loadgen sources}"; go build -o "$BIN/loadgen" .)
# S + 64 descriptors for each process: 19 000 needs a hard limit of at least 19 064.
ulimit -n "$(ulimit -Hn)"
commit=$(git rev-parse --short HEAD)

# About 4 M deliveries per run (3 000 updates at most), -max-pub-time 40s:
# each run takes under a minute, even for the broadcaster.
pubs_for() { local p=$((4000000 / $1)); echo $((p > 3000 ? 3000 : p)); }

for run in $RUNS; do
	for s in $SUBS; do
		for hub in $HUBS; do
			case $hub in
			default) cmd=("$BIN/standalone" -max-connections 40000) ;;
			goroutine) cmd=("$BIN/standalone" -max-connections 40000 -goroutine-streams) ;;
			broadcaster) cmd=("$BIN/broadcaster") ;;
			*) echo "run.sh: unknown hub $hub" >&2; exit 2 ;;
			esac
			base="$OUT/$hub-fanout-$s-$run"
			{ echo "commit $commit"; echo "date $(date -u +%Y-%m-%dT%H:%MZ)"; echo "before $(uptime)"; } > "$base.uptime"
			taskset -c 1 "$BIN/loadgen" -reader epoll -hub-cpu 0 -wait-quiet "$WAIT_QUIET" \
				-subs "$s" -pubs "$(pubs_for "$s")" -max-pub-time 40s -scenarios fanout \
				-hub-log "$BIN/hub-$hub-$s-$run.log" -json-out "$base.json" -- "${cmd[@]}" \
				> "$BIN/loadgen-$hub-$s-$run.out"
			echo "after $(uptime)" >> "$base.uptime"
			echo "$base: $(tail -n 1 "$base.uptime")" >&2
		done
	done
done

if [ "$GENERATE" = 1 ]; then
	go run ./internal/cmd/perfdoc
fi
