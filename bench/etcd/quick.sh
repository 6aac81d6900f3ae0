#!/usr/bin/env bash
# quick.sh -- compare.sh in a reduced form, to run before every change to the
# write or read path and to quote in its commit message.
#
# Runs every workload of the performance table (put64 put1 range_l64 range_s64
# range_l1 range_s1) on etcd and on edictkv built from this working tree, in
# QUICK_ROUNDS rounds (default 3, the order rotated every round), each workload
# 1.5 to 4 s long (about 2.3 min in all, 3.5 with BASE), and ends with
# compare.sh's one-line summary:
#   RATIOS edictkv/etcd req/s (p99) at <commit>, 3 round(s): put64 0.85[0.80-0.91] (1.31)
#     ... | others' CPU up to 0.10 cores
# (each workload's edictkv/etcd req/s, the median of the rounds; the lowest and
# highest of the rounds' own ratios; in brackets its p99 edictkv/etcd; last the
# most CPU the rest of the host took during any one benchmark: above a few
# tenths of a core, another tenant was running and the figures say so).
#
# BASE=<commit> adds edictkv built from a clean clone at that commit as a third
# system in the same rounds, beside the same etcd, and the line then also has
# the base's ratios and head/base req/s: the change's before and after, measured
# together.
#
# docs/benchmarks.md ("Seeing regressions") says how far apart three runs on one
# commit landed on the 2-core test machine: a change must move a figure further
# than that to count.
#
# Every compare.sh setting is honoured (ROUNDS, TOTAL, ..., HOG, MEMBERS, BIN,
# KEEP_TMP); quick.sh only changes the defaults below. On a shared machine run it
# under the heavy-run lock, as compare.sh:
#   flock /tmp/edictlog-heavy.lock bash bench/etcd/quick.sh
#
# Examples:
#   bash bench/etcd/quick.sh
#   BASE=HEAD bash bench/etcd/quick.sh          # this tree's changes against HEAD
#   BASE=main~3 bash bench/etcd/quick.sh
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

export ROUNDS=${ROUNDS:-${QUICK_ROUNDS:-3}}
# 1.5 to 4 s a workload on the 2-core machine, about 15 s of benchmark a round
# and under a minute over the three rounds for each system (about 2.3 min in all
# with the clusters' starts and stops). A workload of under a second, as
# compare.sh's reads are, moved by 20-40% from run to run; with two rounds, one
# round disturbed by another tenant moved the median by as much, where the
# median of three leaves it out
export TOTAL=${TOTAL:-16000}
export TOTAL1=${TOTAL1:-3500}
export READ_TOTAL=${READ_TOTAL:-50000}
export READ_TOTAL1=${READ_TOTAL1:-10000}
export WORKLOADS=${WORKLOADS:-"put64 put1 range_l64 range_s64 range_l1 range_s1"}

exec bash "$SCRIPT_DIR/compare.sh" "$@"
