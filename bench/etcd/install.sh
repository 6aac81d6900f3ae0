#!/usr/bin/env bash
# install.sh -- build etcd, etcdctl and etcd's `benchmark` tool (all $ETCD_VERSION)
# into $BIN, using only the Go module proxy (no git clone of etcd).
#
# Adapted from the team's anchor script install-etcd.sh (the "anchors" reference
# measurements of etcd on this kind of machine); the technique is unchanged.
#
# Why not plain `go install <pkg>@<version>`: every etcd v3.5.x/v3.6.x module that
# holds a main package (go.etcd.io/etcd/server/v3, go.etcd.io/etcd/etcdctl/v3 and the
# root go.etcd.io/etcd/v3 that holds tools/benchmark) carries `replace` directives in
# its go.mod (../api, ../client/v3, ...), and the go command refuses to `go install`
# such a module by version. Work-around: one throw-away wrapper module per binary under
# $BUILD/<name> (outside any git repository) that requires exactly that etcd module at
# $ETCD_VERSION. Replace directives of dependencies are ignored, and because the wrapper
# requires nothing else, MVS selects the dependency versions the etcd module's own
# go.mod lists (its siblings api/client/pkg at the same tag). Then `go build` the main
# package from the module cache.
#
# Note: the proxy reachable from our machines served go.etcd.io/etcd/v3 (the root
# module, which holds tools/benchmark) only up to v3.6.8, so v3.6.8 is the default for
# all three binaries: they then come from one release.
#
# Env (defaults):
#   ETCD_VERSION=v3.6.8          etcd release (a Go module version, with the "v")
#   BIN=/tmp/edictlog-etcd/bin   where the binaries go
#   BUILD=/tmp/edictlog-etcd/build  where the wrapper modules live (thrown away per build)
#   FORCE=0                      1: rebuild even if a binary of the right version exists
#   ONLY="etcd etcdctl benchmark" which of them to build (CI builds only etcdctl)
#
# A binary is "of the right version" when `go version -m` says the module that
# provides its main package is at $ETCD_VERSION.
set -euo pipefail

ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
BIN=${BIN:-/tmp/edictlog-etcd/bin}
BUILD=${BUILD:-/tmp/edictlog-etcd/build}
FORCE=${FORCE:-0}
ONLY=${ONLY:-"etcd etcdctl benchmark"}
export CGO_ENABLED=0
# The wrapper modules must not pick up a go.work or GOFLAGS=-mod=... of the caller.
export GOWORK=off GOFLAGS=-buildvcs=false
mkdir -p "$BIN" "$BUILD"

# have_version NAME -> true if $BIN/NAME exists and was built from $ETCD_VERSION.
# `go version -m` prints a "mod <module> <version>" line for the module that
# provides the main package (a dependency of the wrapper module).
have_version() {
  local f="$BIN/$1" v
  [[ -x $f ]] || return 1
  v=$(go version -m "$f" 2>/dev/null | awk '$1 == "mod" {print $3; exit}')
  [[ $v == "$ETCD_VERSION" ]]
}

# build NAME MODULE PACKAGE -> $BIN/NAME, unless already present at $ETCD_VERSION.
build() {
  local name=$1 mod=$2 pkg=$3
  if [[ $FORCE != 1 ]] && have_version "$name"; then
    echo "have $BIN/$name ($ETCD_VERSION), skipping (FORCE=1 to rebuild)"
    return 0
  fi
  rm -rf "${BUILD:?}/$name"
  mkdir -p "$BUILD/$name"
  (
    cd "$BUILD/$name"
    printf 'module edictlog.local/etcdbench/%s\n\ngo 1.24\n' "$name" >go.mod
    # A tools.go that imports the main package keeps `go get` from pruning it.
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >tools.go
    go get "$mod@$ETCD_VERSION"
    go build -trimpath -o "$BIN/$name" "$pkg"
  )
  echo "built $BIN/$name from $pkg@$ETCD_VERSION via wrapper module $BUILD/$name"
}

for name in $ONLY; do
  case $name in
    etcd) build etcd go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 && "$BIN/etcd" --version ;;
    etcdctl) build etcdctl go.etcd.io/etcd/etcdctl/v3 go.etcd.io/etcd/etcdctl/v3 ;;
    benchmark) build benchmark go.etcd.io/etcd/v3 go.etcd.io/etcd/v3/tools/benchmark ;;
    *) echo "ONLY: unknown binary $name (etcd, etcdctl, benchmark)" >&2; exit 2 ;;
  esac
done
