#!/usr/bin/env bash
# scaling.sh -- how edictkv's and etcd's costs grow with the value size, the
# number of clients and the number of members, each measured by compare.sh
# (one round, both systems, the same client) at every point of a sweep, with
# what each run cost the machine beside its rates, so that the resource that
# limits each point can be named from the figures.
#
# Sweeps (SWEEPS, default "values clients members"):
#   values   VAL_SIZE in VALUES (256 4096 65536 1048576): put64, put1 and range_l64
#            (a linearizable read of one key holding a value of that size); the
#            requests are fewer as values grow (VALUE_TOTALS), so each run writes
#            or reads some tens to hundreds of MiB
#   clients  CLIENTS in CLIENT_COUNTS (1 16 64 256 1024), CONNS = min(CLIENTS, 8):
#            put and range_l over all members (compare.sh's put64 and range_l64
#            with CLIENTS clients), the requests growing with the clients
#   members  MEMBERS in MEMBER_COUNTS (3 5 7): put64, put1, range_l64, range_s64,
#            MEMBER_TOTALS="TOTAL TOTAL1 READ_TOTAL" requests (10000 1500 15000)
#
# For each point compare.sh's RESULT line is kept in OUT (default a new temp dir,
# printed) as <sweep>-<value>.txt with its whole report, and the table at the end
# has, per point, workload and system: req/s, p50/p99, the cores the servers, the
# benchmark client, the rest of the host (other tenants, kernel threads) and the
# whole host were busy (of nproc), the log's durable
# commits per request and their mean time, the share of the run each member spent
# in them, the writes, busy share and cache flushes of the block device under
# TMP_PARENT (every process's), loopback traffic per second, and the servers' RSS.
#
# One round per point: single-round figures move by tens of percent on a shared
# machine (docs/benchmarks.md); the sweep shows how a figure grows, which a
# factor of 4 to 1,000 in the swept quantity makes plain, not 10% differences.
#
# Env: SWEEPS, VALUES, CLIENT_COUNTS, MEMBER_COUNTS, MEMBER_TOTALS, OUT, and any compare.sh
# setting (BIN, TMP_PARENT, EDICTKV_EXTRA_FLAGS, ...). Run it under the heavy-run
# lock on a shared machine: flock /tmp/edictlog-heavy.lock bash bench/etcd/scaling.sh
#
# Examples:
#   bash bench/etcd/scaling.sh                       # all three sweeps, ~8 min
#   SWEEPS=values VALUES="256 1048576" bash bench/etcd/scaling.sh
#   SWEEPS=members MEMBER_COUNTS="3 5" MEMBER_TOTALS="2000 300 3000" bash bench/etcd/scaling.sh
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SWEEPS=${SWEEPS:-"values clients members"}
VALUES=${VALUES:-"256 4096 65536 1048576"}
CLIENT_COUNTS=${CLIENT_COUNTS:-"1 16 64 256 1024"}
MEMBER_COUNTS=${MEMBER_COUNTS:-"3 5 7"}
MEMBER_TOTALS=${MEMBER_TOTALS:-"10000 1500 15000"}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/edictlog-scaling.XXXXXX")}
mkdir -p "$OUT"

log() { echo "[scaling $(date +%H:%M:%S)] $*" >&2; }

# value_totals SIZE -> "TOTAL TOTAL1 READ_TOTAL": fewer requests for larger
# values, and never fewer than 100 (etcd's benchmark prints a p99 only from 100
# requests up)
value_totals() {
  case $1 in
    256) echo "10000 1500 15000" ;;
    4096) echo "10000 1500 15000" ;;
    65536) echo "2000 500 5000" ;;
    1048576) echo "200 100 500" ;;
    *) echo "$((2560000 / $1 + 100)) $((384000 / $1 + 100)) $((3840000 / $1 + 100))" ;;
  esac
}

# client_totals CLIENTS -> "TOTAL READ_TOTAL": about 20 requests a client at
# least, and enough for a few seconds at the smaller counts
client_totals() {
  local c=$1
  echo "$((c < 16 ? 1500 : c < 64 ? 5000 : c < 512 ? 10000 : 20 * c)) $((c < 16 ? 3000 : c < 64 ? 10000 : c < 512 ? 15000 : 30 * c))"
}

# point NAME env... -- run compare.sh once with the settings, keep its report
point() {
  local name=$1 rc=0
  shift
  log "$name: $*"
  env ROUNDS=1 CONTINUE_ON_ERROR=1 "$@" bash "$SCRIPT_DIR/compare.sh" >"$OUT/$name.txt" 2>"$OUT/$name.log" || rc=$?
  ((rc == 0)) || log "$name: compare.sh exited $rc (see $OUT/$name.log)"
  grep '^RESULT ' "$OUT/$name.txt" | tail -n 1 >"$OUT/$name.result" || log "$name: no RESULT line"
}

for sweep in $SWEEPS; do
  case $sweep in
    values)
      for v in $VALUES; do
        read -r t t1 rt <<<"$(value_totals "$v")"
        point "values-$v" VAL_SIZE="$v" TOTAL="$t" TOTAL1="$t1" READ_TOTAL="$rt" WORKLOADS="put64 put1 range_l64"
      done ;;
    clients)
      for c in $CLIENT_COUNTS; do
        read -r t rt <<<"$(client_totals "$c")"
        point "clients-$c" CLIENTS="$c" CONNS="$((c < 8 ? c : 8))" TOTAL="$t" READ_TOTAL="$rt" WORKLOADS="put64 range_l64"
      done ;;
    members)
      read -r t t1 rt <<<"$MEMBER_TOTALS"
      for m in $MEMBER_COUNTS; do
        point "members-$m" MEMBERS="$m" TOTAL="$t" TOTAL1="$t1" READ_TOTAL="$rt" WORKLOADS="put64 put1 range_l64 range_s64"
      done ;;
    *) log "unknown sweep $sweep (values, clients, members)"; exit 2 ;;
  esac
done

# field FILE KEY -> the value of KEY in the RESULT line ("na" if absent)
field() { tr ' ' '\n' <"$1" | awk -F= -v k="$2" '$1 == k {print $2; found = 1} END {if (!found) print "na"}'; }
fmt() { awk -v x="$1" -v f="$2" 'BEGIN{if (x ~ /^-?[0-9.]+$/) printf f, x; else print x}'; }

echo "Scaling sweeps, one compare.sh round per point, $(nproc) CPUs, $(date -u '+%F %H:%MZ'); reports in $OUT"
echo
echo "| point | workload | system | req/s | p50 / p99 ms | cores: servers / client / rest / host | log commits per req | commit ms | in commits | disk MiB/s (busy) | flushes per req | loopback MiB/s | RSS MiB |"
echo "|---|---|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|"
# in the order of the sweeps' points (sort -V: values-4096 before values-65536)
while read -r f; do
  [[ -s $f ]] || continue
  name=$(basename "$f" .result)
  for w in put64 put1 range_l64 range_s64; do
    [[ $(field "$f" "etcd_${w}_rps") != na ]] || continue
    for s in etcd edictkv; do
      busy=$(field "$f" "${s}_${w}_busy_pct")
      echo "| $name | $w | $s | $(fmt "$(field "$f" "${s}_${w}_rps")" %.0f) |" \
        "$(fmt "$(field "$f" "${s}_${w}_p50_ms")" %.2f) / $(fmt "$(field "$f" "${s}_${w}_p99_ms")" %.2f) |" \
        "$(field "$f" "${s}_${w}_srv_cores") / $(field "$f" "${s}_${w}_cli_cores") / $(field "$f" "${s}_${w}_other_cores") / $(awk -v b="$busy" -v n="$(nproc)" 'BEGIN{if (b ~ /^[0-9.]+$/) printf "%.2f", b*n/100; else print b}') |" \
        "$(field "$f" "${s}_${w}_fsync_per_req") | $(field "$f" "${s}_${w}_fsync_ms") | $(field "$f" "${s}_${w}_fsync_busy") |" \
        "$(field "$f" "${s}_${w}_disk_mib_s") ($(field "$f" "${s}_${w}_disk_busy")) | $(field "$f" "${s}_${w}_flush_per_req") |" \
        "$(field "$f" "${s}_${w}_lo_mib_s") | $(field "$f" "${s}_${w}_rss_mib") |"
    done
  done
done < <(printf '%s\n' "$OUT"/*.result | sort -V)
