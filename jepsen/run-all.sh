#!/usr/bin/env bash
# run-all.sh -- one full run of every nemesis, plus the two runs that must
# find an anomaly, as recorded in jepsen/README.md. Prints one line per run
# and leaves every report under $OUT (default jepsen-out/all-<time>).
#
# Env: OUT, MODE (auto|netns|portable; default auto), SEED (default 1).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-jepsen-out/all-$(date +%Y%m%d-%H%M%S)}
MODE=${MODE:-auto}
SEED=${SEED:-1}
mkdir -p "$OUT"
BIN="$OUT/edictkv"
go build -tags jepsen -o "$BIN" ./cmd/edictkv || exit 2
go build -o "$OUT/jepsen" ./jepsen/cmd/jepsen || exit 2

# run NAME EXPECTED-EXIT ARGS... -> one summary line
run() {
  local name=$1 want=$2; shift 2
  local t0=$SECONDS
  "$OUT/jepsen" --binary "$BIN" --mode "$MODE" --seed "$SEED" --out "$OUT/$name" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  local rc=$?
  local verdict=ok
  [[ $rc == "$want" ]] || verdict="UNEXPECTED (wanted exit $want)"
  printf '%-22s exit %d  %-4s %4ds  %s\n' "$name" "$rc" "$verdict" $((SECONDS - t0)) "$(head -1 "$OUT/$name.out")"
}

run partition        0 --time 120s --nemesis partition --workload register
run kill             0 --time 90s --nemesis kill --workload register
run pause            0 --time 90s --nemesis pause --workload register
run clock            0 --time 60s --nemesis clock --workload register
run membership       0 --time 90s --nemesis membership --workload register
run transfer         0 --time 60s --nemesis transfer --workload register
run set-kill         0 --time 90s --nemesis kill --workload set
run gray             0 --time 90s --nemesis slow-disk,disk-hog,cpu-starve --workload register
run member-slow-disk 0 --time 90s --nemesis member-slow-disk --workload register
run crash-anywhere   0 --time 180s --nemesis slow-disk,membership,kill,snapshot-install --workload register
run combined         0 --time 60s --nemesis partition,kill,pause,clock --workload register
run combined-follower 0 --time 60s --nemesis partition,kill,pause,clock --workload register --read follower
run beyond-rho       1 --time 60s --nemesis clock-beyond-rho --workload register --read lease
run stale-as-linear  1 --time 60s --nemesis partition --workload register --read stale --strict
