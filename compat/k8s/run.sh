#!/usr/bin/env bash
# run.sh -- Kubernetes' own storage tests (k8s.io/apiserver pkg/storage/etcd3)
# against a 3-member etcd cluster and against a 3-process edictkv cluster.
#
#   bash compat/k8s/run.sh [etcd|edictkv|both]      (default: both)
#
# What it does (README.md beside this script says why and what it found):
#   1. takes k8s.io/apiserver@$APISERVER_VERSION from the Go module proxy (go mod
#      download), copies it to a temp dir, applies external-server.patch (the
#      tests' test server then connects to $COMPAT_ETCD_ENDPOINTS instead of
#      starting an embedded etcd, each test in a key prefix of its own), and
#      compiles the package's test binary once (nice -n 5, GOWORK=off);
#   2. builds etcd and etcdctl $ETCD_VERSION with bench/etcd/install.sh and
#      starts a 3-member etcd cluster on 127.0.0.1 (free ports, temp dir);
#   3. builds edictkv from this checkout (or from git revision $EDICTKV_REV) and
#      starts a 3-process cluster with the etcd API on, ready by /readyz;
#   4. runs every top-level Test of the package one at a time (-test.run
#      '^TestX$'), each against a fresh cluster (CLUSTER_PER_TEST) and with a
#      deadline of TEST_TIMEOUT seconds (go test's -test.timeout, and an outer
#      kill TEST_TIMEOUT+30 s later), and parses its test2json stream into
#      pass / fail / skip / timeout (timeout counts as a failure); a server
#      that died during a test is noted beside its result, its logs kept;
#   5. writes $RESULTS_DIR/results.md (test -> etcd -> edictkv, totals, and for
#      each test that passes on etcd but not on edictkv whether it needs Watch,
#      Lease, or is "other"), results.tsv (the same, tab-separated), and each
#      test's output under $RESULTS_DIR/logs/<system>/<test>.log;
#   6. stops exactly the processes it started and removes its temp dirs (trap).
#
# Env (defaults):
#   APISERVER_VERSION=v0.35.10    k8s.io/apiserver version (a module version)
#   ETCD_VERSION=v3.6.8           passed to install.sh
#   BIN=/tmp/edictlog-etcd/bin    etcd, etcdctl (install.sh) and edictkv (built here)
#   EDICTKV_REV=                  empty: build edictkv from the working tree; a git
#                                 revision (e.g. HEAD): from that commit (git archive)
#   TEST_TIMEOUT=120              seconds one test may take (its deadline)
#   TESTS=                        extended regexp: run only the test names it matches
#   CLUSTER_PER_TEST=1            1: a fresh cluster for every test, as the tests
#                                 assume (each RunEtcd of theirs starts a new etcd);
#                                 0: one cluster per system for all tests (faster;
#                                 revisions and compactions then carry over, and
#                                 tests that watch from revision 1 or expect a small
#                                 current revision fail on etcd too)
#   WATCH_PROGRESS_NOTIFY_INTERVAL=1s   --watch-progress-notify-interval of etcd and
#                                 edictkv, the value the two tests that configure one ask for
#   RESULTS_DIR=compat/k8s/results
#   READY_TIMEOUT=60              seconds for a fresh cluster to become ready
#   STOP_TIMEOUT=15               seconds between SIGTERM and SIGKILL at teardown
#   PORT_MIN=20000 PORT_MAX=32000 where free ports are drawn (below the ephemeral range)
#   KEEP_TMP=0                    1: keep the temp dir (source, test binary, data, logs)
#
# Needs: go, jq, ss, curl, patch, timeout, git (for EDICTKV_REV).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)

APISERVER_VERSION=${APISERVER_VERSION:-v0.35.10}
export ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
export BIN=${BIN:-/tmp/edictlog-etcd/bin}
EDICTKV_REV=${EDICTKV_REV:-}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
TESTS=${TESTS:-}
CLUSTER_PER_TEST=${CLUSTER_PER_TEST:-1}
WATCH_PROGRESS_NOTIFY_INTERVAL=${WATCH_PROGRESS_NOTIFY_INTERVAL:-1s}
RESULTS_DIR=${RESULTS_DIR:-$SCRIPT_DIR/results}
READY_TIMEOUT=${READY_TIMEOUT:-60}
STOP_TIMEOUT=${STOP_TIMEOUT:-15}
PORT_MIN=${PORT_MIN:-20000}
PORT_MAX=${PORT_MAX:-32000}
KEEP_TMP=${KEEP_TMP:-0}
PATCH=$SCRIPT_DIR/external-server.patch
PKG=pkg/storage/etcd3
N=3 # members per cluster

log() { echo "[k8s-compat $(date +%H:%M:%S)] $*" >&2; }
die() { log "FATAL: $*"; exit 1; }

case ${1:-both} in
  etcd) SYSTEMS=(etcd) ;;
  edictkv) SYSTEMS=(edictkv) ;;
  both) SYSTEMS=(etcd edictkv) ;;
  *) echo "usage: bash compat/k8s/run.sh [etcd|edictkv|both]" >&2; exit 2 ;;
esac
for tool in go jq ss curl patch timeout; do
  command -v "$tool" >/dev/null || die "missing tool: $tool"
done
[[ $TEST_TIMEOUT =~ ^[0-9]+$ ]] || die "TEST_TIMEOUT=$TEST_TIMEOUT: a whole number of seconds"
[[ $CLUSTER_PER_TEST == 0 || $CLUSTER_PER_TEST == 1 ]] || die "CLUSTER_PER_TEST=$CLUSTER_PER_TEST: 0 or 1"

# The k8s module must resolve its own dependencies: no workspace, no flags of
# the caller beyond -buildvcs=false (the scratch copy is no git repository).
export GOWORK=off GOFLAGS=-buildvcs=false

# ---------------------------------------------------------------------------
# Clean-up. PIDS holds exactly the server processes this script started (the
# binaries themselves, launched directly); TEST_PID the test run under way
# (the timeout(1) that runs the test binary).
# ---------------------------------------------------------------------------
WORK=""
PIDS=()
TEST_PID=""
CDIR="" # data dir and logs of the running cluster

# stop_cluster [KILL]: SIGTERM every server (SIGKILL those still alive after
# STOP_TIMEOUT), or SIGKILL at once (a cluster whose data is thrown away).
stop_cluster() {
  ((${#PIDS[@]} > 0)) || return 0
  local pid forced=0 deadline sig=${1:-TERM}
  for pid in "${PIDS[@]}"; do kill "-$sig" "$pid" 2>/dev/null || true; done
  if [[ $sig == KILL ]]; then
    # Reaped by wait itself, so bash prints no "Killed" notice for them.
    for pid in "${PIDS[@]}"; do { wait "$pid"; } 2>/dev/null || true; done
    PIDS=()
    return 0
  fi
  deadline=$((SECONDS + STOP_TIMEOUT))
  for pid in "${PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; forced=$((forced + 1)); fi
    { wait "$pid"; } 2>/dev/null || true
  done
  log "stopped ${#PIDS[@]} server processes ($forced needed SIGKILL)"
  PIDS=()
}

cleanup() {
  local rc=$?
  set +e
  if [[ -n $TEST_PID ]] && kill -0 "$TEST_PID" 2>/dev/null; then
    # TEST_PID is timeout(1), which leads a process group of its own with the
    # test binary and passes a SIGTERM on to it; whatever is left then goes
    # with the group.
    kill -TERM "$TEST_PID" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$TEST_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$TEST_PID" 2>/dev/null
    { wait "$TEST_PID"; } 2>/dev/null
  fi
  if ((rc != 0)) && [[ -n $CDIR ]]; then
    for f in "$CDIR"/m*.log "$CDIR"/m*.stdout; do
      [[ -f $f ]] || continue
      echo "--- tail of $f ---" >&2
      tail -n 15 "$f" >&2
    done
  fi
  stop_cluster
  if [[ -n $WORK ]]; then
    if [[ $KEEP_TMP == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

WORK=$(mktemp -d "${TMPDIR:-/tmp}/k8s-compat.XXXXXX")

# ---------------------------------------------------------------------------
# 1. The tests: k8s.io/apiserver from the module proxy, patched, compiled once.
# ---------------------------------------------------------------------------
TESTBIN=$WORK/etcd3.test
SRC=$WORK/apiserver

prepare_tests() {
  local dir
  log "fetching k8s.io/apiserver@$APISERVER_VERSION (go mod download)"
  dir=$(cd "$WORK" && go mod download -json "k8s.io/apiserver@$APISERVER_VERSION" | jq -r '.Dir // empty')
  [[ -n $dir && -d $dir ]] || die "go mod download k8s.io/apiserver@$APISERVER_VERSION gave no source dir"
  cp -r "$dir" "$SRC"
  chmod -R u+w "$SRC"
  patch -d "$SRC" -p1 --forward --batch --no-backup-if-mismatch <"$PATCH" >&2 ||
    die "external-server.patch does not apply to k8s.io/apiserver@$APISERVER_VERSION"
  log "compiling the $PKG test binary (nice -n 5; the first time takes a while)"
  # -trimpath keeps the build cache's keys free of this run's temp dir, so a
  # second run reuses every compiled package.
  (cd "$SRC" && nice -n 5 go test -c -trimpath -o "$TESTBIN" "./$PKG/") ||
    die "compiling the $PKG tests failed"
  mapfile -t ALL_TESTS < <(cd "$SRC/$PKG" && "$TESTBIN" -test.list '.*' | grep -E '^Test' | sort)
  if [[ -n $TESTS ]]; then
    mapfile -t ALL_TESTS < <(printf '%s\n' "${ALL_TESTS[@]}" | grep -E -- "$TESTS" || true)
  fi
  ((${#ALL_TESTS[@]} > 0)) || die "no test to run (TESTS=$TESTS)"
  log "${#ALL_TESTS[@]} tests"
}

# ---------------------------------------------------------------------------
# 2, 3. The servers.
# ---------------------------------------------------------------------------
build_servers() {
  local s
  for s in "${SYSTEMS[@]}"; do
    case $s in
      etcd)
        log "etcd, etcdctl $ETCD_VERSION in $BIN (bench/etcd/install.sh)"
        ONLY="etcd etcdctl" bash "$REPO_ROOT/bench/etcd/install.sh" >&2
        ;;
      edictkv)
        local from=$REPO_ROOT
        if [[ -n $EDICTKV_REV ]]; then
          command -v git >/dev/null || die "missing tool: git (EDICTKV_REV)"
          EDICTKV_COMMIT=$(git -C "$REPO_ROOT" rev-parse --verify "$EDICTKV_REV^{commit}") ||
            die "EDICTKV_REV=$EDICTKV_REV is no commit"
          from=$WORK/edictkv-src
          mkdir -p "$from"
          git -C "$REPO_ROOT" archive "$EDICTKV_COMMIT" | tar -x -C "$from"
          EDICTKV_FROM="commit $EDICTKV_COMMIT"
        else
          EDICTKV_FROM="working tree at $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
          [[ -z $(git -C "$REPO_ROOT" status --porcelain 2>/dev/null) ]] || EDICTKV_FROM+=" with uncommitted changes"
        fi
        log "building edictkv from $EDICTKV_FROM"
        mkdir -p "$BIN"
        # edictkv is a module of the workspace: build it with its go.work.
        (cd "$from" && GOWORK= nice -n 5 go build -o "$BIN/edictkv" ./cmd/edictkv) ||
          die "building edictkv from $EDICTKV_FROM failed"
        ;;
    esac
  done
}

# A port counts as taken if any TCP socket other than a TIME-WAIT one uses it.
port_taken() { ss -Htan "( sport = :$1 )" | grep -vq '^TIME-WAIT'; }

# pick_ports COUNT -> PORTS=(...) of COUNT distinct free ports, drawn below the
# kernel's ephemeral range so that outgoing connections cannot take them.
pick_ports() {
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

EPS=""   # client (gRPC) endpoints, comma-separated
HTTPS=() # edictkv only: HTTP addresses for /readyz

start_etcd() {
  pick_ports $((2 * N))
  local cports=("${PORTS[@]:0:N}") pports=("${PORTS[@]:N:N}") cluster="" i
  local token="k8s-compat-$$-$RANDOM"
  for ((i = 0; i < N; i++)); do cluster+="${cluster:+,}m$i=http://127.0.0.1:${pports[$i]}"; done
  EPS=""
  for ((i = 0; i < N; i++)); do EPS+="${EPS:+,}127.0.0.1:${cports[$i]}"; done
  # etcd takes any ETCD_<FLAG> variable as a flag (and refuses one that a
  # flag also sets): none of the caller's may reach it. env execs etcd, so $!
  # is etcd's own pid.
  local unset=() v
  for v in $(compgen -e | grep '^ETCD_' || true); do unset+=(-u "$v"); done
  for ((i = 0; i < N; i++)); do
    env "${unset[@]}" "$BIN/etcd" --name "m$i" --data-dir "$CDIR/m$i.etcd" \
      --listen-client-urls "http://127.0.0.1:${cports[$i]}" \
      --advertise-client-urls "http://127.0.0.1:${cports[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${pports[$i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${pports[$i]}" \
      --initial-cluster "$cluster" \
      --initial-cluster-token "$token" --initial-cluster-state new \
      --watch-progress-notify-interval "$WATCH_PROGRESS_NOTIFY_INTERVAL" \
      --log-level warn --log-outputs "$CDIR/m$i.log" >"$CDIR/m$i.stdout" 2>&1 &
    PIDS+=($!)
  done
}

start_edictkv() {
  pick_ports $((3 * N))
  local rports=("${PORTS[@]:0:N}") hports=("${PORTS[@]:N:N}") gports=("${PORTS[@]:2*N:N}")
  local peers="" i
  for ((i = 0; i < N; i++)); do
    peers+="${peers:+,}$((i + 1))=127.0.0.1:${rports[$i]}/127.0.0.1:${hports[$i]}"
  done
  EPS="" HTTPS=()
  for ((i = 0; i < N; i++)); do
    EPS+="${EPS:+,}127.0.0.1:${gports[$i]}"
    HTTPS+=("127.0.0.1:${hports[$i]}")
  done
  for ((i = 0; i < N; i++)); do
    "$BIN/edictkv" serve --id $((i + 1)) --data-dir "$CDIR/m$i.edictkv" \
      --raft-addr "127.0.0.1:${rports[$i]}" --http-addr "127.0.0.1:${hports[$i]}" \
      --grpc-addr "127.0.0.1:${gports[$i]}" --peers "$peers" --log-level warn \
      --watch-progress-notify-interval "$WATCH_PROGRESS_NOTIFY_INTERVAL" \
      >"$CDIR/m$i.log" 2>&1 &
    PIDS+=($!)
  done
}

ctl() { "$BIN/etcdctl" --endpoints="$EPS" --dial-timeout=2s --command-timeout=5s "$@"; }

servers_alive() {
  local pid
  for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || return 1; done
}

# wait_ready SYS: every member healthy (etcdctl endpoint health; edictkv also
# /readyz on every process); false if a server exits or time runs out.
wait_ready() {
  local sys=$1 h ok deadline=$((SECONDS + READY_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! servers_alive; then
      log "$sys: a server exited during startup"
      return 1
    fi
    ok=1
    if [[ $sys == edictkv ]]; then
      for h in "${HTTPS[@]}"; do
        [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$h/readyz") == 200 ]] || ok=0
      done
    fi
    if [[ $ok == 1 ]] && ctl endpoint health >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  log "$sys: cluster not ready after ${READY_TIMEOUT}s"
  return 1
}

# start_cluster SYS: a fresh cluster in a new dir, ready. A start that fails
# (most often a free port that another program took between the check and
# the bind) is tried again on new ports, twice; its logs are kept in
# $RESULTS_DIR/logs/SYS/startup-failure-N/.
CLUSTER_N=0
start_cluster() {
  local sys=$1 try f
  for try in 1 2 3; do
    CLUSTER_N=$((CLUSTER_N + 1))
    CDIR=$WORK/$sys-$CLUSTER_N
    mkdir -p "$CDIR"
    "start_$sys"
    if wait_ready "$sys"; then
      log "$sys: 3 members ready at $EPS"
      return 0
    fi
    f=$RESULTS_DIR/logs/$sys/startup-failure-$CLUSTER_N
    mkdir -p "$f"
    cp "$CDIR"/m*.log "$CDIR"/m*.stdout "$f/" 2>/dev/null || true
    log "$sys: start $try of 3 failed (server logs: $f)"
    drop_cluster
  done
  die "$sys: no cluster after 3 starts"
}

# ---------------------------------------------------------------------------
# 4. One test at a time.
# ---------------------------------------------------------------------------
declare -A RESULT  # RESULT[sys/test] = pass|fail|skip|timeout
declare -A SECS    # SECS[sys/test]   = wall seconds
declare -A NOTE    # NOTE[sys/test]   = "server died" etc.

# run_one SYS TEST -> RESULT, SECS; the test's output in logs/SYS/TEST.{json,log}.
run_one() {
  local sys=$1 t=$2 json=$RESULTS_DIR/logs/$sys/$2.json txt=$RESULTS_DIR/logs/$sys/$2.log
  local start=$SECONDS r rc=0
  # The binary runs in the package's directory (its tests read files there);
  # -test.v=test2json is how go test runs a binary it will feed to test2json.
  (
    cd "$SRC/$PKG"
    export COMPAT_ETCD_ENDPOINTS=$EPS COMPAT_ETCD_KEY_PREFIX="/k8s-compat/$sys/$t/"
    # What the servers were started with, for tests that configure their own.
    export COMPAT_ETCD_WATCH_PROGRESS_NOTIFY_INTERVAL=$WATCH_PROGRESS_NOTIFY_INTERVAL
    exec timeout -k 10 $((TEST_TIMEOUT + 30)) nice -n 5 "$TESTBIN" \
      -test.run "^$t\$" -test.count=1 -test.v=test2json -test.timeout "${TEST_TIMEOUT}s"
  ) >"$WORK/out" 2>&1 &
  TEST_PID=$!
  wait "$TEST_PID" || rc=$?
  TEST_PID=""
  go tool test2json -t <"$WORK/out" >"$json" 2>/dev/null || true
  jq -r 'select(.Action == "output") | .Output' "$json" >"$txt" 2>/dev/null || cp "$WORK/out" "$txt"
  r=$(jq -r --arg t "$t" 'select(.Test == $t and (.Action == "pass" or .Action == "fail" or .Action == "skip")) | .Action' "$json" 2>/dev/null | tail -n 1)
  # timeout(1) exits 124, or 137 when it had to SIGKILL.
  if grep -q '^panic: test timed out after' "$WORK/out" || ((rc == 124 || rc == 137)); then
    r=timeout
  elif [[ -z $r ]]; then
    # A panic ends the binary before test2json sees the test's own verdict.
    r=fail
    if grep -q '^panic: ' "$WORK/out"; then NOTE[$sys/$t]="panicked"; else NOTE[$sys/$t]="exited $rc without a verdict"; fi
  fi
  RESULT[$sys/$t]=$r
  SECS[$sys/$t]=$((SECONDS - start))
}

# drop_cluster: stop it (SIGKILL: its data goes) and delete its data dir and logs.
drop_cluster() {
  stop_cluster KILL
  if [[ $KEEP_TMP != 1 && -n $CDIR ]]; then rm -rf "${CDIR:?}"; fi
  CDIR=""
}

run_suite() {
  local sys=$1 t i=0 n=${#ALL_TESTS[@]}
  mkdir -p "$RESULTS_DIR/logs/$sys"
  rm -rf "$RESULTS_DIR/logs/$sys/"*
  for t in "${ALL_TESTS[@]}"; do
    i=$((i + 1))
    ((${#PIDS[@]} > 0)) || start_cluster "$sys"
    run_one "$sys" "$t"
    log "$sys [$i/$n] $t: ${RESULT[$sys/$t]} (${SECS[$sys/$t]}s)"
    if ! servers_alive; then
      NOTE[$sys/$t]="a server died during this test"
      log "$sys: a server died during $t (its logs: $RESULTS_DIR/logs/$sys/$t.servers/)"
      mkdir -p "$RESULTS_DIR/logs/$sys/$t.servers"
      cp "$CDIR"/m*.log "$RESULTS_DIR/logs/$sys/$t.servers/" 2>/dev/null || true
      drop_cluster
    elif [[ $CLUSTER_PER_TEST == 1 ]]; then
      drop_cluster
    fi
  done
  stop_cluster
  drop_cluster
}

# ---------------------------------------------------------------------------
# 5. The table.
# ---------------------------------------------------------------------------

# reason SYS TEST -> one line: the first failure message of the test's output.
reason() {
  local f=$RESULTS_DIR/logs/$1/$2.log line
  [[ -f $f ]] || return 0
  if [[ ${RESULT[$1/$2]} == timeout ]]; then
    # go test's timeout panic names the (sub)tests still running.
    line=$(grep -A1 -m1 '^running tests:' "$f" | tail -n 1 | sed -E 's/^\s+//' || true)
    echo "no result within ${TEST_TIMEOUT}s${line:+ (running: $line)}"
    return 0
  fi
  # A server's own words first (an rpc error's desc); else a panic's message;
  # else the last line the test wrote before its first "--- FAIL" (t.Log and
  # t.Error look alike in the output; a t.Fatal is the last line before it).
  line=$(grep -m1 -o -E 'code = [A-Za-z]+ desc = .*' "$f" | sed -E 's/,Reason:.*//' | cut -c1-200 || true)
  [[ -n $line ]] || line=$(grep -m1 -E '^panic: ' "$f" | cut -c1-200 || true)
  if [[ -z $line ]]; then
    line=$(sed -n '/^\s*--- FAIL/q;p' "$f" | grep -E '^\s+[A-Za-z0-9_]+\.go:[0-9]+: ' | tail -n 1 |
      sed -E 's/^\s+//' | cut -c1-200 || true)
  fi
  line=${line//\`/\'}
  echo "${line//|/\\|}"
}

# needs SYS TEST -> Watch, Lease or other: what a test that passes on etcd and
# not on SYS most likely lacks. Heuristic (README.md has the hand-checked list):
# a test of watcher_test.go exercises Watch; otherwise an Unimplemented answer
# naming the Lease service or a Put with a lease means Lease, one naming the
# Watch service means Watch; anything else is "other".
needs() {
  local f=$RESULTS_DIR/logs/$1/$2.log file
  file=$(grep -l -E "^func $2\(" "$SRC/$PKG"/*_test.go 2>/dev/null | head -n 1)
  if [[ ${file##*/} == watcher_test.go ]]; then echo Watch; return; fi
  if [[ -f $f ]]; then
    if grep -q -i -E 'etcdserverpb\.Lease/|Unimplemented.*lease|not implement.*lease|leases:' "$f"; then echo Lease; return; fi
    if grep -q -i -E 'etcdserverpb\.Watch/|Unimplemented.*watch|not implement.*watch' "$f"; then echo Watch; return; fi
  fi
  echo other
}

write_results() {
  local md=$RESULTS_DIR/results.md tsv=$RESULTS_DIR/results.tsv t s r e
  local -A pass fail skip tout need why
  local w=0 l=0 o=0
  for s in "${SYSTEMS[@]}"; do pass[$s]=0 fail[$s]=0 skip[$s]=0 tout[$s]=0; done
  for t in "${ALL_TESTS[@]}"; do
    for s in "${SYSTEMS[@]}"; do
      case ${RESULT[$s/$t]} in
        pass) pass[$s]=$((pass[$s] + 1)) ;; fail) fail[$s]=$((fail[$s] + 1)) ;;
        skip) skip[$s]=$((skip[$s] + 1)) ;; timeout) tout[$s]=$((tout[$s] + 1)) ;;
      esac
    done
    need[$t]="" why[$t]=""
    r=${RESULT[etcd/$t]:--} e=${RESULT[edictkv/$t]:--}
    if [[ $r == pass && $e != pass && $e != - ]]; then
      need[$t]=$(needs edictkv "$t")
      case ${need[$t]} in Watch) w=$((w + 1)) ;; Lease) l=$((l + 1)) ;; *) o=$((o + 1)) ;; esac
    fi
    [[ $e == fail || $e == timeout ]] && why[$t]=$(reason edictkv "$t")
    # Among "other", point at the missing MVCC history (past revisions, Compact).
    if [[ ${need[$t]} == other && ${why[$t]} =~ KV/Compact|too\ old|has\ been\ compacted|[^a-z]Compact ]]; then
      need[$t]="other (history)"
    fi
  done
  {
    printf 'test\tetcd\tedictkv\tneeds\treason\n'
    for t in "${ALL_TESTS[@]}"; do
      printf '%s\t%s\t%s\t%s\t%s\n' "$t" "${RESULT[etcd/$t]:--}" "${RESULT[edictkv/$t]:--}" "${need[$t]}" "${why[$t]}"
    done
  } >"$tsv"
  {
    echo "# k8s.io/apiserver $PKG tests: etcd vs edictkv"
    echo
    echo "- k8s.io/apiserver $APISERVER_VERSION, patched by compat/k8s/external-server.patch; one test per run, deadline ${TEST_TIMEOUT}s"
    [[ " ${SYSTEMS[*]} " == *" etcd "* ]] && echo "- etcd $ETCD_VERSION, 3 members on 127.0.0.1, --watch-progress-notify-interval $WATCH_PROGRESS_NOTIFY_INTERVAL"
    [[ " ${SYSTEMS[*]} " == *" edictkv "* ]] && echo "- edictkv built from $EDICTKV_FROM, 3 processes on 127.0.0.1, --watch-progress-notify-interval $WATCH_PROGRESS_NOTIFY_INTERVAL"
    if [[ $CLUSTER_PER_TEST == 1 ]]; then echo "- a fresh cluster for every test"; else echo "- one cluster per system for all its tests"; fi
    echo "- run finished $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $((SECONDS / 60))m$((SECONDS % 60))s in all (compiling included)"
    echo
    echo "| test | etcd | edictkv | needs (etcd passes, edictkv does not) | first failure on edictkv |"
    echo "| --- | --- | --- | --- | --- |"
    for t in "${ALL_TESTS[@]}"; do
      r=${RESULT[etcd/$t]:--} e=${RESULT[edictkv/$t]:--}
      [[ -n ${NOTE[etcd/$t]:-} ]] && r+=" (${NOTE[etcd/$t]})"
      [[ -n ${NOTE[edictkv/$t]:-} ]] && e+=" (${NOTE[edictkv/$t]})"
      echo "| $t | $r | $e | ${need[$t]} | ${why[$t]:+\`${why[$t]}\`} |"
    done
    echo
    echo "| system | tests | passed | failed | timed out (counted as failed) | skipped |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for s in "${SYSTEMS[@]}"; do
      echo "| $s | ${#ALL_TESTS[@]} | ${pass[$s]} | $((fail[$s] + tout[$s])) | ${tout[$s]} | ${skip[$s]} |"
    done
    if [[ ${#SYSTEMS[@]} == 2 ]]; then
      echo
      echo "Passing on etcd but not on edictkv: $((w + l + o)) (needs Watch: $w, needs Lease: $l, other: $o)."
    fi
  } >"$md"
  for s in "${SYSTEMS[@]}"; do
    local failed=()
    for t in "${ALL_TESTS[@]}"; do
      case ${RESULT[$s/$t]} in fail | timeout) failed+=("$t(${RESULT[$s/$t]})") ;; esac
    done
    echo "$s: ${pass[$s]} passed, $((fail[$s] + tout[$s])) failed, ${skip[$s]} skipped (of ${#ALL_TESTS[@]}; ${tout[$s]} of the failures timed out)"
    echo "$s failing: ${failed[*]:-none}"
  done
}

# ---------------------------------------------------------------------------
EDICTKV_FROM=""
mkdir -p "$RESULTS_DIR"
prepare_tests
build_servers
for s in "${SYSTEMS[@]}"; do run_suite "$s"; done
write_results
cat "$RESULTS_DIR/results.md"
log "results in $RESULTS_DIR/results.md and results.tsv, each test's output in $RESULTS_DIR/logs/"
