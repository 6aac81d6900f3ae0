#!/usr/bin/env bash
# compare.sh -- etcd vs edictkv, side by side, measured in ONE run on this machine
# with the very same client: etcd's own `benchmark` tool, same flags, same workloads.
#
# For each round and each system (etcd MEMBERS members, then edictkv MEMBERS
# processes, and with BASE= edictkv built from that commit too; the order is
# rotated from round to round so none always runs on a "fresh" or a "tired"
# machine), it:
#   1. starts a fresh MEMBERS-member cluster on 127.0.0.1 in a new temp dir (free ports
#      picked by a helper, default durability: fsync on), waits until every member
#      is ready and a leader is known (etcdctl endpoint health; edictkv also /readyz);
#   2. runs these workloads (keys KEY_SIZE bytes, values VAL_SIZE bytes):
#        put64     put, CLIENTS clients / CONNS conns over all members, TOTAL puts,
#                  --sequential-keys --key-space-size=TOTAL
#        put1      put, 1 client / 1 conn to the leader, TOTAL1 puts (key space TOTAL1)
#        range_l64 range KEY --consistency=l, CLIENTS/CONNS over all members, READ_TOTAL
#        range_s64 range KEY --consistency=s, same
#        range_l1  range KEY --consistency=l, 1 client / 1 conn to the leader, READ_TOTAL1
#        range_s1  range KEY --consistency=s, same
#      (KEY is one key written with etcdctl before the reads). The leader is looked
#      up again right before each "to the leader" workload (etcdctl endpoint status);
#      and, only when WORKLOADS names them, the watch workloads:
#        watch          watch, CLIENTS/CONNS over all members: WATCH_STREAMS streams of
#                       WATCH_PER_STREAM watchers, all of one key, then WATCH_PUT_TOTAL
#                       puts of it as fast as the clients go; figure: events received/s
#                       (and how long creating a watcher took)
#        watch-latency  watch-latency, CLIENTS/CONNS over all members: WLAT_STREAMS
#                       streams of WLAT_WATCHERS watchers of one key, one client putting
#                       it WLAT_PUT_TOTAL times at WLAT_PUT_RATE/s; figures: each event's
#                       delay from its put's response, and the puts' latency
#        watch-get      watch-get, CLIENTS/CONNS over all members: WGET_WATCHERS watchers
#                       on WGET_STREAMS streams, each from a past revision with
#                       WGET_EVENTS events to catch up on, while one client reads a key
#                       (serializable) in a loop; figures: the catch-up (watchers x
#                       events / its duration) and the reads' rate and latency
#        slow-watch     bench/cmd/slowwatch against the leader: SLOW_WATCHERS-1 reading
#                       watchers and (every other phase) one more that never reads, all
#                       of the prefix an open-loop put load writes (SLOW_RATE puts/s for
#                       SLOW_PHASE_S s per phase, SLOW_PAIRS pairs of phases, readers
#                       alone then with the stuck one); figures: put req/s, p50/p99 of
#                       both kinds of phase and their ratio, the readers' event delay,
#                       the leader's live heap after forced GCs and its RSS. Passes
#                       when put p99 with the stuck watcher is at most 1.2x without it
#                       and the live heap it held (read while it is stuck, less after it
#                       is gone) is at most the bound slowwatch states (from its
#                       --watch-buffer, 128 responses, etcd's and edictkv's default)
#      With slow-watch in WORKLOADS, the members serve Go's profiler (etcd
#      --enable-pprof, edictkv --pprof) for the heap reading;
#   3. per workload records req/s, p50 and p99 (the benchmark's own histogram) and
#      the server CPU seconds: utime+stime of the server processes (/proc/PID/stat)
#      before/after, as the anchor script etcd-3node.sh does;
#   4. stops exactly the processes it started (SIGTERM, SIGKILL after STOP_TIMEOUT)
#      and deletes the cluster's data dir.
#   5. counts, per workload, the requests that failed (the benchmark's "Error
#      distribution") and the changes of leader (the largest increase, over the
#      members, of the counter each member keeps: etcd_server_leader_changes_seen_total
#      on etcd's /metrics, edictkv_leader_changes_seen_total on edictkv's, which
#      counts as etcd's does), read right before and right after the benchmark.
# Any benchmark error ("Error distribution" in its report), a benchmark that fails
# or times out, or a server that dies makes the script fail loudly (exit 1) naming
# the system and workload and quoting the error text (CONTINUE_ON_ERROR=1: mark
# the figure ERR, carry on, still exit 1 at the end).
#
# HOG=disk|cpu runs a hog beside the servers during each benchmark (started right
# before it, stopped right after), the same for both systems in the same run:
#   disk  a writer on the filesystem of TMP_PARENT: dd if=/dev/zero bs=1M
#         count=HOG_DISK_MB conv=fsync into a file, removed, again, in a loop
#   cpu   HOG_CPU_PROCS (default: nproc) busy loops, `yes > /dev/null`
# With a hog, failed requests are the measurement, not an error: they are counted
# in the table and the RESULT line and do not make the script exit 1 (a benchmark
# that fails or times out, or a server that dies, still does).
#
# Output: progress on stderr; on stdout a markdown table of the medians over ROUNDS
# (workload | etcd req/s (p50/p99) | edictkv req/s (p50/p99) | ratio of req/s |
# server CPU ms per request for both | failed requests and leader changes for both,
# summed over the rounds), then one machine-readable line
#   RESULT key=value ...
# with every median (<sys>_<workload>_{rps,p50_ms,p99_ms,cpu_ms_per_req}, and
# ratio_<workload>_rps = edictkv/etcd), the sums <sys>_<workload>_{failed,
# leader_changes}, and hog=<HOG>. For the watch workloads the table's "req/s" is
# the workload's own rate (watch: events received/s; watch-latency: puts/s;
# watch-get: reads/s; slow-watch: puts/s beside the stuck watcher) and "per
# request" is per event (watch, watch-get) or per put; a second table has each
# watch figure of both systems and its ratio edictkv/etcd, and a third the
# slow-watch case; the RESULT line carries them as <sys>_<workload>_<figure> and
# ratio_<workload>_<figure>.
# Last, one line to paste into a commit message (the medians' ratios):
#   RATIOS edictkv/etcd req/s (p99) at <commit>, <rounds> round(s): put64 0.85[0.80-0.91] (1.31)
#     put1 ... [| base <commit>: put64 ... | head/base req/s: put64 1.03[0.98-1.06] ...]
#     | others' CPU up to 0.05 cores
# each workload's edictkv/etcd req/s (the medians' ratio), with more than one
# round the lowest and highest of the rounds' own ratios in square brackets, and
# in round brackets edictkv/etcd p99 (below 1: edictkv's tail is shorter); with
# BASE also the same for the base build and the ratio of the two edictkv builds'
# req/s, measured in the same rounds; then the most CPU that processes other than
# the servers and the benchmark client took during any one benchmark (the host's
# busy cores less theirs: another tenant, a hog), to say whether the machine was
# quiet; failed requests and leader changes, if any, at the end.
#
# BASE=<commit> also builds edictkv from a clean clone of this repository at that
# commit (git clone; git checkout), and runs it as a third system, "base", in every
# round, beside the same etcd: a before/after of a change in one run. Its figures
# are in a second table, in the RESULT line (base_<workload>_<figure>, and
# ratio_base_<workload>_rps = base/etcd, head_base_<workload>_rps = edictkv/base) and
# in RATIOS. bench/etcd/quick.sh runs this script in a reduced form.
#
# Env (defaults):
#   ROUNDS=1                 repetitions of the whole thing (median reported)
#   TOTAL=20000              puts, put64          TOTAL1=3000        puts, put1
#   READ_TOTAL=20000         reads, range_*64     READ_TOTAL1=3000   reads, range_*1
#   CLIENTS=64 CONNS=8       the "64 clients" workloads
#   MEMBERS=3                members of each cluster (3, 5, 7...)
#   BASE=                    a commit: also measure edictkv built from it (above)
#   KEY_SIZE=8 VAL_SIZE=256
#   WORKLOADS="put64 put1 range_l64 range_s64 range_l1 range_s1"   (subset allowed, in this order)
#   ETCD_VERSION=v3.6.8      passed to install.sh
#   BIN=/tmp/edictlog-etcd/bin   etcd, etcdctl, benchmark (install.sh) and edictkv (built here)
#   TMP_PARENT=/tmp          filesystem that holds the data dirs (it decides fsync cost!)
#   BENCH_TIMEOUT=180        seconds per benchmark invocation
#   STOP_TIMEOUT=15          seconds between SIGTERM and SIGKILL at teardown
#   READY_TIMEOUT=30         seconds for a fresh cluster to become healthy
#   BASE_PORT=               empty: random free ports in [PORT_MIN, PORT_MAX] (default
#                            20000..32000, below the kernel's ephemeral range);
#                            set: fixed ports BASE_PORT.. for etcd, BASE_PORT+20.. for edictkv
#   KEEP_TMP=0               1: keep data dirs, logs and raw benchmark outputs
#   CONTINUE_ON_ERROR=0      1: record ERR for a failed workload and go on
#   ETCD_EXTRA_FLAGS=""      extra flags for every etcd member
#   EDICTKV_EXTRA_FLAGS=""   extra flags for every edictkv process
#   HOG=none                 disk or cpu: a hog beside the servers during each benchmark
#   HOG_DISK_MB=300          HOG=disk: the size of each file written and fsynced
#   HOG_CPU_PROCS=$(nproc)   HOG=cpu: busy loops
#   WATCH_STREAMS=10 WATCH_PER_STREAM=100 WATCH_PUT_TOTAL=10000      watch
#   WLAT_STREAMS=10 WLAT_WATCHERS=10 WLAT_PUT_RATE=200 WLAT_PUT_TOTAL=4000   watch-latency
#   WGET_WATCHERS=10000 WGET_STREAMS=1 WGET_EVENTS=8                 watch-get (etcd's defaults)
#   SLOW_WATCHERS=1000 SLOW_STREAMS=10 SLOW_CONNS=4 SLOW_RATE=200 SLOW_PHASE_S=15
#   SLOW_PAIRS=3 SLOW_TIMEOUT=BENCH_TIMEOUT+2*SLOW_PAIRS*(SLOW_PHASE_S+60)   slow-watch
#     (3,000 puts a phase: both systems snapshot every several thousand entries, edictkv
#     every 8,192, etcd every 10,000, and phases of 4,000 put each of edictkv's snapshots
#     in a phase with the stuck watcher; with 3,000 they fall in both kinds)
#
# Needs: go, jq, ss, curl, /usr/bin/time, getconf.
#
# Examples:
#   bash bench/etcd/compare.sh
#   ROUNDS=3 bash bench/etcd/compare.sh
#   WORKLOADS="put64" TOTAL=50000 bash bench/etcd/compare.sh
#   ROUNDS=3 HOG=disk bash bench/etcd/compare.sh
#   WORKLOADS="watch watch-latency watch-get slow-watch" bash bench/etcd/compare.sh
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)

ROUNDS=${ROUNDS:-1}
TOTAL=${TOTAL:-20000}
TOTAL1=${TOTAL1:-3000}
READ_TOTAL=${READ_TOTAL:-20000}
READ_TOTAL1=${READ_TOTAL1:-3000}
CLIENTS=${CLIENTS:-64}
CONNS=${CONNS:-8}
KEY_SIZE=${KEY_SIZE:-8}
VAL_SIZE=${VAL_SIZE:-256}
WORKLOADS=${WORKLOADS:-"put64 put1 range_l64 range_s64 range_l1 range_s1"}
export ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
export BIN=${BIN:-/tmp/edictlog-etcd/bin}
TMP_PARENT=${TMP_PARENT:-/tmp}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-180}
STOP_TIMEOUT=${STOP_TIMEOUT:-15}
READY_TIMEOUT=${READY_TIMEOUT:-30}
BASE_PORT=${BASE_PORT:-}
PORT_MIN=${PORT_MIN:-20000}
PORT_MAX=${PORT_MAX:-32000}
KEEP_TMP=${KEEP_TMP:-0}
CONTINUE_ON_ERROR=${CONTINUE_ON_ERROR:-0}
ETCD_EXTRA_FLAGS=${ETCD_EXTRA_FLAGS:-}
EDICTKV_EXTRA_FLAGS=${EDICTKV_EXTRA_FLAGS:-}
HOG=${HOG:-none}
HOG_DISK_MB=${HOG_DISK_MB:-300}
HOG_CPU_PROCS=${HOG_CPU_PROCS:-$(nproc)}
WATCH_STREAMS=${WATCH_STREAMS:-10}
WATCH_PER_STREAM=${WATCH_PER_STREAM:-100}
WATCH_PUT_TOTAL=${WATCH_PUT_TOTAL:-10000}
WLAT_STREAMS=${WLAT_STREAMS:-10}
WLAT_WATCHERS=${WLAT_WATCHERS:-10}
WLAT_PUT_RATE=${WLAT_PUT_RATE:-200}
WLAT_PUT_TOTAL=${WLAT_PUT_TOTAL:-4000}
WGET_WATCHERS=${WGET_WATCHERS:-10000}
WGET_STREAMS=${WGET_STREAMS:-1}
WGET_EVENTS=${WGET_EVENTS:-8}
SLOW_WATCHERS=${SLOW_WATCHERS:-1000}
SLOW_STREAMS=${SLOW_STREAMS:-10}
SLOW_CONNS=${SLOW_CONNS:-4}
SLOW_RATE=${SLOW_RATE:-200}
SLOW_PHASE_S=${SLOW_PHASE_S:-15}
SLOW_PAIRS=${SLOW_PAIRS:-3}
SLOW_TIMEOUT=${SLOW_TIMEOUT:-$((BENCH_TIMEOUT + 2 * SLOW_PAIRS * (SLOW_PHASE_S + 60)))}

MEMBERS=${MEMBERS:-3}
BASE=${BASE:-}
SYSTEMS=(etcd edictkv)
[[ -z $BASE ]] || SYSTEMS+=(base)
EDICTKV_REV=unknown # set by build_binaries
BASE_REV=""         # set by build_binaries when BASE is
N=$MEMBERS # members per cluster
CLK_TCK=$(getconf CLK_TCK)

log() { echo "[compare $(date +%H:%M:%S)] $*" >&2; }
die() { log "FATAL: $*"; exit 1; }

for tool in go jq ss curl getconf /usr/bin/time; do
  command -v "$tool" >/dev/null || die "missing tool: $tool"
done
for w in $WORKLOADS; do
  case $w in
    put64 | put1 | range_l64 | range_s64 | range_l1 | range_s1) ;;
    watch | watch-latency | watch-get | slow-watch) ;;
    *) die "unknown workload $w" ;;
  esac
done
# the members serve Go's profiler only when slow-watch reads their heap
PPROF=0
[[ " $WORKLOADS " != *" slow-watch "* ]] || PPROF=1
case $HOG in none | disk | cpu) ;; *) die "HOG=$HOG: none, disk or cpu" ;; esac
[[ $MEMBERS =~ ^[1-9][0-9]?$ ]] || die "MEMBERS=$MEMBERS: a number of members, 1 to 99"
[[ $HOG != disk ]] || command -v dd >/dev/null || die "missing tool: dd (HOG=disk)"
[[ $HOG != cpu ]] || command -v yes >/dev/null || die "missing tool: yes (HOG=cpu)"

# ---------------------------------------------------------------------------
# Binaries. install.sh is idempotent (skips binaries already at ETCD_VERSION), so
# it is always called: that both installs missing binaries and catches a $BIN that
# holds another etcd version. edictkv is always rebuilt from this checkout so the
# figures belong to the code next to the script.
# ---------------------------------------------------------------------------
build_binaries() {
  log "checking etcd binaries in $BIN (install.sh)"
  bash "$SCRIPT_DIR/install.sh" >&2
  log "building edictkv from $REPO_ROOT"
  (cd "$REPO_ROOT" && go build -o "$BIN/edictkv" ./cmd/edictkv)
  if [[ -n $BASE ]]; then
    # a clean clone, so that neither the working tree's changes nor its
    # untracked files reach the base build
    local src="$WORK/base-src"
    BASE_REV=$(git -C "$REPO_ROOT" rev-parse --short "$BASE^{commit}") || die "BASE=$BASE is not a commit of $REPO_ROOT"
    log "building edictkv at $BASE_REV (BASE=$BASE) from a clean clone in $src"
    git clone --quiet --no-checkout "$REPO_ROOT" "$src"
    git -C "$src" checkout --quiet --detach "$BASE_REV"
    (cd "$src" && go build -o "$BIN/edictkv-base" ./cmd/edictkv)
  fi
  # which code the figures belong to: the commit, and whether tracked files other
  # than docs and harnesses differed from it when edictkv was built
  EDICTKV_REV=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ -n $(git -C "$REPO_ROOT" status --porcelain --untracked-files=no -- . ':(exclude)docs' ':(exclude)jepsen' \
    ':(exclude)bench' ':(exclude)compat' ':(exclude,glob)**/*_test.go' 2>/dev/null) ]]; then EDICTKV_REV+="+uncommitted"; fi
  if ((PPROF)); then
    log "building slowwatch from $REPO_ROOT/bench"
    (cd "$REPO_ROOT/bench" && go build -o "$BIN/slowwatch" ./cmd/slowwatch)
  fi
}

# ---------------------------------------------------------------------------
# Ports. A port counts as taken if any TCP socket other than a TIME-WAIT one uses
# it as its local port (a listener, or a connection whose source port it is).
# Random ports are drawn below the kernel's ephemeral range so that the benchmark's
# own outgoing connections cannot grab them between the check and the bind.
# ---------------------------------------------------------------------------
port_taken() { ss -Htan "( sport = :$1 )" | grep -vq '^TIME-WAIT'; }

# pick_ports COUNT OFFSET -> sets PORTS=(...) of COUNT distinct free ports.
# With BASE_PORT set: BASE_PORT+OFFSET.. consecutive, refusing to start if one is taken.
pick_ports() {
  local count=$1 offset=$2 p tries=0
  PORTS=()
  if [[ -n $BASE_PORT ]]; then
    for ((p = BASE_PORT + offset; p < BASE_PORT + offset + count; p++)); do
      port_taken "$p" && die "port $p is already in use; choose another BASE_PORT"
      PORTS+=("$p")
    done
    return 0
  fi
  local eph_low max=$PORT_MAX
  eph_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range)
  ((max >= eph_low)) && max=$((eph_low - 1))
  ((max > PORT_MIN + 100)) || die "no room for ports below the ephemeral range ($PORT_MIN..$max)"
  while ((${#PORTS[@]} < count)); do
    ((tries++ < 1000)) || die "could not find $count free ports"
    p=$((PORT_MIN + RANDOM % (max - PORT_MIN + 1)))
    [[ " ${PORTS[*]} " == *" $p "* ]] && continue
    port_taken "$p" && continue
    PORTS+=("$p")
  done
}

# ---------------------------------------------------------------------------
# Cluster lifecycle. PIDS holds exactly the server processes this script started
# (the binaries themselves: each is launched directly, not via a wrapper, so its
# /proc/PID/stat is the server's CPU).
# ---------------------------------------------------------------------------
PIDS=()
CDIR=""   # data dir and logs of the running cluster
EPS=""    # client (gRPC) endpoints, comma-separated
HTTPS=()  # edictkv only: HTTP addresses for /readyz
PPROF_URLS=()  # each member's /debug/pprof (served only with PPROF=1), in EPS order

start_etcd() {
  pick_ports $((2 * N)) 0
  local cports=("${PORTS[@]:0:N}") pports=("${PORTS[@]:N:N}") cluster="" i
  # one token for the whole cluster (members with different tokens never form one)
  local token="compare-$$-$RANDOM"
  for ((i = 0; i < N; i++)); do cluster+="${cluster:+,}m$i=http://127.0.0.1:${pports[$i]}"; done
  EPS=""
  for ((i = 0; i < N; i++)); do EPS+="${EPS:+,}127.0.0.1:${cports[$i]}"; done
  local pprof=()
  ((PPROF)) && pprof=(--enable-pprof)
  PPROF_URLS=()
  for ((i = 0; i < N; i++)); do PPROF_URLS+=("http://127.0.0.1:${cports[$i]}/debug/pprof"); done
  for ((i = 0; i < N; i++)); do
    # shellcheck disable=SC2086 # ETCD_EXTRA_FLAGS is a list of words on purpose
    "$BIN/etcd" --name "m$i" --data-dir "$CDIR/m$i.etcd" "${pprof[@]}" \
      --listen-client-urls "http://127.0.0.1:${cports[$i]}" \
      --advertise-client-urls "http://127.0.0.1:${cports[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${pports[$i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${pports[$i]}" \
      --initial-cluster "$cluster" \
      --initial-cluster-token "$token" --initial-cluster-state new \
      --log-level warn --log-outputs "$CDIR/m$i.log" \
      $ETCD_EXTRA_FLAGS >"$CDIR/m$i.stdout" 2>&1 &
    PIDS+=($!)
  done
}

start_edictkv() {
  pick_ports $((3 * N)) 20
  local rports=("${PORTS[@]:0:N}") hports=("${PORTS[@]:N:N}") gports=("${PORTS[@]:2*N:N}")
  local peers="" i
  for ((i = 0; i < N; i++)); do
    peers+="${peers:+,}$((i + 1))=127.0.0.1:${rports[$i]}/127.0.0.1:${hports[$i]}"
  done
  EPS="" HTTPS=() PPROF_URLS=()
  for ((i = 0; i < N; i++)); do
    EPS+="${EPS:+,}127.0.0.1:${gports[$i]}"
    HTTPS+=("127.0.0.1:${hports[$i]}")
    PPROF_URLS+=("http://127.0.0.1:${hports[$i]}/debug/pprof")
  done
  local pprof=()
  ((PPROF)) && pprof=(--pprof)
  for ((i = 0; i < N; i++)); do
    # shellcheck disable=SC2086 # EDICTKV_EXTRA_FLAGS is a list of words on purpose
    "${EDICTKV_BIN:-$BIN/edictkv}" serve --id $((i + 1)) --data-dir "$CDIR/m$i.edictkv" "${pprof[@]}" \
      --raft-addr "127.0.0.1:${rports[$i]}" --http-addr "127.0.0.1:${hports[$i]}" \
      --grpc-addr "127.0.0.1:${gports[$i]}" --peers "$peers" --log-level warn \
      $EDICTKV_EXTRA_FLAGS >"$CDIR/m$i.log" 2>&1 &
    PIDS+=($!)
  done
}

# start_base: edictkv built at BASE, started as start_edictkv starts this tree's
start_base() { EDICTKV_BIN="$BIN/edictkv-base" start_edictkv; }

ctl() { "$BIN/etcdctl" --endpoints="$EPS" --dial-timeout=2s --command-timeout=5s "$@"; }

# check_alive SYS WHAT -> dies (with log tails, via cleanup) if a server has exited.
check_alive() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || die "$1: server pid $pid exited ($2)"
  done
}

# wait_ready SYS: up to READY_TIMEOUT s for every member to be healthy. For edictkv
# also /readyz (200 once the process knows a leader) on every process.
wait_ready() {
  local sys=$1 h ok deadline=$((SECONDS + READY_TIMEOUT))
  while ((SECONDS < deadline)); do
    check_alive "$sys" "during startup"
    ok=1
    if [[ $sys != etcd ]]; then
      for h in "${HTTPS[@]}"; do
        [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$h/readyz") == 200 ]] || ok=0
      done
    fi
    if [[ $ok == 1 ]] && ctl endpoint health >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "$sys: cluster not ready after ${READY_TIMEOUT}s"
}

# leader_ep -> the endpoint whose status says it is the leader (same rule as etcd's
# own tooling: .Status.leader == .Status.header.member_id). Exactly one, or it
# says what it got and fails.
leader_ep() {
  local l
  l=$(ctl endpoint status -w json | jq -r '.[] | select(.Status.leader == .Status.header.member_id) | .Endpoint') || true
  [[ -n $l && $l != *$'\n'* ]] || { log "could not determine a single leader (got: '${l//$'\n'/ }')"; return 1; }
  echo "$l"
}

# stop_cluster: SIGTERM every started server, SIGKILL those still alive after
# STOP_TIMEOUT, reap them, delete the data dir (unless KEEP_TMP=1).
stop_cluster() {
  ((${#PIDS[@]} > 0)) || return 0
  local pid forced=0 deadline
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  deadline=$((SECONDS + STOP_TIMEOUT))
  for pid in "${PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; forced=$((forced + 1)); fi
    wait "$pid" 2>/dev/null || true
  done
  log "stopped ${#PIDS[@]} server processes ($forced needed SIGKILL)"
  PIDS=()
  if [[ $KEEP_TMP != 1 && -n $CDIR ]]; then rm -rf "${CDIR:?}"/m*.etcd "${CDIR:?}"/m*.edictkv; fi
}

WORK=""
cleanup() {
  local rc=$?
  set +e
  if ((rc != 0)) && [[ -n $CDIR ]]; then
    for f in "$CDIR"/m*.log; do
      [[ -f $f ]] || continue
      echo "--- tail of $f ---" >&2
      tail -n 15 "$f" >&2
    done
  fi
  hog_stop
  stop_cluster
  if [[ -n $WORK ]]; then
    if [[ $KEEP_TMP == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------
# The hog (HOG=disk|cpu). HOG_PIDS holds exactly the hog processes this script
# started: for disk, the loop's subshell, which kills its own dd when told to stop
# (a dd cut short leaves its file, removed with it: its unsynced pages are dropped,
# not written after the workload); for cpu, the busy loops.
# ---------------------------------------------------------------------------
HOG_PIDS=()

# hog_disk_loop FILE: dd into FILE with one fsync at the end, remove it, again.
hog_disk_loop() {
  local f=$1 dd_pid=""
  trap '[[ -n $dd_pid ]] && kill "$dd_pid" 2>/dev/null; wait 2>/dev/null; rm -f "$f"; exit 0' TERM
  while :; do
    dd if=/dev/zero of="$f" bs=1M count="$HOG_DISK_MB" conv=fsync status=none &
    dd_pid=$!
    wait "$dd_pid" || true
    rm -f "$f"
  done
}

hog_start() {
  local i
  case $HOG in
    disk)
      mkdir -p "$WORK/hog"
      hog_disk_loop "$WORK/hog/dd" >/dev/null 2>&1 &
      HOG_PIDS+=($!) ;;
    cpu)
      for ((i = 0; i < HOG_CPU_PROCS; i++)); do
        yes >/dev/null &
        HOG_PIDS+=($!)
      done ;;
  esac
  return 0
}

hog_stop() {
  ((${#HOG_PIDS[@]} > 0)) || return 0
  local pid
  for pid in "${HOG_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${HOG_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  HOG_PIDS=()
  [[ -z $WORK ]] || rm -rf "${WORK:?}/hog"
}

# ---------------------------------------------------------------------------
# Measuring.
# ---------------------------------------------------------------------------
srv_cpu_ticks() { # utime+stime of the running cluster's servers, in clock ticks
  local t=0 pid v
  for pid in "${PIDS[@]}"; do
    # fields after the ")" of comm: utime is field 12, stime field 13 (1-based),
    # so a comm with spaces cannot shift them; a server that has exited counts
    # 0 here, and check_alive says so right after
    v=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}') || true
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
# host-wide "busy total" ticks from /proc/stat: shows saturation and other tenants
host_ticks() { awk '/^cpu / {t=0; for (i=2;i<=NF;i++) t+=$i; print t-$5-$6, t}' /proc/stat; }
# dev_stat -> "SECTORS_WRITTEN IO_MS FLUSHES" of the block device under TMP_PARENT
# (/sys/class/block/DEV/stat: fields 7, 10 and 16), "0 0 0" if it cannot be read.
# The device's, not the servers': every process's writes count (a hog's, other
# tenants'). /proc/PID/io's write_bytes is no measure here: the kernel counts
# a whole large folio for each one it dirties, 8x the bytes the servers wrote.
# A device-mapper or symlinked source (/dev/mapper/x) is resolved to its node
# (dm-0); a filesystem on no block device (tmpfs, overlay) has no figures: "na".
DISK_DEV=$(df --output=source "$TMP_PARENT" 2>/dev/null | tail -n 1)
DISK_DEV=$(basename "$(readlink -f "$DISK_DEV" 2>/dev/null || echo "$DISK_DEV")")
dev_stat() {
  local f=/sys/class/block/$DISK_DEV/stat
  if [[ -r $f ]]; then awk '{print $7, $10, ($16 == "" ? "na" : $16)}' "$f"; else echo "na na na"; fi
}
# bytes sent over the loopback interface (/proc/net/dev): every client and peer message
lo_bytes() { awk '{sub(/^ */, "")} /^lo:/ {sub(/^lo: */, ""); print $1}' /proc/net/dev; }
# resident memory of the servers, summed (KiB); a server that has exited counts
# 0 here, and check_alive says so right after
srv_rss_kib() {
  local t=0 pid v
  for pid in "${PIDS[@]}"; do
    v=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || true
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
# log_syncs SYS -> "COUNT SECONDS": the members' durable log commits so far and
# the time spent in them, summed (etcd: its WAL's fsyncs,
# etcd_disk_wal_fsync_duration_seconds; edictkv: its log store's commits, each
# one fdatasync, edictkv_fsyncs_total and edictkv_fsync_seconds_total); "na na"
# unless every member answered with both (a BASE build from before the metric)
log_syncs() {
  local urls=() u
  if [[ $1 == etcd ]]; then IFS=, read -ra urls <<<"$EPS"; else urls=("${HTTPS[@]}"); fi
  for u in "${urls[@]}"; do curl -s --max-time 5 "http://$u/metrics" || true; done |
    awk -v m="${#urls[@]}" '$1 == "etcd_disk_wal_fsync_duration_seconds_count" || $1 == "edictkv_fsyncs_total" {n += $2; cn++}
      $1 == "etcd_disk_wal_fsync_duration_seconds_sum" || $1 == "edictkv_fsync_seconds_total" {s += $2; cs++}
      END {if (cn == m && cs == m) printf "%d %.6f\n", n, s; else print "na na"}'
}

declare -A R   # R[round,sys,workload,metric] = value
ERRORS=0

# leader_changes SYS -> each member's changes-of-leader counter, space-separated
# ("na" for a member whose /metrics did not answer). Both count alike: each time
# the leader a member knows of becomes another member (or the same after none).
leader_changes() {
  local urls=() u v
  if [[ $1 == etcd ]]; then
    IFS=, read -ra urls <<<"$EPS"
  else
    urls=("${HTTPS[@]}")
  fi
  for u in "${urls[@]}"; do
    v=$(curl -s --max-time 5 "http://$u/metrics" |
      awk '$1 == "etcd_server_leader_changes_seen_total" || $1 == "edictkv_leader_changes_seen_total" {print $2; exit}') || true
    printf '%s ' "${v:-na}"
  done
}

# max_delta "BEFORE..." "AFTER..." -> the largest increase over the members ("na"
# if no member answered both times)
max_delta() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); m = -1
    for (i = 1; i <= n; i++) if (x[i] != "na" && y[i] != "na" && y[i] - x[i] > m) m = y[i] - x[i]
    print (m < 0 ? "na" : m) }'
}

# failed_requests OUTFILE -> the requests the benchmark's "Error distribution" lists
# ("  [count]<TAB>error" lines), 0 without one
failed_requests() {
  tr '\r' '\n' <"$1" | awk '/^Error distribution:/ {on = 1; next}
    on && /^ *\[[0-9]+\]/ {gsub(/[][ ]/, "", $1); n += $1; next}
    on && NF {on = 0}
    END {print n + 0}'
}

# run_bench ROUND SYS WORKLOAD NREQ benchmark-args... : one benchmark invocation;
# stores rps, p50_ms, p99_ms, cpu_s, cpu_ms_per_req, busy_pct, cli_cpu_s in R (and
# the watch workloads' own figures, see parse_figures).
run_bench() {
  local round=$1 sys=$2 w=$3 nreq=$4
  shift 4
  run_measured "$round" "$sys" "$w" "$nreq" "$BENCH_TIMEOUT" "$BIN/benchmark" --precise "$@"
}

# run_measured ROUND SYS WORKLOAD NREQ TIMEOUT command... : run_bench with any
# client command (slow-watch runs bench/cmd/slowwatch).
run_measured() {
  local round=$1 sys=$2 w=$3 nreq=$4 tmo=$5
  shift 5
  local out="$WORK/r$round-$sys-$w.txt" c0 c1 h0 h1 k=$round,$sys,$w lc0 lc1 ok=1 fs0 fs1 io0 io1 lo0 lo1 t0 t1
  check_alive "$sys" "before $w"
  lc0=$(leader_changes "$sys")
  fs0=$(log_syncs "$sys")
  hog_start
  io0=$(dev_stat); lo0=$(lo_bytes); t0=$(date +%s%N)
  c0=$(srv_cpu_ticks); h0=$(host_ticks)
  /usr/bin/time -f '%U %S' -o "$out.time" \
    timeout "$tmo" "$@" >"$out" 2>&1 || ok=0
  c1=$(srv_cpu_ticks); h1=$(host_ticks)
  t1=$(date +%s%N); io1=$(dev_stat); lo1=$(lo_bytes)
  R[$k,rss_mib]=$(awk -v k="$(srv_rss_kib)" 'BEGIN{printf "%.0f", k/1024}')
  hog_stop
  fs1=$(log_syncs "$sys")
  lc1=$(leader_changes "$sys")
  resource_figures "$k" "$nreq" "$t0" "$t1" "$io0" "$io1" "$lo0" "$lo1" "$fs0" "$fs1"
  # what the run cost, also for a failed one (its resource row says what it did)
  R[$k,cpu_s]=$(awk -v a="$c0" -v b="$c1" -v t="$CLK_TCK" 'BEGIN{printf "%.2f", (b-a)/t}')
  R[$k,busy_pct]=$(echo "$h0 $h1" | awk '{printf "%.1f", 100*($3-$1)/($4-$2)}')
  R[$k,cli_cpu_s]=$(awk 'NF==2 {printf "%.2f", $1+$2}' "$out.time" 2>/dev/null)
  R[$k,srv_cores]=$(awk -v c="${R[$k,cpu_s]}" -v d="${R[$k,dur_s]}" 'BEGIN{printf "%.2f", c/d}')
  R[$k,cli_cores]=$(awk -v c="${R[$k,cli_cpu_s]:-0}" -v d="${R[$k,dur_s]}" 'BEGIN{printf "%.2f", c/d}')
  # the rest of the host: other tenants, a hog, and kernel threads (the I/O and
  # the loopback's softirqs the kernel runs outside the servers' and the client's time)
  R[$k,other_cores]=$(awk -v b="${R[$k,busy_pct]}" -v n="$(nproc)" -v s="${R[$k,srv_cores]}" -v c="${R[$k,cli_cores]}" \
    'BEGIN{o = b*n/100 - s - c; printf "%.2f", (o < 0 ? 0 : o)}')
  R[$k,leader_changes]=$(max_delta "$lc0" "$lc1")
  R[$k,failed]=$(failed_requests "$out")
  if [[ $ok == 0 ]]; then
    bench_failed "$sys" "$w" "$(basename "$1") exited non-zero or timed out after ${tmo}s" "$out" "$k"
    return 0
  fi
  check_alive "$sys" "after $w"
  if [[ $HOG == none ]] && grep -q 'Error distribution' "$out"; then
    bench_failed "$sys" "$w" "benchmark reported errors" "$out" "$k"
    return 0
  fi
  local failed=${R[$k,failed]}
  if ((failed > 0)); then
    log "$sys / $w: $failed requests failed beside the $HOG hog (counted, not fatal):"
    tr '\r' '\n' <"$out" | sed -n '/^Error distribution:/,/^ *$/p' | head -n 12 >&2
  fi
  parse_figures "$w" "$out" "$k" || { bench_failed "$sys" "$w" "$PARSE_ERROR" "$out" "$k"; return 0; }
  local rps=${R[$k,rps]} p50=${R[$k,p50_ms]} p99=${R[$k,p99_ms]}
  R[$k,cpu_ms_per_req]=$(awk -v a="$c0" -v b="$c1" -v t="$CLK_TCK" -v n="$nreq" 'BEGIN{printf "%.4f", 1000*(b-a)/t/n}')
  log "$(printf '%-8s %-10s %9.1f req/s  p50 %7s ms  p99 %7s ms  server CPU %6.2f s (%.4f ms/req)  host busy %s%%  failed %s  leader changes %s' \
    "$sys" "$w" "$rps" "$p50" "$p99" "${R[$k,cpu_s]}" "${R[$k,cpu_ms_per_req]}" "${R[$k,busy_pct]}" "${R[$k,failed]}" "${R[$k,leader_changes]}")"
  local f line=""
  for f in $(extra_figures "$w"); do line+=" $f=${R[$k,$f]:-na}"; done
  [[ -z $line ]] || log "$(printf '%-8s %-10s' "$sys" "$w")$line"
}

# resource_figures KEY NREQ T0_NS T1_NS "DEVSTAT0" "DEVSTAT1" LO0 LO1 "FSYNCS0 SECS0" "FSYNCS1 SECS1":
# what the workload cost each resource, into R[KEY,...]:
#   dur_s          wall time of the benchmark command
#   disk_mib_s     writes reaching the block device under TMP_PARENT, MiB/s (all processes)
#   disk_busy      the share of the run that device had I/O in flight (its io_ticks)
#   flush_per_req  cache flushes the device completed, per request (all processes)
#                  (the three "na" without a block device under TMP_PARENT, the
#                  last also on a kernel that does not count flushes)
#   lo_mib_s       loopback traffic (clients and peers), MiB/s; lo_kib_per_req per request
#   fsync_per_req  durable log commits per request, all members together
#   fsync_ms       their mean time (write and sync)
#   fsync_busy     the share of the run each member spent in them, mean over members
resource_figures() {
  local k=$1 nreq=$2 t0=$3 t1=$4 lo0=$7 lo1=$8 n0 s0 n1 s1 w0 b0 f0 w1 b1 f1
  read -r w0 b0 f0 <<<"$5"; read -r w1 b1 f1 <<<"$6"
  read -r n0 s0 <<<"$9"; read -r n1 s1 <<<"${10}"
  R[$k,dur_s]=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)/1e9}')
  R[$k,disk_mib_s]=na R[$k,disk_busy]=na R[$k,flush_per_req]=na
  if num "$w0" && num "$w1"; then
    R[$k,disk_mib_s]=$(awk -v a="$w0" -v b="$w1" -v d="${R[$k,dur_s]}" 'BEGIN{printf "%.1f", (b-a)*512/1048576/d}')
    R[$k,disk_busy]=$(awk -v a="$b0" -v b="$b1" -v d="${R[$k,dur_s]}" 'BEGIN{printf "%.2f", (b-a)/1000/d}')
  fi
  if num "$f0" && num "$f1"; then
    R[$k,flush_per_req]=$(awk -v a="$f0" -v b="$f1" -v n="$nreq" 'BEGIN{printf "%.3f", (b-a)/n}')
  fi
  R[$k,lo_mib_s]=$(awk -v a="$lo0" -v b="$lo1" -v d="${R[$k,dur_s]}" 'BEGIN{printf "%.1f", (b-a)/1048576/d}')
  R[$k,lo_kib_per_req]=$(awk -v a="$lo0" -v b="$lo1" -v n="$nreq" 'BEGIN{printf "%.2f", (b-a)/1024/n}')
  R[$k,fsync_per_req]=na R[$k,fsync_ms]=na R[$k,fsync_busy]=na
  if num "$n0" && num "$n1"; then
    R[$k,fsync_per_req]=$(awk -v a="$n0" -v b="$n1" -v n="$nreq" 'BEGIN{printf "%.3f", (b-a)/n}')
    R[$k,fsync_ms]=$(awk -v a="$n0" -v b="$n1" -v x="$s0" -v y="$s1" 'BEGIN{printf "%.3f", (b>a) ? 1000*(y-x)/(b-a) : 0}')
    R[$k,fsync_busy]=$(awk -v x="$s0" -v y="$s1" -v d="${R[$k,dur_s]}" -v m="$N" 'BEGIN{printf "%.2f", (y-x)/d/m}')
  fi
}

# report_sections OUTFILE -> "section figure value" lines of the benchmark's
# reports. A watch benchmark prints several, each after a "<what> summary:" line;
# the others one. Progress bars use \r, hence the tr.
report_sections() {
  tr '\r' '\n' <"$1" | awk '
    /Watch creation summary:/        {sec = "create"}
    /Watch events received summary:/ {sec = "events"}
    /Watch events summary:/          {sec = "events"}
    /Put summary:/                   {sec = "put"}
    /Get during watch summary:/      {sec = "get"}
    /^ *Total:/       {print (sec == "" ? "main" : sec), "total_s", $2}
    /Requests\/sec:/  {print (sec == "" ? "main" : sec), "rps", $2}
    / 50% in /        {print (sec == "" ? "main" : sec), "p50_ms", sprintf("%.9g", $3 * 1000)}
    / 99% in /        {print (sec == "" ? "main" : sec), "p99_ms", sprintf("%.9g", $3 * 1000)}'
}

# extra_figures WORKLOAD -> the figures a watch workload has beside rps/p50/p99
extra_figures() {
  case $1 in
    watch) echo "create_rps create_p99_ms" ;;
    watch-latency) echo "ev_p50_ms ev_p99_ms" ;;
    watch-get) echo "catchup_s catchup_eps" ;;
    slow-watch) echo "base_rps base_p50_ms base_p99_ms stuck_rps stuck_p50_ms stuck_p99_ms p99_ratio" \
      "base_event_p99_ms stuck_event_p99_ms base_rss_peak_mib stuck_rss_peak_mib base_anon_peak_mib" \
      "stuck_anon_peak_mib heap0_mib stuck_heap_kib heap_noise_kib mem_bound_kib catchup_due catchup_got catchup_ms" \
      "p99_ok mem_ok pass" ;;
  esac
}

# parse_figures WORKLOAD OUTFILE KEY: the workload's figures into R[KEY,...]; on
# failure sets PARSE_ERROR and returns 1.
#   other workloads  rps, p50/p99 of the one report
#   watch            rps = events received/s; create_rps, create_p99_ms of creating
#                    the watchers (clientv3 returns a watch once it is created, one
#                    at a time per stream); p50/p99 na (the tool times an event from
#                    its own arrival)
#   watch-latency    rps, p50/p99 of the puts; ev_p50_ms, ev_p99_ms: each event's
#                    delay from its put's response
#   watch-get        rps, p50/p99 of the reads; catchup_s the report's duration (the
#                    watchers created and caught up), catchup_eps = watchers x events
#                    per second of it
#   slow-watch       slowwatch's SLOWWATCH line; rps, p50/p99 those with the stuck
#                    watcher; booleans as 1/0
PARSE_ERROR=""
# fmt_num VALUE PRINTF-FORMAT -> VALUE formatted, "na" if empty
fmt_num() { if [[ -n ${1:-} ]]; then awk -v x="$1" -v f="$2" 'BEGIN{printf f, x}'; else echo na; fi; }
parse_figures() {
  local w=$1 out=$2 k=$3 sec fig val
  local -A S=()
  if [[ $w == slow-watch ]]; then
    local line kv
    line=$(grep '^SLOWWATCH ' "$out" | tail -n 1) || true
    [[ -n $line ]] || { PARSE_ERROR="no SLOWWATCH line in slowwatch's output"; return 1; }
    for kv in ${line#SLOWWATCH }; do
      val=${kv#*=}
      case $val in true) val=1 ;; false) val=0 ;; esac
      R[$k,${kv%%=*}]=$val
    done
    R[$k,rps]=${R[$k,stuck_rps]} R[$k,p50_ms]=${R[$k,stuck_p50_ms]} R[$k,p99_ms]=${R[$k,stuck_p99_ms]}
    return 0
  fi
  while read -r sec fig val; do S[$sec,$fig]=$val; done < <(report_sections "$out")
  local main=main
  case $w in
    watch)
      R[$k,rps]=$(fmt_num "${S[events,rps]:-}" %.1f) R[$k,p50_ms]=na R[$k,p99_ms]=na
      R[$k,create_rps]=$(fmt_num "${S[create,rps]:-}" %.1f) R[$k,create_p99_ms]=$(fmt_num "${S[create,p99_ms]:-}" %.3f)
      main=events ;;
    watch-latency)
      main=put
      R[$k,ev_p50_ms]=$(fmt_num "${S[events,p50_ms]:-}" %.3f) R[$k,ev_p99_ms]=$(fmt_num "${S[events,p99_ms]:-}" %.3f) ;;
    watch-get)
      main=get
      R[$k,catchup_s]=$(fmt_num "${S[get,total_s]:-}" %.2f) R[$k,catchup_eps]=na
      [[ ${R[$k,catchup_s]} == na ]] ||
        R[$k,catchup_eps]=$(awk -v t="${S[get,total_s]}" -v n=$((WGET_WATCHERS * WGET_EVENTS)) 'BEGIN{printf "%.1f", n/t}') ;;
  esac
  if [[ $w != watch ]]; then
    R[$k,rps]=$(fmt_num "${S[$main,rps]:-}" %.1f) R[$k,p50_ms]=$(fmt_num "${S[$main,p50_ms]:-}" %.3f) R[$k,p99_ms]=$(fmt_num "${S[$main,p99_ms]:-}" %.3f)
  fi
  [[ ${R[$k,rps]} != na ]] || { PARSE_ERROR="no Requests/sec in the benchmark output ($main report)"; return 1; }
  return 0
}

# bench_failed SYS WORKLOAD WHY OUTFILE KEY: fail loudly with the benchmark's own
# error text; with CONTINUE_ON_ERROR=1 mark the figures ERR and carry on.
bench_failed() {
  local sys=$1 w=$2 why=$3 out=$4 k=$5
  log "ERROR: $sys / $w: $why. Benchmark output (client log lines and progress bars left out):"
  # The client logs one JSON line per failed attempt: show the report, then the
  # distinct error texts of those lines with their counts.
  tr '\r' '\n' <"$out" | grep -v -e '^{"level"' -e 'INFO: \[core\]' -e '^ *$' -e '|' -e ' p/s$' | tail -n 40 >&2
  if grep -q '^{"level"' "$out"; then
    echo "distinct errors in the client's log lines (count, text):" >&2
    grep -o '"error":"[^"]*"' "$out" | sort | uniq -c | sort -rn | head -n 10 >&2
  fi
  ERRORS=$((ERRORS + 1))
  [[ $CONTINUE_ON_ERROR == 1 ]] || die "$sys / $w failed (set CONTINUE_ON_ERROR=1 to carry on)"
  R[$k,rps]=ERR R[$k,p50_ms]=ERR R[$k,p99_ms]=ERR R[$k,cpu_ms_per_req]=ERR
}

# not_measured ROUND SYS WORKLOAD WHY: the cluster could not run the workload (it
# lost its leader in the one before, say): fail loudly, or with
# CONTINUE_ON_ERROR=1 mark its figures ERR and carry on, as bench_failed does.
not_measured() {
  local k=$1,$2,$3
  ERRORS=$((ERRORS + 1))
  [[ $CONTINUE_ON_ERROR == 1 ]] || die "$2 / $3: $4 (set CONTINUE_ON_ERROR=1 to carry on)"
  log "ERROR: $2 / $3: $4; not measured"
  R[$k,rps]=ERR R[$k,p50_ms]=ERR R[$k,p99_ms]=ERR R[$k,cpu_ms_per_req]=ERR
}

# run_system ROUND SYS: fresh cluster, all workloads, teardown.
run_system() {
  local round=$1 sys=$2 leader before after w
  CDIR="$WORK/r$round-$sys"
  mkdir -p "$CDIR"
  local t0=$SECONDS
  "start_$sys"
  wait_ready "$sys"
  leader=$(leader_ep) || die "$sys: no single leader once ready"
  log "round $round: $sys ready after $((SECONDS - t0))s, endpoints $EPS, leader $leader"

  local key val all=(--endpoints="$EPS" --clients="$CLIENTS" --conns="$CONNS")
  key=$(head -c "$KEY_SIZE" </dev/zero | tr '\0' 'r')
  val=$(head -c "$VAL_SIZE" </dev/zero | tr '\0' 'v')
  local wrote_key=0
  for w in $WORKLOADS; do
    if [[ $w == range_* && $wrote_key == 0 ]]; then
      # from stdin: a value of more than 128 KiB cannot be one argument
      if printf '%s' "$val" | ctl put "$key" >/dev/null; then wrote_key=1; else wrote_key=failed; fi
    fi
    if [[ $w == range_* && $wrote_key == failed ]]; then
      not_measured "$round" "$sys" "$w" "could not write the key it reads"
      continue
    fi
    # "to the leader" workloads: look the leader up right before, and say so if it
    # moved during the workload (the figure then mixes leader and follower service)
    if ! before=$(leader_ep); then
      not_measured "$round" "$sys" "$w" "no single leader before it"
      continue
    fi
    local one=(--endpoints="$before" --clients=1 --conns=1)
    case $w in
      put64) run_bench "$round" "$sys" "$w" "$TOTAL" "${all[@]}" put --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" \
               --total="$TOTAL" --sequential-keys --key-space-size="$TOTAL" ;;
      put1) run_bench "$round" "$sys" "$w" "$TOTAL1" "${one[@]}" put --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" \
               --total="$TOTAL1" --sequential-keys --key-space-size="$TOTAL1" ;;
      range_l64) run_bench "$round" "$sys" "$w" "$READ_TOTAL" "${all[@]}" range "$key" --consistency=l --total="$READ_TOTAL" ;;
      range_s64) run_bench "$round" "$sys" "$w" "$READ_TOTAL" "${all[@]}" range "$key" --consistency=s --total="$READ_TOTAL" ;;
      range_l1) run_bench "$round" "$sys" "$w" "$READ_TOTAL1" "${one[@]}" range "$key" --consistency=l --total="$READ_TOTAL1" ;;
      range_s1) run_bench "$round" "$sys" "$w" "$READ_TOTAL1" "${one[@]}" range "$key" --consistency=s --total="$READ_TOTAL1" ;;
      # every watcher of watch is on the one watched key: each put is an event for each
      watch) run_bench "$round" "$sys" "$w" $((WATCH_PUT_TOTAL * WATCH_STREAMS * WATCH_PER_STREAM)) "${all[@]}" watch \
               --streams="$WATCH_STREAMS" --watch-per-stream="$WATCH_PER_STREAM" --watched-key-total=1 \
               --put-total="$WATCH_PUT_TOTAL" --key-size="$KEY_SIZE" --key-space-size=1 ;;
      watch-latency) run_bench "$round" "$sys" "$w" "$WLAT_PUT_TOTAL" "${all[@]}" watch-latency \
               --streams="$WLAT_STREAMS" --watchers-per-stream="$WLAT_WATCHERS" --put-total="$WLAT_PUT_TOTAL" \
               --put-rate="$WLAT_PUT_RATE" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" ;;
      watch-get) run_bench "$round" "$sys" "$w" $((WGET_WATCHERS * WGET_EVENTS)) "${all[@]}" watch-get \
               --watchers="$WGET_WATCHERS" --streams="$WGET_STREAMS" --events="$WGET_EVENTS" ;;
      slow-watch) run_slow_watch "$round" "$sys" "$before" ;;
    esac
    after=$(leader_ep) || after="no single leader"
    if [[ $after != "$before" ]]; then
      log "WARNING: $sys / $w: leader changed during the workload ($before -> $after)"
      R[$round,$sys,$w,leader_changed]=1
    fi
  done
  stop_cluster
}

# run_slow_watch ROUND SYS LEADER: bench/cmd/slowwatch with every watcher and
# every put on the leader, its RSS and live heap read from that process.
run_slow_watch() {
  local round=$1 sys=$2 leader=$3 eps i idx=-1
  IFS=, read -ra eps <<<"$EPS"
  for i in "${!eps[@]}"; do [[ ${eps[$i]} == "$leader" ]] && idx=$i; done
  ((idx >= 0)) || die "$sys: leader $leader is not one of the endpoints $EPS"
  mkdir -p "$WORK/r$round-$sys-slow-watch"
  run_measured "$round" "$sys" slow-watch $((SLOW_RATE * SLOW_PHASE_S * 2 * SLOW_PAIRS)) "$SLOW_TIMEOUT" \
    "$BIN/slowwatch" --endpoint="$leader" --pid="${PIDS[$idx]}" --pprof-url="${PPROF_URLS[$idx]}" \
    --metrics-url="${PPROF_URLS[$idx]%/debug/pprof}/metrics" --profile-dir="$WORK/r$round-$sys-slow-watch" \
    --watchers="$SLOW_WATCHERS" --streams="$SLOW_STREAMS" --conns="$SLOW_CONNS" --rate="$SLOW_RATE" \
    --phase="${SLOW_PHASE_S}s" --pairs="$SLOW_PAIRS" --val-size="$VAL_SIZE"
}

# ---------------------------------------------------------------------------
# Summaries.
# ---------------------------------------------------------------------------
# median_of SYS WORKLOAD METRIC -> median over rounds of numeric values ("na" if none,
# "ERR" if every round failed)
median_of() {
  local vals=() r v
  for ((r = 1; r <= ROUNDS; r++)); do
    v=${R[$r,$1,$2,$3]:-}
    [[ $v =~ ^-?[0-9.]+$ ]] && vals+=("$v")
  done
  if ((${#vals[@]} == 0)); then
    [[ ${R[1,$1,$2,$3]:-} == ERR ]] && echo ERR || echo na
    return 0
  fi
  printf '%s\n' "${vals[@]}" | sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; print m}'
}

# sum_of SYS WORKLOAD METRIC -> sum over rounds of numeric values ("na" if none)
sum_of() {
  local r v t=0 any=0
  for ((r = 1; r <= ROUNDS; r++)); do
    v=${R[$r,$1,$2,$3]:-}
    [[ $v =~ ^[0-9]+$ ]] || continue
    t=$((t + v)) any=1
  done
  ((any)) && echo "$t" || echo na
}

hog_label() {
  case $HOG in
    none) echo "no hog" ;;
    disk) echo "beside each benchmark a disk hog on $TMP_PARENT (dd bs=1M count=$HOG_DISK_MB conv=fsync, in a loop)" ;;
    cpu) echo "beside each benchmark a CPU hog ($HOG_CPU_PROCS × yes > /dev/null)" ;;
  esac
}

label() {
  case $1 in
    put64) echo "put, $CLIENTS clients ($TOTAL)" ;;
    put1) echo "put, 1 client to the leader ($TOTAL1)" ;;
    range_l64) echo "range linearizable, $CLIENTS clients ($READ_TOTAL)" ;;
    range_s64) echo "range serializable, $CLIENTS clients ($READ_TOTAL)" ;;
    range_l1) echo "range linearizable, 1 client to the leader ($READ_TOTAL1)" ;;
    range_s1) echo "range serializable, 1 client to the leader ($READ_TOTAL1)" ;;
    watch) echo "watch: events received/s, $((WATCH_STREAMS * WATCH_PER_STREAM)) watchers of 1 key, $WATCH_PUT_TOTAL puts" ;;
    watch-latency) echo "watch-latency: puts/s at $WLAT_PUT_RATE/s, $((WLAT_STREAMS * WLAT_WATCHERS)) watchers ($WLAT_PUT_TOTAL)" ;;
    watch-get) echo "watch-get: reads/s while $WGET_WATCHERS watchers catch up $WGET_EVENTS events" ;;
    slow-watch) echo "slow-watch: puts/s at $SLOW_RATE/s to the leader, $((SLOW_WATCHERS - 1)) readers + 1 stuck watcher" ;;
  esac
}

# cell SYS WORKLOAD -> "5335 (10.80/32.00 ms)"
cell() {
  local rps p50 p99
  rps=$(median_of "$1" "$2" rps); p50=$(median_of "$1" "$2" p50_ms); p99=$(median_of "$1" "$2" p99_ms)
  [[ $rps =~ ^[0-9.]+$ ]] || { echo "$rps"; return 0; }
  [[ $p50 =~ ^[0-9.]+$ ]] || { awk -v r="$rps" 'BEGIN{printf "%.0f", r}'; return 0; }
  awk -v r="$rps" -v a="$p50" -v b="$p99" 'BEGIN{printf "%.0f (%.2f/%.2f ms)", r, a, b}'
}

num() { [[ $1 =~ ^-?[0-9.]+$ ]]; }

print_report() {
  local w e k cpu_e cpu_k ratio
  echo
  echo "etcd $ETCD_VERSION vs edictkv ($(cd "$REPO_ROOT" && GOWORK=off go list -m) at $EDICTKV_REV), $N members each on 127.0.0.1, fsync on;"
  echo "etcd's benchmark tool, keys $KEY_SIZE B, values $VAL_SIZE B; median of $ROUNDS round(s); $(nproc) CPUs; $(date -u +%F\ %H:%MZ);"
  echo "$(hog_label). Failed requests and leader changes: summed over the rounds."
  echo
  echo "| workload | etcd req/s (p50/p99) | edictkv req/s (p50/p99) | ratio edictkv/etcd (req/s) | server CPU ms/req etcd | server CPU ms/req edictkv | failed etcd | failed edictkv | leader changes etcd | leader changes edictkv |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for w in $WORKLOADS; do
    e=$(median_of etcd "$w" rps); k=$(median_of edictkv "$w" rps)
    ratio=na
    if num "$e" && num "$k"; then ratio=$(awk -v a="$k" -v b="$e" 'BEGIN{printf "%.2f", a/b}'); fi
    cpu_e=$(median_of etcd "$w" cpu_ms_per_req); cpu_k=$(median_of edictkv "$w" cpu_ms_per_req)
    num "$cpu_e" && cpu_e=$(awk -v x="$cpu_e" 'BEGIN{printf "%.3f", x}')
    num "$cpu_k" && cpu_k=$(awk -v x="$cpu_k" 'BEGIN{printf "%.3f", x}')
    echo "| $(label "$w") | $(cell etcd "$w") | $(cell edictkv "$w") | $ratio | $cpu_e | $cpu_k |" \
      "$(sum_of etcd "$w" failed) | $(sum_of edictkv "$w" failed) | $(sum_of etcd "$w" leader_changes) | $(sum_of edictkv "$w" leader_changes) |"
  done
  echo
  print_resource_table
  [[ -z $BASE ]] || print_base_table
  print_watch_tables

  local res="RESULT rounds=$ROUNDS etcd_version=$ETCD_VERSION edictkv_rev=$EDICTKV_REV clients=$CLIENTS conns=$CONNS total=$TOTAL total1=$TOTAL1"
  res+=" read_total=$READ_TOTAL read_total1=$READ_TOTAL1 key_size=$KEY_SIZE val_size=$VAL_SIZE errors=$ERRORS hog=$HOG"
  local s m r changed
  for w in $WORKLOADS; do
    for s in "${SYSTEMS[@]}"; do
      for m in rps p50_ms p99_ms cpu_s cpu_ms_per_req busy_pct cli_cpu_s dur_s srv_cores cli_cores other_cores fsync_per_req fsync_ms \
        fsync_busy disk_mib_s disk_busy flush_per_req lo_mib_s lo_kib_per_req rss_mib; do
        res+=" ${s}_${w//-/_}_${m}=$(median_of "$s" "$w" "$m")"
      done
      res+=" ${s}_${w//-/_}_failed=$(sum_of "$s" "$w" failed) ${s}_${w//-/_}_leader_changes=$(sum_of "$s" "$w" leader_changes)"
      for m in $(extra_figures "$w"); do
        case $m in
          p99_ok | mem_ok | pass) res+=" ${s}_${w//-/_}_${m}_rounds=$(sum_of "$s" "$w" "$m")" ;;
          *) res+=" ${s}_${w//-/_}_${m}=$(median_of "$s" "$w" "$m")" ;;
        esac
      done
      changed=0
      for ((r = 1; r <= ROUNDS; r++)); do [[ -n ${R[$r,$s,$w,leader_changed]:-} ]] && changed=$((changed + 1)); done
      ((changed == 0)) || res+=" ${s}_${w//-/_}_leader_changed_rounds=$changed"
    done
    e=$(median_of etcd "$w" rps); k=$(median_of edictkv "$w" rps)
    ratio=na
    if num "$e" && num "$k"; then ratio=$(awk -v a="$k" -v b="$e" 'BEGIN{printf "%.3f", a/b}'); fi
    res+=" ratio_${w//-/_}_rps=$ratio"
    if [[ -n $BASE ]]; then
      res+=" ratio_base_${w//-/_}_rps=$(ratio2 base etcd "$w" rps %.3f) head_base_${w//-/_}_rps=$(ratio2 edictkv base "$w" rps %.3f)"
    fi
    for m in $(extra_figures "$w"); do
      case $m in p99_ok | mem_ok | pass) continue ;; esac
      res+=" ratio_${w//-/_}_${m}=$(ratio_of "$w" "$m" %.3f)"
    done
  done
  echo "$res${BASE:+ base_rev=$BASE_REV} members=$N total_s=$((SECONDS - T_START))"
  print_ratios
}

# fmt3 VALUE -> a number with 3 decimals, anything else as it is
fmt3() { if num "$1"; then fmt_num "$1" %.3f; else echo "$1"; fi; }

# ratio2 SYS_A SYS_B WORKLOAD FIGURE FORMAT -> median of A / median of B, "na"
# unless both are numbers and B's is positive
ratio2() {
  local a b
  a=$(median_of "$1" "$3" "$4"); b=$(median_of "$2" "$3" "$4")
  if num "$a" && num "$b" && awk -v x="$b" 'BEGIN{exit !(x > 0)}'; then
    awk -v x="$a" -v y="$b" -v f="$5" 'BEGIN{printf f, x/y}'
  else
    echo na
  fi
}

# print_resource_table: what each workload cost the machine, per system (medians)
print_resource_table() {
  local w s
  echo "Resources (medians): cores busy, servers / benchmark client / the rest of the host (other tenants, a hog,"
  echo "kernel threads) / whole host (of $(nproc)); durable log commits per request (all members), their mean time"
  echo "(etcd: its WAL's fsync; edictkv: its log store's write and fdatasync), and the share of the run each member"
  echo "spent in them; the device under $TMP_PARENT ($DISK_DEV, every process's I/O): writes, share of the run busy,"
  echo "cache flushes per request; loopback traffic (clients and peers); servers' resident memory after the workload:"
  echo
  echo "| workload | system | cores: servers / client / rest / host | log commits per req | commit ms | in commits | disk MiB/s (busy) | flushes per req | loopback MiB/s (KiB/req) | RSS MiB |"
  echo "|---|---|---|---:|---:|---:|---|---:|---|---:|"
  for w in $WORKLOADS; do
    for s in "${SYSTEMS[@]}"; do
      echo "| $(label "$w") | $s | $(median_of "$s" "$w" srv_cores) / $(median_of "$s" "$w" cli_cores) / $(median_of "$s" "$w" other_cores) /" \
        "$(awk -v b="$(median_of "$s" "$w" busy_pct)" -v n="$(nproc)" 'BEGIN{if (b ~ /^[0-9.]+$/) printf "%.2f", b*n/100; else print b}') |" \
        "$(median_of "$s" "$w" fsync_per_req) | $(median_of "$s" "$w" fsync_ms) | $(median_of "$s" "$w" fsync_busy) |" \
        "$(median_of "$s" "$w" disk_mib_s) ($(median_of "$s" "$w" disk_busy)) | $(median_of "$s" "$w" flush_per_req) |" \
        "$(median_of "$s" "$w" lo_mib_s) ($(median_of "$s" "$w" lo_kib_per_req)) | $(median_of "$s" "$w" rss_mib) |"
    done
  done
  echo
}

# print_base_table: edictkv at BASE beside etcd and beside this tree's edictkv,
# the medians of the same rounds.
print_base_table() {
  local w
  echo "edictkv at BASE $BASE_REV, in the same rounds (head: this tree's edictkv, $EDICTKV_REV):"
  echo
  echo "| workload | base req/s (p50/p99) | ratio base/etcd (req/s) | ratio head/etcd (req/s) | **head/base req/s** | p99 head/base | server CPU ms/req base | head | failed base | leader changes base |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for w in $WORKLOADS; do
    echo "| $(label "$w") | $(cell base "$w") | $(ratio2 base etcd "$w" rps %.2f) | $(ratio2 edictkv etcd "$w" rps %.2f) |" \
      "$(ratio2 edictkv base "$w" rps %.2f) | $(ratio2 edictkv base "$w" p99_ms %.2f) | $(fmt3 "$(median_of base "$w" cpu_ms_per_req)") |" \
      "$(fmt3 "$(median_of edictkv "$w" cpu_ms_per_req)") | $(sum_of base "$w" failed) | $(sum_of base "$w" leader_changes) |"
  done
  echo
}

# round_range SYS_A SYS_B WORKLOAD -> "[lo-hi]": the lowest and highest of the
# rounds' own req/s ratios A/B (each round runs both), empty with one round. A
# wide range says the machine moved under the run: one disturbed round of three
# does not move the median, but shows here.
round_range() {
  ((ROUNDS > 1)) || return 0
  local r a b vals=()
  for ((r = 1; r <= ROUNDS; r++)); do
    a=${R[$r,$1,$3,rps]:-} b=${R[$r,$2,$3,rps]:-}
    if num "$a" && num "$b" && awk -v x="$b" 'BEGIN{exit !(x > 0)}'; then vals+=("$(awk -v x="$a" -v y="$b" 'BEGIN{printf "%.2f", x/y}')"); fi
  done
  ((${#vals[@]} > 1)) || return 0
  printf '%s\n' "${vals[@]}" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "[%s-%s]", lo, hi}'
}

# print_ratios: one line for a commit message: per workload edictkv/etcd req/s,
# the range of the rounds' own ratios, and (p99 edictkv/etcd); with BASE the
# same for the base build, and head/base.
print_ratios() {
  local w line sys f c
  line="RATIOS edictkv/etcd req/s (p99) at $EDICTKV_REV, $ROUNDS round(s)"
  ((N == 3)) || line+=", $N members"
  ((VAL_SIZE == 256)) || line+=", values $VAL_SIZE B"
  ((CLIENTS == 64)) || line+=", $CLIENTS clients"
  [[ $HOG == none ]] || line+=", hog $HOG"
  line+=":"
  for w in $WORKLOADS; do
    line+=" $w $(ratio2 edictkv etcd "$w" rps %.2f)$(round_range edictkv etcd "$w") ($(ratio2 edictkv etcd "$w" p99_ms %.2f))"
  done
  if [[ -n $BASE ]]; then
    line+=" | base $BASE_REV:"
    for w in $WORKLOADS; do
      line+=" $w $(ratio2 base etcd "$w" rps %.2f)$(round_range base etcd "$w") ($(ratio2 base etcd "$w" p99_ms %.2f))"
    done
    line+=" | head/base req/s:"
    for w in $WORKLOADS; do line+=" $w $(ratio2 edictkv base "$w" rps %.2f)$(round_range edictkv base "$w")"; done
  fi
  line+=" | others' CPU up to $(max_of other_cores) cores"
  for sys in "${SYSTEMS[@]}"; do
    for w in $WORKLOADS; do
      f=$(sum_of "$sys" "$w" failed) c=$(sum_of "$sys" "$w" leader_changes)
      if [[ $f =~ ^[1-9] || $c =~ ^[1-9] ]]; then line+=" | $sys $w failed $f, leader changes $c"; fi
    done
  done
  echo "$line"
}

# max_of FIGURE -> its highest value over every round, system and workload ("na" if none)
max_of() {
  local r s w v vals=()
  for ((r = 1; r <= ROUNDS; r++)); do
    for s in "${SYSTEMS[@]}"; do
      for w in $WORKLOADS; do
        v=${R[$r,$s,$w,$1]:-}
        if num "$v"; then vals+=("$v"); fi
      done
    done
  done
  ((${#vals[@]} > 0)) || { echo na; return 0; }
  printf '%s\n' "${vals[@]}" | sort -g | tail -n 1
}

# ratio_of WORKLOAD FIGURE FORMAT -> median edictkv / median etcd, "na" unless both numeric
ratio_of() {
  local e k
  e=$(median_of etcd "$1" "$2"); k=$(median_of edictkv "$1" "$2")
  if num "$e" && num "$k" && awk -v x="$e" 'BEGIN{exit !(x > 0)}'; then
    awk -v a="$k" -v b="$e" -v f="$3" 'BEGIN{printf f, a/b}'
  else
    echo na
  fi
}

# figure_row WORKLOAD FIGURE LABEL: "| LABEL | etcd | edictkv | ratio |" of the medians
figure_row() {
  echo "| $3 | $(median_of etcd "$1" "$2") | $(median_of edictkv "$1" "$2") | $(ratio_of "$1" "$2" %.2f) |"
}

# print_watch_tables: the watch workloads' own figures, then the slow-watch case.
print_watch_tables() {
  local w any=0
  for w in $WORKLOADS; do case $w in watch | watch-latency | watch-get) any=1 ;; esac; done
  if ((any)); then
    echo "Watch figures, medians; edictkv/etcd above 1 is better for a rate, below 1 for a time:"
    echo
    echo "| workload: figure | etcd | edictkv | edictkv/etcd |"
    echo "|---|---:|---:|---:|"
    for w in $WORKLOADS; do
      case $w in
        watch)
          figure_row watch rps "watch: events received/s ($((WATCH_STREAMS * WATCH_PER_STREAM)) watchers of 1 key, $WATCH_PUT_TOTAL puts)"
          figure_row watch create_rps "watch: watchers created/s"
          figure_row watch create_p99_ms "watch: creating a watcher, p99 (ms)"
          figure_row watch cpu_ms_per_req "watch: server CPU per event (ms)" ;;
        watch-latency)
          figure_row watch-latency ev_p50_ms "watch-latency: event after its put, p50 (ms) ($((WLAT_STREAMS * WLAT_WATCHERS)) watchers, $WLAT_PUT_RATE puts/s)"
          figure_row watch-latency ev_p99_ms "watch-latency: event after its put, p99 (ms)"
          figure_row watch-latency rps "watch-latency: puts/s"
          figure_row watch-latency p99_ms "watch-latency: put p99 (ms)" ;;
        watch-get)
          figure_row watch-get catchup_eps "watch-get: events caught up/s ($WGET_WATCHERS watchers x $WGET_EVENTS past events, $WGET_STREAMS stream(s))"
          figure_row watch-get catchup_s "watch-get: creating and catching up, all watchers (s)"
          figure_row watch-get rps "watch-get: serializable reads/s meanwhile"
          figure_row watch-get p99_ms "watch-get: read p99 (ms)" ;;
      esac
    done
    echo
  fi
  [[ " $WORKLOADS " == *" slow-watch "* ]] || return 0
  echo "slow-watch: $((SLOW_WATCHERS - 1)) reading watchers of the prefix an open-loop load puts to ($SLOW_RATE puts/s, values" \
    "$VAL_SIZE B), all on the leader; $SLOW_PAIRS pairs of ${SLOW_PHASE_S}-s phases, the readers alone, then with 1 more" \
    "watcher that never reads (own stream, own connection, fixed 64 KiB windows). Put latency from the moment each put" \
    "was due; live heap after forced GCs. Medians over the rounds:"
  echo
  echo "| figure | etcd | edictkv | edictkv/etcd |"
  echo "|---|---:|---:|---:|"
  figure_row slow-watch base_rps "puts/s, readers alone"
  figure_row slow-watch stuck_rps "puts/s, with the stuck watcher"
  figure_row slow-watch base_p50_ms "put p50 (ms), readers alone"
  figure_row slow-watch stuck_p50_ms "put p50 (ms), with the stuck watcher"
  figure_row slow-watch base_p99_ms "put p99 (ms), readers alone"
  figure_row slow-watch stuck_p99_ms "put p99 (ms), with the stuck watcher"
  figure_row slow-watch p99_ratio "**put p99 with / without the stuck watcher** (pass: at most 1.2)"
  figure_row slow-watch base_event_p99_ms "readers' event p99 after the put was due (ms), alone"
  figure_row slow-watch stuck_event_p99_ms "readers' event p99 (ms), with the stuck watcher"
  figure_row slow-watch heap0_mib "leader's live heap with the readers, before the load (MiB)"
  figure_row slow-watch stuck_heap_kib "**live heap the stuck watcher held (KiB)**: stuck, less once gone"
  figure_row slow-watch mem_bound_kib "its bound (KiB): (128+2) responses + gRPC's write quota and connection"
  figure_row slow-watch heap_noise_kib "the same two readings in a base phase (KiB): noise"
  figure_row slow-watch catchup_got "a watcher unread through catchup_due=$(median_of etcd slow-watch catchup_due)/$(median_of edictkv slow-watch catchup_due) puts: events it got on reading again"
  figure_row slow-watch catchup_ms "… and how long it took to catch up (ms)"
  figure_row slow-watch base_rss_peak_mib "leader's peak RSS (MiB), readers alone"
  figure_row slow-watch stuck_rss_peak_mib "leader's peak RSS (MiB), with the stuck watcher"
  echo "| rounds passing p99 / memory / both (of $ROUNDS) | $(sum_of etcd slow-watch p99_ok) / $(sum_of etcd slow-watch mem_ok) /" \
    "$(sum_of etcd slow-watch pass) | $(sum_of edictkv slow-watch p99_ok) / $(sum_of edictkv slow-watch mem_ok) / $(sum_of edictkv slow-watch pass) | |"
  echo
}

# ---------------------------------------------------------------------------
main() {
  T_START=$SECONDS
  WORK=$(mktemp -d "$TMP_PARENT/edictlog-etcd-compare.XXXXXX")
  build_binaries
  log "work dir $WORK; ROUNDS=$ROUNDS WORKLOADS=\"$WORKLOADS\" HOG=$HOG"
  local round order i n=${#SYSTEMS[@]}
  for ((round = 1; round <= ROUNDS; round++)); do
    # rotate which system goes first: with two, they alternate; with three
    # (BASE), each takes every place once in three rounds
    order=()
    for ((i = 0; i < n; i++)); do order+=("${SYSTEMS[(round - 1 + i) % n]}"); done
    for s in "${order[@]}"; do run_system "$round" "$s"; done
  done
  print_report
  CDIR=""
  if ((ERRORS > 0)); then log "$ERRORS workload(s) failed"; exit 1; fi
}

main "$@"
