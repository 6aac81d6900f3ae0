#!/usr/bin/env bash
# profile.sh -- where edictkv spends a workload of compare.sh: profiles of a
# 3-process edictkv cluster under etcd's benchmark tool.
#
# It builds edictkv from this checkout, starts 3 processes on 127.0.0.1 with
# --pprof (fsync on, as compare.sh), waits for a leader, runs one workload with
# compare.sh's flags (put64, put1, range_l64, range_s64, range_l1, range_s1) and,
# while it runs, takes from the leader and from one follower:
#   cpu.pprof      a CPU profile of PROFILE_SECONDS
#   trace.out      an execution trace of TRACE_SECONDS (go tool trace: the
#                  latency tail — GC, scheduling, syscalls — shows there)
#   allocs.pprof, mutex.pprof, block.pprof   (the last two as the runtime
#                  records them by default: mutex/block profiling is off
#                  unless the process turns it on, so they may be empty)
# then prints the benchmark's summary and the top of the leader's CPU profile.
# Profiling costs some speed: use compare.sh for figures, this for where they go.
#
# Env (defaults): WORKLOAD=put1, TOTAL=20000 (requests; put64/range_*64 use 64
# clients over 8 conns to all members, the *1 workloads 1 client to the leader),
# PROFILE_SECONDS=10, TRACE_SECONDS=3, OUT=/tmp/edictkv-profile-<time>,
# BIN=/tmp/edictlog-etcd/bin (etcd's benchmark and etcdctl, by install.sh),
# EDICTKV_EXTRA_FLAGS="".
#
# Example: WORKLOAD=put1 TOTAL=8000 bash bench/etcd/profile.sh
#          go tool pprof -http=: /tmp/edictkv-profile-*/leader/cpu.pprof
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
WORKLOAD=${WORKLOAD:-put1}
TOTAL=${TOTAL:-20000}
PROFILE_SECONDS=${PROFILE_SECONDS:-10}
TRACE_SECONDS=${TRACE_SECONDS:-3}
OUT=${OUT:-/tmp/edictkv-profile-$(date +%Y%m%d-%H%M%S)}
export ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
export BIN=${BIN:-/tmp/edictlog-etcd/bin}
EDICTKV_EXTRA_FLAGS=${EDICTKV_EXTRA_FLAGS:-}
N=3

log() { echo "[profile $(date +%H:%M:%S)] $*" >&2; }
die() { log "FATAL: $*"; exit 1; }
case $WORKLOAD in put64 | put1 | range_l64 | range_s64 | range_l1 | range_s1) ;; *) die "unknown WORKLOAD $WORKLOAD" ;; esac
for tool in go jq curl ss; do command -v "$tool" >/dev/null || die "missing tool: $tool"; done

mkdir -p "$OUT"
bash "$SCRIPT_DIR/install.sh" >&2
log "building edictkv from $REPO_ROOT"
(cd "$REPO_ROOT" && go build -o "$OUT/edictkv" ./cmd/edictkv)

# Free ports below the ephemeral range, as compare.sh picks them.
PORTS=()
eph_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range)
while ((${#PORTS[@]} < 3 * N)); do
  p=$((20000 + RANDOM % (eph_low - 20001)))
  [[ " ${PORTS[*]} " == *" $p "* ]] && continue
  ss -Htan "( sport = :$p )" | grep -vq '^TIME-WAIT' && continue
  PORTS+=("$p")
done
peers="" EPS="" HTTPS=()
for ((i = 0; i < N; i++)); do
  peers+="${peers:+,}$((i + 1))=127.0.0.1:${PORTS[i]}/127.0.0.1:${PORTS[N + i]}"
  EPS+="${EPS:+,}127.0.0.1:${PORTS[2 * N + i]}"
  HTTPS+=("127.0.0.1:${PORTS[N + i]}")
done
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
for ((i = 0; i < N; i++)); do
  # shellcheck disable=SC2086 # a list of words on purpose
  "$OUT/edictkv" serve --id $((i + 1)) --data-dir "$OUT/m$i.data" \
    --raft-addr "127.0.0.1:${PORTS[i]}" --http-addr "${HTTPS[i]}" \
    --grpc-addr "127.0.0.1:${PORTS[2 * N + i]}" --peers "$peers" --log-level warn --pprof \
    $EDICTKV_EXTRA_FLAGS >"$OUT/m$i.log" 2>&1 &
  PIDS+=($!)
done

ctl() { "$BIN/etcdctl" --endpoints="$EPS" --dial-timeout=2s --command-timeout=5s "$@"; }
for ((t = 0; ; t++)); do
  ((t < 300)) || die "no leader within 30 s; logs in $OUT"
  ready=1
  for h in "${HTTPS[@]}"; do curl -fsS "http://$h/readyz" >/dev/null 2>&1 || ready=0; done
  leader=$(ctl endpoint status -w json 2>/dev/null | jq -r '.[] | select(.Status.leader == .Status.header.member_id) | .Endpoint' || true)
  [[ $ready == 1 && -n $leader ]] && break
  sleep 0.1
done
li=-1 fi=-1
for ((i = 0; i < N; i++)); do
  if [[ 127.0.0.1:${PORTS[2 * N + i]} == "$leader" ]]; then li=$i; elif ((fi < 0)); then fi=$i; fi
done
log "leader ${HTTPS[li]} (gRPC $leader); follower ${HTTPS[fi]}"
ctl put profkey "$(head -c 256 /dev/zero | tr '\0' v)" >/dev/null

all=(--endpoints="$EPS" --clients=64 --conns=8)
one=(--endpoints="$leader" --clients=1 --conns=1)
case $WORKLOAD in
  put64) args=("${all[@]}" put --key-size=8 --val-size=256 --total="$TOTAL" --sequential-keys --key-space-size="$TOTAL") ;;
  put1) args=("${one[@]}" put --key-size=8 --val-size=256 --total="$TOTAL" --sequential-keys --key-space-size="$TOTAL") ;;
  range_l64) args=("${all[@]}" range profkey --consistency=l --total="$TOTAL") ;;
  range_s64) args=("${all[@]}" range profkey --consistency=s --total="$TOTAL") ;;
  range_l1) args=("${one[@]}" range profkey --consistency=l --total="$TOTAL") ;;
  range_s1) args=("${one[@]}" range profkey --consistency=s --total="$TOTAL") ;;
esac
log "running $WORKLOAD: benchmark ${args[*]}"
"$BIN/benchmark" --precise "${args[@]}" >"$OUT/benchmark.txt" 2>&1 &
bench=$!
sleep 1 # past the clients' connection setup
takes=()
for role in leader follower; do
  h=${HTTPS[li]}
  [[ $role == follower ]] && h=${HTTPS[fi]}
  mkdir -p "$OUT/$role"
  curl -fsS -o "$OUT/$role/cpu.pprof" "http://$h/debug/pprof/profile?seconds=$PROFILE_SECONDS" &
  takes+=($!)
done
curl -fsS -o "$OUT/leader/trace.out" "http://${HTTPS[li]}/debug/pprof/trace?seconds=$TRACE_SECONDS" &
takes+=($!)
for pid in "${takes[@]}"; do wait "$pid" || log "a profile could not be taken (pid $pid)"; done
for role in leader follower; do
  h=${HTTPS[li]}
  [[ $role == follower ]] && h=${HTTPS[fi]}
  for p in allocs mutex block; do curl -fsS -o "$OUT/$role/$p.pprof" "http://$h/debug/pprof/$p" || true; done
done
kill -0 "$bench" 2>/dev/null && log "the benchmark outlived the profile (raise TOTAL or lower PROFILE_SECONDS for a profile of the whole run)"
wait "$bench" || die "benchmark failed: $(tail -n 20 "$OUT/benchmark.txt")"
tr '\r' '\n' <"$OUT/benchmark.txt" | sed -n '/^Summary:/,/^Latency distribution:/p'
tr '\r' '\n' <"$OUT/benchmark.txt" | grep -E ' (50|90|99|99\.9)% in '
echo
echo "leader CPU profile ($OUT/leader/cpu.pprof), by cumulative time:"
go tool pprof -top -cum -nodecount=40 "$OUT/edictkv" "$OUT/leader/cpu.pprof" 2>/dev/null | sed -n '1,50p'
log "profiles in $OUT (go tool pprof -http=: $OUT/leader/cpu.pprof; go tool trace $OUT/leader/trace.out)"
