#!/usr/bin/env bash
# run.sh -- how etcd and edictkv scale with their data, measured in ONE run on
# this machine with the same client (etcd's own `benchmark` tool) and the same
# probe (bench/scale/probe, over etcd's v3 gRPC API, which both serve).
#
# For each system in ORDER (etcd: 3 members; edictkv: 3 processes), on
# 127.0.0.1 with free ports, fsync on (each system's default durability), in a
# fresh temp dir:
#   1. load: start a fresh cluster, wait until every member is ready, then
#        benchmark --endpoints=<all 3> --clients=CLIENTS --conns=CONNS --precise \
#          put --key-size=KEY_SIZE --val-size=VAL --total=KEYS \
#          --sequential-keys --key-space-size=KEYS
#      and keep the benchmark's own report: req/s, p50, p99, slowest, total
#      time, failed requests; beside it the servers' CPU (utime+stime from
#      /proc/PID/stat), the host's busy % (/proc/stat, a noise indicator) and
#      the changes of leader (the largest increase over the members of
#      etcd_server_leader_changes_seen_total / edictkv_leader_changes_seen_total).
#      Then the time until every member has applied the leader's revision.
#   2. at rest, after the load:
#      - resident memory: the sum of VmRSS (/proc/PID/status) of the 3 servers;
#      - disk: du of each member's data dir (summed over the 3), and its parts:
#        the state database (etcd: member/snap/db; edictkv: the state store's
#        file, a *.db other than the log's edictkv.db, or none while its state
#        lives in memory), the log (etcd: member/wal; edictkv: log/, or
#        edictkv.db with --log-store bolt) and
#        the snapshots (etcd: member/snap/*.snap; edictkv: snapshots/);
#      - restart of a follower: R = the leader's revision (a linearizable read),
#        SIGTERM to one follower, wait for it to exit, start it again with the
#        same flags; from the start: "ready" = its /readyz answers 200 and a
#        linearizable Range at it succeeds; "applied" = a serializable Range at
#        revision R, answered from its own state, succeeds (or says compacted:
#        it is past R and keeps no history back to it). Also the SIGTERM-to-exit
#        time;
#      - a new member: R as above; etcd: `etcdctl member add` then a 4th etcd
#        started empty with --initial-cluster-state existing; edictkv: a 4th
#        process started empty with `serve --join`, then `edictkv add-learner`
#        (docs/edictkv.md, Membership). From the first of the two steps: "ready"
#        and "applied" as above, at the new member. edictkv's learner is then
#        promoted (`edictkv promote`), timed but not compared (etcd's member
#        votes from the start);
#   3. stops exactly the processes it started (SIGTERM, SIGKILL after
#      STOP_TIMEOUT) and removes the cluster's data.
# Then prints a markdown table (metric | etcd | edictkv | edictkv/etcd), writes
# it, a RESULT line and each benchmark report to RESULTS_DIR/<time>-keys<KEYS>/,
# and removes its temp dir (trap, also on error or Ctrl-C).
#
# Output: progress on stderr; on stdout the table, then one machine-readable
# line "RESULT key=value ..." (<sys>_<metric>=value for every figure,
# ratio_<metric>=edictkv/etcd).
#
# Exit status 1 if a step failed or the load had failed requests (the figures
# measured are still printed, a failed one as ERR); a server that dies, or a
# cluster that does not start, stops the run at once.
#
# Env (defaults):
#   KEYS=1000000            keys loaded (one put each, sequential keys)
#   VAL=1024                value size, bytes
#   KEY_SIZE=8              key size, bytes (the benchmark's default)
#   CLIENTS=64 CONNS=8      the load's clients and gRPC connections
#                           (CONNS as bench/etcd/compare.sh)
#   ORDER="etcd edictkv"    which systems, in this order
#   ETCD_VERSION=v3.6.8     passed to bench/etcd/install.sh
#   BIN=/tmp/edictlog-etcd/bin  etcd, etcdctl, benchmark (built there by install.sh)
#   EDICTKV_REF=            empty: build edictkv from the working tree; a git ref
#                           (e.g. HEAD): build it from that commit alone (git archive),
#                           so edits in progress in the tree do not leak in
#   TMP_PARENT=/tmp         filesystem of the data dirs (it decides the fsync cost)
#   RESULTS_DIR=bench/scale/results   where each run's directory goes
#   BENCH_TIMEOUT=600+KEYS/100  seconds for the load
#   WAIT_TIMEOUT=300+KEYS/500   seconds for a member to become ready / catch up
#   READY_TIMEOUT=60        seconds for a fresh cluster to become ready
#   STOP_TIMEOUT=30         seconds between SIGTERM and SIGKILL
#   PROBE_INTERVAL=50ms     time between the probe's polls
#   KEEP_TMP=0              1: keep data dirs and logs (the path is printed)
#   ETCD_EXTRA_FLAGS=""     extra flags for every etcd member
#   EDICTKV_EXTRA_FLAGS=""  extra flags for every edictkv process
#   PORT_MIN=20000 PORT_MAX=32000  random free ports in this range, below the
#                           kernel's ephemeral range
#
# Needs: go, jq, ss, curl, du, timeout, git (EDICTKV_REF), getconf.
#
# Examples:
#   bash bench/scale/run.sh                                  # 1 M keys of 1 KiB: a quiet machine, an hour or more
#   KEYS=20000 bash bench/scale/run.sh                       # a smoke test, a minute or two
#   KEYS=200000 EDICTKV_REF=HEAD bash bench/scale/run.sh
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)

KEYS=${KEYS:-1000000}
VAL=${VAL:-1024}
KEY_SIZE=${KEY_SIZE:-8}
CLIENTS=${CLIENTS:-64}
CONNS=${CONNS:-8}
ORDER=${ORDER:-"etcd edictkv"}
export ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
export BIN=${BIN:-/tmp/edictlog-etcd/bin}
EDICTKV_REF=${EDICTKV_REF:-}
TMP_PARENT=${TMP_PARENT:-/tmp}
RESULTS_DIR=${RESULTS_DIR:-$SCRIPT_DIR/results}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-$((600 + KEYS / 100))}
WAIT_TIMEOUT=${WAIT_TIMEOUT:-$((300 + KEYS / 500))}
READY_TIMEOUT=${READY_TIMEOUT:-60}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
PROBE_INTERVAL=${PROBE_INTERVAL:-50ms}
KEEP_TMP=${KEEP_TMP:-0}
ETCD_EXTRA_FLAGS=${ETCD_EXTRA_FLAGS:-}
EDICTKV_EXTRA_FLAGS=${EDICTKV_EXTRA_FLAGS:-}
PORT_MIN=${PORT_MIN:-20000}
PORT_MAX=${PORT_MAX:-32000}

N=3 # members per cluster; a 4th joins in step 2
CLK_TCK=$(getconf CLK_TCK)

log() { echo "[scale $(date +%H:%M:%S)] $*" >&2; }
die() { log "FATAL: $*"; exit 1; }

for tool in go jq ss curl du timeout getconf awk; do
  command -v "$tool" >/dev/null || die "missing tool: $tool"
done
for v in KEYS VAL KEY_SIZE CLIENTS CONNS BENCH_TIMEOUT WAIT_TIMEOUT READY_TIMEOUT STOP_TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v=${!v}: want a positive integer"
done
for s in $ORDER; do
  case $s in etcd | edictkv) ;; *) die "ORDER: unknown system $s (etcd, edictkv)" ;; esac
done

# ---------------------------------------------------------------------------
# Temp dir, results, cleanup. PID[i] holds exactly the server processes this
# script started (each binary launched directly, so the PID is the server's).
# ---------------------------------------------------------------------------
WORK=$(mktemp -d "$TMP_PARENT/edictlog-scale.XXXXXX")
declare -a PID=()
RUN_DIR=""  # this run's results
SYS=""      # the system whose cluster runs
CDIR=""     # its data dirs and logs
ERRORS=0
declare -A R=() # R[sys,metric] = figure

# stop_member I: SIGTERM, SIGKILL after STOP_TIMEOUT, reap. Sets STOPPED_IN to
# the seconds from SIGTERM to exit, with a "!" if it needed SIGKILL. (Not to be
# called in a subshell: only this shell can reap its children, and kill -0
# finds a child that is not reaped.)
STOPPED_IN=""
stop_member() {
  local i=$1 pid=${PID[$1]:-} t0 killed=""
  STOPPED_IN=""
  [[ -n $pid ]] || return 0
  t0=$(date +%s%N)
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; killed="!"; fi
  wait "$pid" 2>/dev/null || true
  PID[i]=""
  STOPPED_IN="$(secs_since "$t0")$killed"
}

stop_cluster() {
  local i n=0 forced=0
  for i in "${!PID[@]}"; do
    [[ -n ${PID[$i]} ]] || continue
    stop_member "$i"
    n=$((n + 1))
    [[ $STOPPED_IN != *! ]] || forced=$((forced + 1))
  done
  PID=()
  ((n == 0)) || log "$SYS: stopped $n server processes ($forced needed SIGKILL)"
}

# in_bg OUTFILE CMD...: runs CMD with its output in OUTFILE and waits for it,
# in the background, so that a signal to this script is handled at once
# (bash runs a trap only once a foreground command ends) and cleanup can stop
# it. Returns CMD's status.
CHILD=""
in_bg() {
  local out=$1 rc=0
  shift
  "$@" >"$out" 2>&1 &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

cleanup() {
  local rc=$?
  set +e
  if [[ -n $CHILD ]]; then kill -TERM "$CHILD" 2>/dev/null; wait "$CHILD" 2>/dev/null; fi
  if ((rc != 0)) && [[ -n $CDIR ]]; then
    for f in "$CDIR"/logs/*.log; do
      [[ -s $f ]] || continue
      echo "--- tail of $f ---" >&2
      tail -n 15 "$f" >&2
    done
  fi
  stop_cluster
  if ((rc != 0)) && [[ -n $CDIR && -n $RUN_DIR ]]; then
    cp -r "$CDIR/logs" "$RUN_DIR/logs-$SYS" 2>/dev/null && log "the servers' logs are in $RUN_DIR/logs-$SYS"
  fi
  [[ -z $RUN_DIR ]] || rmdir "$RUN_DIR" 2>/dev/null # nothing written
  if [[ $KEEP_TMP == 1 ]]; then log "kept $WORK"; else rm -rf "${WORK:?}"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------
# Small helpers.
# ---------------------------------------------------------------------------
secs_since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN{printf "%.3f", (b-a)/1e9}'; }
num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
trunc() { awk '{ if (length($0) > 90) $0 = substr($0, 1, 89) "…"; print }'; }
mib() { awk -v b="$1" 'BEGIN{printf "%.1f", b/1048576}'; }

# Ports: a port is taken if any TCP socket but a TIME-WAIT one uses it. Drawn
# below the kernel's ephemeral range so that no client's outgoing connection
# grabs one between the check and the bind (as bench/etcd/compare.sh does).
port_taken() { ss -Htan "( sport = :$1 )" | grep -vq '^TIME-WAIT'; }
pick_ports() { # COUNT -> PORTS=(...)
  local count=$1 p tries=0 eph_low max=$PORT_MAX
  PORTS=()
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
# Binaries: etcd's three from install.sh (a no-op when present at
# ETCD_VERSION); edictkv and the probe built here, into the temp dir, so a
# concurrent bench/etcd/compare.sh's $BIN/edictkv is left alone.
# ---------------------------------------------------------------------------
EDICTKV="$WORK/bin/edictkv"
PROBE="$WORK/bin/probe"
EDICTKV_DESC=""
build_binaries() {
  mkdir -p "$WORK/bin"
  log "checking etcd binaries in $BIN (bench/etcd/install.sh)"
  bash "$REPO_ROOT/bench/etcd/install.sh" >&2
  local src=$REPO_ROOT
  if [[ -n $EDICTKV_REF ]]; then
    local commit
    commit=$(git -C "$REPO_ROOT" rev-parse --verify "$EDICTKV_REF^{commit}") || die "EDICTKV_REF=$EDICTKV_REF: not a commit"
    src="$WORK/src"
    mkdir -p "$src"
    git -C "$REPO_ROOT" archive "$commit" | tar -x -C "$src"
    EDICTKV_DESC="$(git -C "$REPO_ROOT" log -1 --format='%h (%cd) %s' --date=short "$commit" | trunc)"
  else
    EDICTKV_DESC="$(git -C "$REPO_ROOT" log -1 --format='%h (%cd) %s' --date=short | trunc)"
    if [[ -n $(git -C "$REPO_ROOT" status --porcelain --untracked-files=no -- . ':!bench' ':!docs' ':!jepsen') ]]; then
      EDICTKV_DESC+=" + uncommitted changes in the working tree"
    fi
  fi
  log "building edictkv from $src: $EDICTKV_DESC"
  (cd "$src" && go build -o "$EDICTKV" ./cmd/edictkv)
  (cd "$REPO_ROOT/bench" && go build -o "$PROBE" ./scale/probe)
}

# ---------------------------------------------------------------------------
# Clusters. Per member i (0..3): EP (gRPC host:port), READYZ and METRICS (URLs),
# DDIR (data dir). start_member I launches member I with the flags it was
# given first, so a restart is the same command.
# ---------------------------------------------------------------------------
declare -a EP=() READYZ=() METRICS=() DDIR=() CPORT=() PPORT=() RPORT=() HPORT=() GPORT=()
declare -a ETCD_STATE=() ETCD_CLUSTER=() EDICTKV_JOIN=()
TOKEN=""
EDICTKV_PEERS=""

init_cluster() {
  local i
  CDIR="$WORK/$SYS"
  mkdir -p "$CDIR/logs"
  EP=() READYZ=() METRICS=() DDIR=()
  TOKEN="scale-$$-$RANDOM"
  case $SYS in
    etcd)
      pick_ports $((2 * (N + 1)))
      CPORT=("${PORTS[@]:0:N+1}") PPORT=("${PORTS[@]:N+1:N+1}")
      for ((i = 0; i <= N; i++)); do
        EP[i]="127.0.0.1:${CPORT[i]}"
        READYZ[i]="http://127.0.0.1:${CPORT[i]}/readyz"
        METRICS[i]="http://127.0.0.1:${CPORT[i]}/metrics"
        DDIR[i]="$CDIR/m$i.etcd"
      done ;;
    edictkv)
      pick_ports $((3 * (N + 1)))
      RPORT=("${PORTS[@]:0:N+1}") HPORT=("${PORTS[@]:N+1:N+1}") GPORT=("${PORTS[@]:2*(N+1):N+1}")
      EDICTKV_PEERS=""
      for ((i = 0; i < N; i++)); do
        EDICTKV_PEERS+="${EDICTKV_PEERS:+,}$((i + 1))=127.0.0.1:${RPORT[i]}/127.0.0.1:${HPORT[i]}"
      done
      for ((i = 0; i <= N; i++)); do
        EP[i]="127.0.0.1:${GPORT[i]}"
        READYZ[i]="http://127.0.0.1:${HPORT[i]}/readyz"
        METRICS[i]="http://127.0.0.1:${HPORT[i]}/metrics"
        DDIR[i]="$CDIR/m$i.edictkv"
      done ;;
  esac
}

etcd_peer() { echo "m$1=http://127.0.0.1:${PPORT[$1]}"; }

start_member() {
  local i=$1
  case $SYS in
    etcd)
      # shellcheck disable=SC2086 # ETCD_EXTRA_FLAGS is a list of words on purpose
      "$BIN/etcd" --name "m$i" --data-dir "${DDIR[i]}" \
        --listen-client-urls "http://127.0.0.1:${CPORT[i]}" \
        --advertise-client-urls "http://127.0.0.1:${CPORT[i]}" \
        --listen-peer-urls "http://127.0.0.1:${PPORT[i]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${PPORT[i]}" \
        --initial-cluster "${ETCD_CLUSTER[i]}" \
        --initial-cluster-token "$TOKEN" --initial-cluster-state "${ETCD_STATE[i]}" \
        --log-level warn --log-outputs "$CDIR/logs/m$i.log" \
        $ETCD_EXTRA_FLAGS >>"$CDIR/logs/m$i.stdout" 2>&1 &
      PID[i]=$! ;;
    edictkv)
      # shellcheck disable=SC2086 # EDICTKV_EXTRA_FLAGS is a list of words on purpose
      "$EDICTKV" serve --id $((i + 1)) --data-dir "${DDIR[i]}" \
        --raft-addr "127.0.0.1:${RPORT[i]}" --http-addr "127.0.0.1:${HPORT[i]}" \
        --grpc-addr "127.0.0.1:${GPORT[i]}" --peers "$EDICTKV_PEERS" ${EDICTKV_JOIN[i]:-} \
        --log-level warn $EDICTKV_EXTRA_FLAGS >>"$CDIR/logs/m$i.log" 2>&1 &
      PID[i]=$! ;;
  esac
}

start_cluster() {
  local i cluster=""
  init_cluster
  if [[ $SYS == etcd ]]; then
    for ((i = 0; i < N; i++)); do cluster+="${cluster:+,}$(etcd_peer "$i")"; done
    for ((i = 0; i < N; i++)); do ETCD_CLUSTER[i]=$cluster ETCD_STATE[i]=new; done
  else
    EDICTKV_JOIN=()
  fi
  for ((i = 0; i < N; i++)); do start_member "$i"; done
}

# endpoints of the three original members, comma-separated
eps3() { local IFS=,; echo "${EP[*]:0:N}"; }
ctl() { "$BIN/etcdctl" --endpoints="$(eps3)" --dial-timeout=2s --command-timeout=15s "$@"; }

check_alive() { # WHAT
  local i
  for i in "${!PID[@]}"; do
    [[ -z ${PID[$i]} ]] || kill -0 "${PID[$i]}" 2>/dev/null || die "$SYS: member $i (pid ${PID[$i]}) exited ($1)"
  done
}

wait_ready() {
  local i ok deadline=$((SECONDS + READY_TIMEOUT))
  while ((SECONDS < deadline)); do
    check_alive "during startup"
    ok=1
    for ((i = 0; i < N; i++)); do
      [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${READYZ[i]}") == 200 ]] || { ok=0; break; }
    done
    if ((ok)) && ctl endpoint health >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "$SYS: cluster not ready after ${READY_TIMEOUT}s"
}

# leader -> index (0..N-1) of the member whose status says it leads
# (.Status.leader == .Status.header.member_id); exactly one, or die.
leader() {
  local l i
  l=$(ctl endpoint status -w json | jq -r '.[] | select(.Status.leader == .Status.header.member_id) | .Endpoint')
  [[ -n $l && $l != *$'\n'* ]] || die "$SYS: could not determine a single leader (got: '${l//$'\n'/ }')"
  for ((i = 0; i < N; i++)); do [[ ${EP[i]} != "$l" ]] || { echo "$i"; return 0; }; done
  die "$SYS: the leader $l is none of the members"
}

# ---------------------------------------------------------------------------
# Measuring.
# ---------------------------------------------------------------------------
srv_cpu_ticks() { # utime+stime of the 3 original members, clock ticks
  local t=0 i
  for ((i = 0; i < N; i++)); do
    # the fields after comm's ")": utime is the 12th, stime the 13th
    t=$((t + $(sed 's/^.*) //' "/proc/${PID[i]}/stat" | awk '{print $12 + $13}')))
  done
  echo "$t"
}
host_ticks() { awk '/^cpu / {t=0; for (i=2;i<=NF;i++) t+=$i; print t-$5-$6, t}' /proc/stat; }

leader_changes() { # each original member's counter, space-separated ("na": no answer)
  local i v
  for ((i = 0; i < N; i++)); do
    v=$(curl -s --max-time 5 "${METRICS[i]}" |
      awk '$1 == "etcd_server_leader_changes_seen_total" || $1 == "edictkv_leader_changes_seen_total" {print $2; exit}') || true
    printf '%s ' "${v:-na}"
  done
}
max_delta() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); m = -1
    for (i = 1; i <= n; i++) if (x[i] != "na" && y[i] != "na" && y[i] - x[i] > m) m = y[i] - x[i]
    print (m < 0 ? "na" : m) }'
}

failed_requests() { # OUTFILE -> the count in the benchmark's "Error distribution"
  tr '\r' '\n' <"$1" | awk '/^Error distribution:/ {on = 1; next}
    on && /^ *\[[0-9]+\]/ {gsub(/[][ ]/, "", $1); n += $1; next}
    on && NF {on = 0}
    END {print n + 0}'
}

rev_at() { # I -> the revision of a linearizable read at member I
  "$PROBE" rev --endpoint "${EP[$1]}" --timeout 30s
}

# probe_wait I SINCE_NS REV KEY_PREFIX: the probe's wait at member I; sets
# R[SYS,<prefix>_ready_s] and R[SYS,<prefix>_applied_s] (ERR if not within
# WAIT_TIMEOUT).
probe_wait() {
  local i=$1 since=$2 rev=$3 k=$4 out="$CDIR/probe.out" rc=0
  in_bg "$out" "$PROBE" wait --endpoint "${EP[i]}" --readyz "${READYZ[i]}" --rev "$rev" --since "$since" \
    --interval "$PROBE_INTERVAL" --timeout "${WAIT_TIMEOUT}s" || rc=$?
  R[$SYS,${k}_ready_s]=$(awk -F= '$1 == "ready_s" {print $2}' "$out")
  R[$SYS,${k}_applied_s]=$(awk -F= '$1 == "applied_s" {print $2}' "$out")
  : "${R[$SYS,${k}_ready_s]:=ERR}" "${R[$SYS,${k}_applied_s]:=ERR}"
  if ((rc != 0)); then
    log "ERROR: $SYS: $k at member $i: $(grep -v '=' "$out")"
    ERRORS=$((ERRORS + 1))
  fi
}

# load: the benchmark's put of KEYS keys to all members.
load() {
  local out="$CDIR/load.txt" c0 c1 h0 h1 lc0 lc1 ok=1
  check_alive "before the load"
  lc0=$(leader_changes)
  c0=$(srv_cpu_ticks); h0=$(host_ticks)
  log "$SYS: loading $KEYS keys of $VAL bytes ($CLIENTS clients, $CONNS conns, all $N members)"
  in_bg "$out" timeout -k 10 "$BENCH_TIMEOUT" "$BIN/benchmark" --endpoints="$(eps3)" --clients="$CLIENTS" --conns="$CONNS" \
    --precise put --key-size="$KEY_SIZE" --val-size="$VAL" --total="$KEYS" --sequential-keys --key-space-size="$KEYS" || ok=0
  c1=$(srv_cpu_ticks); h1=$(host_ticks)
  lc1=$(leader_changes)
  check_alive "during the load"
  # the report after "Summary:", without the client's log lines
  tr '\r' '\n' <"$out" | sed -n '/^Summary:/,$p' >"$RUN_DIR/load-$SYS.txt"
  ((ok)) || { log "ERROR: $SYS: the benchmark failed or timed out (${BENCH_TIMEOUT}s):"; tail -n 20 "$out" >&2; die "$SYS: load failed"; }
  local rps p50 p99 slowest total
  read -r rps p50 p99 slowest total < <(tr '\r' '\n' <"$out" | awk '
    /Requests\/sec:/ {rps=$2}
    / 50% in /       {p50=$3*1000}
    / 99% in /       {p99=$3*1000}
    /^ *Slowest:/    {slow=$2*1000}
    /^ *Total:/      {tot=$2}
    function f(x, fmt) { return x == "" ? "ERR" : sprintf(fmt, x) }
    END {print f(rps, "%.0f"), f(p50, "%.1f"), f(p99, "%.1f"), f(slow, "%.1f"), f(tot, "%.1f")}')
  [[ $rps != ERR ]] || { tail -n 20 "$out" >&2; die "$SYS: no Requests/sec in the benchmark's output"; }
  R[$SYS,load_rps]=$rps R[$SYS,load_p50_ms]=$p50 R[$SYS,load_p99_ms]=$p99
  R[$SYS,load_slowest_ms]=$slowest R[$SYS,load_total_s]=$total
  R[$SYS,load_failed]=$(failed_requests "$out")
  R[$SYS,load_server_cpu_s]=$(awk -v a="$c0" -v b="$c1" -v t="$CLK_TCK" 'BEGIN{printf "%.1f", (b-a)/t}')
  R[$SYS,load_host_busy_pct]=$(echo "$h0 $h1" | awk '{printf "%.0f", 100*($3-$1)/($4-$2)}')
  R[$SYS,load_leader_changes]=$(max_delta "$lc0" "$lc1")
  local failed=${R[$SYS,load_failed]}
  if ((failed > 0)); then
    log "ERROR: $SYS: ${R[$SYS,load_failed]} requests of the load failed:"
    tr '\r' '\n' <"$out" | sed -n '/^Error distribution:/,/^ *$/p' | head -n 12 >&2
    ERRORS=$((ERRORS + 1))
  fi
  log "$SYS: load: ${rps} req/s, p50 ${p50} ms, p99 ${p99} ms, slowest ${slowest} ms, ${total} s;" \
    "failed ${R[$SYS,load_failed]}, leader changes ${R[$SYS,load_leader_changes]}, server CPU ${R[$SYS,load_server_cpu_s]} s, host busy ${R[$SYS,load_host_busy_pct]}%"
}

# settle: time from the load's end until every member has applied the
# leader's revision.
settle() {
  local t0 l rev i worst=0 v
  t0=$(date +%s%N)
  l=$(leader)
  rev=$(rev_at "$l")
  R[$SYS,rev_after_load]=$rev
  for ((i = 0; i < N; i++)); do
    probe_wait "$i" "$t0" "$rev" settle
    v=${R[$SYS,settle_applied_s]}
    if ! num "$v"; then worst=ERR; break; fi
    worst=$(awk -v a="$worst" -v b="$v" 'BEGIN{print (b > a) ? b : a}')
  done
  R[$SYS,caught_up_after_load_s]=$worst
  unset "R[$SYS,settle_ready_s]" "R[$SYS,settle_applied_s]"
  log "$SYS: every member applied revision $rev ${worst} s after the load"
}

# du_b PATH... -> bytes on disk (0 for none)
du_b() {
  (($# > 0)) || { echo 0; return 0; }
  du -scB1 "$@" 2>/dev/null | awk 'END{print $1 + 0}'
}

# edictkv_state_db DIR -> the state store's file(s) in an edictkv data dir: any
# *.db but the log's edictkv.db and the snapshots (none while the state lives
# in memory)
edictkv_state_db() { find "$1" -name '*.db' ! -name edictkv.db ! -path '*/snapshots/*' ! -path '*/log/*' -type f 2>/dev/null; }

measure_at_rest() {
  local i rss=0 v dirs=0 state=0 logb=0 snaps=0 files
  for ((i = 0; i < N; i++)); do
    v=$(awk '/^VmRSS:/ {print $2}' "/proc/${PID[i]}/status")
    rss=$((rss + v * 1024))
    R[$SYS,rss_m${i}_mib]=$(mib $((v * 1024)))
    v=$(du_b "${DDIR[i]}")
    R[$SYS,disk_dir_m${i}_mib]=$(mib "$v")
    dirs=$((dirs + v))
    case $SYS in
      etcd)
        state=$((state + $(du_b "${DDIR[i]}/member/snap/db")))
        logb=$((logb + $(du_b "${DDIR[i]}/member/wal")))
        mapfile -t files < <(find "${DDIR[i]}/member/snap" -name '*.snap' -type f)
        snaps=$((snaps + $(du_b "${files[@]}"))) ;;
      edictkv)
        mapfile -t files < <(edictkv_state_db "${DDIR[i]}")
        if ((${#files[@]} == 0)); then state=none; elif [[ $state != none ]]; then state=$((state + $(du_b "${files[@]}"))); fi
        logb=$((logb + $(du_b "${DDIR[i]}/log" "${DDIR[i]}/edictkv.db")))
        snaps=$((snaps + $(du_b "${DDIR[i]}/snapshots"))) ;;
    esac
  done
  R[$SYS,rss_mib]=$(mib "$rss")
  R[$SYS,disk_dirs_mib]=$(mib "$dirs")
  if [[ $state == none ]]; then R[$SYS,disk_state_mib]=none; else R[$SYS,disk_state_mib]=$(mib "$state"); fi
  R[$SYS,disk_log_mib]=$(mib "$logb")
  R[$SYS,disk_snapshots_mib]=$(mib "$snaps")
  log "$SYS: at rest: RSS ${R[$SYS,rss_mib]} MiB (3 servers); data dirs ${R[$SYS,disk_dirs_mib]} MiB:" \
    "state db ${R[$SYS,disk_state_mib]}, log ${R[$SYS,disk_log_mib]}, snapshots ${R[$SYS,disk_snapshots_mib]} MiB"
}

restart_follower() {
  local l f rev t0 l2
  l=$(leader)
  f=$(((l + 1) % N))
  rev=$(rev_at "$l")
  log "$SYS: restarting follower $f (leader $l, revision $rev)"
  stop_member "$f"
  R[$SYS,restart_stop_s]=$STOPPED_IN
  t0=$(date +%s%N)
  start_member "$f"
  probe_wait "$f" "$t0" "$rev" restart
  check_alive "after the restart"
  l2=$(leader)
  [[ $l2 == "$l" ]] || log "WARNING: $SYS: the leader moved during the restart ($l -> $l2)"
  log "$SYS: follower $f: stopped in ${R[$SYS,restart_stop_s]} s (SIGTERM to exit; ! = SIGKILL);" \
    "ready ${R[$SYS,restart_ready_s]} s, applied revision $rev ${R[$SYS,restart_applied_s]} s after its start"
}

# pid_ticks PID -> utime+stime of a process, clock ticks (0 if gone)
pid_ticks() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0; }
# dev_stat -> "SECTORS_WRITTEN IO_MS" of the block device under TMP_PARENT
# (/sys/class/block/DEV/stat), every process's, "na na" without one (tmpfs,
# overlay); /proc/PID/io's write_bytes is no measure (the kernel counts a whole
# large folio for each one it dirties)
DISK_DEV=$(df --output=source "$TMP_PARENT" 2>/dev/null | tail -n 1)
DISK_DEV=$(basename "$(readlink -f "$DISK_DEV" 2>/dev/null || echo "$DISK_DEV")")
dev_stat() {
  local f=/sys/class/block/$DISK_DEV/stat
  if [[ -r $f ]]; then awk '{print $7, $10}' "$f"; else echo "na na"; fi
}
# lo_bytes -> bytes sent over the loopback interface so far
lo_bytes() { awk '{sub(/^ */, "")} /^lo:/ {sub(/^lo: */, ""); print $1}' /proc/net/dev; }

# add_member: a 4th member, started empty; timed from the first step. Beside
# the times, what the catch-up cost from the first step until the new member
# applied the revision: the leader's CPU, the new member's (since its start),
# the writes that reached the disk and its busy share (every process's: the new
# member's, and the others' compactions and snapshots meanwhile), the loopback
# traffic, and the host's busy share.
add_member() {
  local l rev t0 i=$N out deadline lt0 lo0 h0 h1 d0 d1
  l=$(leader)
  rev=$(rev_at "$l")
  log "$SYS: adding member $i (revision $rev)"
  lt0=$(pid_ticks "${PID[l]}") lo0=$(lo_bytes) h0=$(host_ticks) d0=$(dev_stat)
  t0=$(date +%s%N)
  case $SYS in
    etcd)
      # etcd refuses a member add ("unhealthy cluster") until every member has
      # been connected to the leader for 5 s (its strict reconfiguration
      # check), which the restart just before ends: retry, timing from the
      # attempt that is accepted
      deadline=$((SECONDS + WAIT_TIMEOUT))
      until ctl member add "m$i" --peer-urls="http://127.0.0.1:${PPORT[i]}" >"$CDIR/member-add.txt" 2>&1; do
        grep -q 'unhealthy cluster' "$CDIR/member-add.txt" && ((SECONDS < deadline)) ||
          { cat "$CDIR/member-add.txt" >&2; die "etcd: member add failed"; }
        sleep 0.5
        lt0=$(pid_ticks "${PID[l]}") lo0=$(lo_bytes) h0=$(host_ticks) d0=$(dev_stat)
        t0=$(date +%s%N)
      done
      ETCD_CLUSTER[i]="${ETCD_CLUSTER[0]},$(etcd_peer "$i")" ETCD_STATE[i]=existing
      start_member "$i" ;;
    edictkv)
      EDICTKV_JOIN[i]=--join
      start_member "$i"
      # serve --join first, add-learner once it listens (docs/edictkv.md)
      deadline=$((SECONDS + WAIT_TIMEOUT))
      until curl -s -o /dev/null --max-time 1 "http://127.0.0.1:${HPORT[i]}/livez"; do
        check_alive "while the 4th process starts"
        ((SECONDS < deadline)) || die "edictkv: the 4th process did not answer /livez in ${WAIT_TIMEOUT}s"
        sleep 0.05
      done
      out=$("$EDICTKV" add-learner --addr "127.0.0.1:${HPORT[l]}" --id $((i + 1)) \
        --raft-addr "127.0.0.1:${RPORT[i]}" --http-addr "127.0.0.1:${HPORT[i]}" 2>&1) ||
        { echo "$out" >&2; die "edictkv: add-learner failed"; } ;;
  esac
  probe_wait "$i" "$t0" "$rev" new_member
  h1=$(host_ticks) d1=$(dev_stat)
  R[$SYS,new_member_leader_cpu_s]=$(awk -v a="$lt0" -v b="$(pid_ticks "${PID[l]}")" -v t="$CLK_TCK" 'BEGIN{printf "%.2f", (b-a)/t}')
  R[$SYS,new_member_cpu_s]=$(awk -v b="$(pid_ticks "${PID[i]}")" -v t="$CLK_TCK" 'BEGIN{printf "%.2f", b/t}')
  R[$SYS,new_member_written_mib]=$(echo "$d0 $d1" | awk '$1 == "na" {print "na"; exit} {printf "%.1f", ($3-$1)*512/1048576}')
  R[$SYS,new_member_disk_busy_pct]=$(echo "$d0 $d1" | awk -v s="${R[$SYS,new_member_applied_s]}" '$1 != "na" && s+0 > 0 {printf "%.0f", 100*($4-$2)/1000/s; exit} {print "na"}')
  R[$SYS,new_member_loopback_mib]=$(mib $(($(lo_bytes) - lo0)))
  R[$SYS,new_member_host_busy_pct]=$(echo "$h0 $h1" | awk '{printf "%.0f", 100*($3-$1)/($4-$2)}')
  check_alive "after adding a member"
  R[$SYS,new_member_dir_mib]=$(mib "$(du_b "${DDIR[i]}")")
  log "$SYS: member $i: ready ${R[$SYS,new_member_ready_s]} s, applied revision $rev" \
    "${R[$SYS,new_member_applied_s]} s after the first step; its data dir ${R[$SYS,new_member_dir_mib]} MiB;" \
    "CPU leader ${R[$SYS,new_member_leader_cpu_s]} s, new member ${R[$SYS,new_member_cpu_s]} s; the disk took" \
    "${R[$SYS,new_member_written_mib]} MiB (busy ${R[$SYS,new_member_disk_busy_pct]}%); loopback ${R[$SYS,new_member_loopback_mib]} MiB; host busy ${R[$SYS,new_member_host_busy_pct]}%"
  if [[ $SYS == edictkv ]] && num "${R[$SYS,new_member_applied_s]}"; then
    t0=$(date +%s%N)
    if out=$("$EDICTKV" promote --addr "127.0.0.1:${HPORT[l]}" --id $((i + 1)) 2>&1); then
      R[$SYS,promote_s]=$(secs_since "$t0")
      log "edictkv: promoted the learner to a member in ${R[$SYS,promote_s]} s"
    else
      R[$SYS,promote_s]=ERR
      log "ERROR: edictkv: promote failed: $out"
      ERRORS=$((ERRORS + 1))
    fi
  fi
}

run_system() {
  SYS=$1
  local t0=$SECONDS
  start_cluster
  wait_ready
  log "$SYS: ready after $((SECONDS - t0)) s, endpoints $(eps3), leader member $(leader)"
  load
  settle
  measure_at_rest
  restart_follower
  add_member
  stop_cluster
  if [[ $KEEP_TMP != 1 ]]; then rm -rf "${CDIR:?}"; fi
  CDIR=""
}

# ---------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------
ROWS=(
  "load_rps|load: req/s"
  "load_p50_ms|load: p50 latency (ms)"
  "load_p99_ms|load: p99 latency (ms)"
  "load_slowest_ms|load: slowest request (ms)"
  "load_total_s|load: duration (s)"
  "load_failed|load: failed requests"
  "load_leader_changes|load: leader changes"
  "load_server_cpu_s|load: server CPU, 3 servers (s)"
  "load_host_busy_pct|load: host busy (%)"
  "caught_up_after_load_s|every member applied the last write, after the load (s)"
  "rss_mib|resident memory, 3 servers (MiB)"
  "disk_dirs_mib|data dirs on disk, 3 members (MiB)"
  "disk_state_mib|state database, 3 members (MiB)"
  "disk_log_mib|log, 3 members (MiB)"
  "disk_snapshots_mib|snapshots, 3 members (MiB)"
  "restart_stop_s|follower restart: SIGTERM to exit (s)"
  "restart_ready_s|follower restart: start to ready (s)"
  "restart_applied_s|follower restart: start to leader's revision applied (s)"
  "new_member_ready_s|new member: to ready (s)"
  "new_member_applied_s|new member: to leader's revision applied (s)"
  "new_member_dir_mib|new member: its data dir then (MiB)"
  "new_member_leader_cpu_s|new member: the leader's CPU meanwhile (s)"
  "new_member_cpu_s|new member: its own CPU, start to applied (s)"
  "new_member_written_mib|new member: writes reaching the disk meanwhile, all processes (MiB)"
  "new_member_disk_busy_pct|new member: disk busy meanwhile (%)"
  "new_member_loopback_mib|new member: loopback traffic meanwhile, all processes (MiB)"
  "new_member_host_busy_pct|new member: host busy meanwhile (%)"
)

# ratio KEY A B -> B/A, or — when either is not a number, A is 0, or the
# figure is not one to divide (the host's busy %, a noise indicator)
ratio() {
  [[ $1 != *busy_pct ]] || { echo "—"; return 0; }
  shift
  if num "$1" && num "$2" && awk -v a="$1" 'BEGIN{exit !(a > 0)}'; then
    awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b/a}'
  else
    echo "—"
  fi
}

print_report() {
  local row key label e k
  echo "etcd $ETCD_VERSION vs edictkv $EDICTKV_DESC;"
  echo "3 members each on 127.0.0.1, fsync on; $KEYS keys ($KEY_SIZE B) of $VAL B, etcd's benchmark put," \
    "$CLIENTS clients, $CONNS conns, all members; $(nproc) CPUs; load average at the end $(cut -d' ' -f1-3 /proc/loadavg);" \
    "$(date -u '+%F %H:%MZ')."
  echo
  echo "| metric | etcd | edictkv | edictkv/etcd |"
  echo "|---|---:|---:|---:|"
  for row in "${ROWS[@]}"; do
    key=${row%%|*} label=${row#*|}
    e=${R[etcd,$key]:-na} k=${R[edictkv,$key]:-na}
    echo "| $label | $e | $k | $(ratio "$key" "$e" "$k") |"
  done
  if [[ -n ${R[edictkv,promote_s]:-} ]]; then
    echo
    echo "edictkv's new member is a learner until promoted; the promotion took ${R[edictkv,promote_s]} s after it caught up."
  fi
  if [[ ${R[edictkv,disk_state_mib]:-} == none ]]; then
    echo "edictkv's state database: none (its state lives in memory; the snapshots hold copies of it)."
  fi
  echo
  local res="RESULT keys=$KEYS val=$VAL key_size=$KEY_SIZE clients=$CLIENTS conns=$CONNS etcd_version=$ETCD_VERSION"
  res+=" edictkv_commit=${EDICTKV_DESC%% *} errors=$ERRORS"
  local s m
  for s in $ORDER; do
    for m in $(printf '%s\n' "${!R[@]}" | awk -F, -v s="$s" '$1 == s {print $2}' | sort); do
      res+=" ${s}_${m}=${R[$s,$m]}"
    done
  done
  for row in "${ROWS[@]}"; do
    key=${row%%|*}
    e=$(ratio "$key" "${R[etcd,$key]:-na}" "${R[edictkv,$key]:-na}")
    [[ $e == "—" ]] || res+=" ratio_${key}=$e"
  done
  echo "$res total_s=$((SECONDS - T_START))"
}

# ---------------------------------------------------------------------------
main() {
  T_START=$SECONDS
  RUN_DIR="$RESULTS_DIR/$(date -u +%Y%m%dT%H%M%SZ)-keys$KEYS"
  mkdir -p "$RUN_DIR"
  build_binaries
  log "work dir $WORK; results $RUN_DIR; KEYS=$KEYS VAL=$VAL ORDER=\"$ORDER\""
  local s
  for s in $ORDER; do run_system "$s"; done
  print_report | tee "$RUN_DIR/table.md"
  grep '^RESULT ' "$RUN_DIR/table.md" >"$RUN_DIR/result.txt"
  log "wrote $RUN_DIR"
  if ((ERRORS > 0)); then log "$ERRORS step(s) failed"; exit 1; fi
}

main "$@"
