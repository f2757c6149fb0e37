#!/bin/bash
# Reproduces docs/perf/loadgen/*.json (loadgen's fanout scenario against
# this hub's two engines and the broadcaster, S from 1 000 to 19 000) and
# docs/perf/streambench/*.json (2 000 idle streams over HTTP/1.1, HTTP/1.1
# over TLS and HTTP/2), then regenerates docs/performance.md's curves and
# docs/perf/*.svg with perfdoc.
#
#	docs/perf/run.sh                       # everything, 3 runs each (20 to 40 minutes)
#	RUNS="3" SUBS="19000" HUBS="default" PROTOS= docs/perf/run.sh   # redo one point
#	HUBS= PROTOS="h2" docs/perf/run.sh     # redo the HTTP/2 streams only
#	GENERATE=0 docs/perf/run.sh            # measure only
#
# Each run writes docs/perf/loadgen/<hub>-fanout-<S>-<run>.json (loadgen's
# -json-out, as written) and a sidecar <same>.uptime: the commit measured,
# the date, and `uptime` before and after the run (the machine may be
# shared: the load averages say how much).
# The hub is pinned to CPU 0 and loadgen to CPU 1 (a 2-core machine).
# Hubs: default (examples/standalone), goroutine (the same with
# -goroutine-streams), broadcaster (internal/cmd/broadcaster). Streams:
# h1, h1-tls, h2 (STREAM_CASES below), on CPU 0.
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN=${BIN:-/tmp/perf}
OUT=${OUT:-docs/perf/loadgen}
RUNS=${RUNS:-"1 2 3"}
SUBS=${SUBS:-"1000 2000 5000 10000 19000"}
HUBS=${HUBS-"default goroutine broadcaster"}
PROTOS=${PROTOS-"h1 h1-tls h2"}
STREAM_CASES=${STREAM_CASES:-"hub:h1:1 hub:h1-tls:1 hub:h2:1 hub:h2:100 floor:h2:1 floor:h2:100 standalone:h1-tls:1 standalone:h2:1 standalone:h2:100"}
WAIT_QUIET=${WAIT_QUIET:-30s}
GENERATE=${GENERATE:-1}

mkdir -p "$BIN" "$OUT"
go build -o "$BIN/standalone" ./examples/standalone
go build -o "$BIN/broadcaster" ./internal/cmd/broadcaster
go build -o "$BIN/streambench" ./internal/cmd/streambench
(cd ../shared/loadgen 2>/dev/null || cd "${LOADGEN_DIR:?set LOADGEN_DIR to the loadgen sources}"; go build -o "$BIN/loadgen" .)
# S + 64 descriptors for each process: 19 000 needs a hard limit of at least 19 064.
ulimit -n "$(ulimit -Hn)"
commit=$(git rev-parse --short HEAD)

# sidecar FILE WHEN: the commit and the date (WHEN=before), or uptime's
# line after the run.
sidecar() {
	if [ "$2" = before ]; then
		{ echo "commit $commit"; echo "date $(date -u +%Y-%m-%dT%H:%MZ)"; echo "before $(uptime)"; } > "$1"
	else
		echo "after $(uptime)" >> "$1"
	fi
}

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
			sidecar "$base.uptime" before
			taskset -c 1 "$BIN/loadgen" -reader epoll -hub-cpu 0 -wait-quiet "$WAIT_QUIET" \
				-subs "$s" -pubs "$(pubs_for "$s")" -max-pub-time 40s -scenarios fanout \
				-hub-log "$BIN/hub-$hub-$s-$run.log" -json-out "$base.json" -- "${cmd[@]}" \
				> "$BIN/loadgen-$hub-$s-$run.out"
			sidecar "$base.uptime" after
			echo "$base: $(tail -n 1 "$base.uptime")" >&2
		done
	done
done

# Idle streams: memory per stream (then, for a connection each, 100
# updates one at a time to all). Each case is LABEL:PROTO:SHARE: the
# label says what serves the streams (hub: streambench serve, the
# library's hub with /stats; floor: streambench serve -handler floor,
# net/http alone, no hub; standalone: examples/standalone with
# -tls-cert, whose RSS only is measured), SHARE the streams per client
# (HTTP/2: one connection, as a browser's tabs share it).
STREAMS_OUT=${STREAMS_OUT:-docs/perf/streambench}
mkdir -p "$STREAMS_OUT"
if [ -n "$PROTOS" ] && [ ! -f "$BIN/cert.pem" ]; then
	(cd "$BIN" && go run "$(go env GOROOT)/src/crypto/tls/generate_cert.go" --host 127.0.0.1 --ecdsa-curve P256 2>/dev/null)
fi
for run in $RUNS; do
	for case in $STREAM_CASES; do
		IFS=: read -r label proto share <<< "$case"
		case " $PROTOS " in *" $proto "*) ;; *) continue ;; esac
		url=https://127.0.0.1:18443/.well-known/mercure
		idle=(-share "$share")
		# net/http alone serves no publish
		if [ "$share" = 1 ] && [ "$label" != floor ]; then idle+=(-pubs 100); fi
		tls=(-tls)
		case $proto in
		h1) url=http://127.0.0.1:18443/.well-known/mercure; tls=() ;;
		h1-tls) ;;
		h2) idle+=(-h2) ;;
		*) echo "run.sh: unknown protocol $proto" >&2; exit 2 ;;
		esac
		case $label in
		hub) serve=("$BIN/streambench" serve "${tls[@]}" -addr 127.0.0.1:18443 -stats 127.0.0.1:16060); idle+=(-stats 127.0.0.1:16060) ;;
		floor) serve=("$BIN/streambench" serve "${tls[@]}" -handler floor -addr 127.0.0.1:18443 -stats 127.0.0.1:16060); idle+=(-stats 127.0.0.1:16060) ;;
		standalone)
			serve=("$BIN/standalone" -addr 127.0.0.1:18443 -anonymous -insecure-publish -max-connections 40000 -log-level warn)
			[ ${#tls[@]} -gt 0 ] && serve+=(-tls-cert "$BIN/cert.pem" -tls-key "$BIN/key.pem")
			idle+=(-stats "") ;;
		*) echo "run.sh: unknown label $label" >&2; exit 2 ;;
		esac
		base="$STREAMS_OUT/idle-$label-$proto-$share-2000-$run"
		rm -f "$base.json"
		taskset -c 0 "${serve[@]}" 2> "$BIN/serve-$label-$proto-$share-$run.log" > /dev/null &
		pid=$!
		for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/18443) 2>/dev/null && break; sleep 0.1; done
		sidecar "$base.uptime" before
		taskset -c 1 "$BIN/streambench" idle -url "$url" "${idle[@]}" -n 2000 -pid "$pid" \
			-label "$label" -json "$base.json" > "$BIN/idle-$label-$proto-$share-$run.out"
		sidecar "$base.uptime" after
		kill "$pid"; wait "$pid" || true
		echo "$base: $(head -n 1 "$BIN/idle-$label-$proto-$share-$run.out")" >&2
	done
done

if [ "$GENERATE" = 1 ]; then
	go run ./internal/cmd/perfdoc
fi
