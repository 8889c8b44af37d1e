#!/usr/bin/env bash
# The real Kubernetes control plane the slow end-to-end tests run on, built from source through the Go module proxy.
#
#   scripts/control-plane.sh build     build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#                                      and kwok once (a warm run checks a stamp and returns in well under a second)
#   scripts/control-plane.sh path      print the directory holding the binaries (exit 3 when not built)
#   scripts/control-plane.sh env       print 'export ADZE_CONTROL_PLANE_BIN=…' for eval
#   scripts/control-plane.sh version   print the pinned Kubernetes version
#   scripts/control-plane.sh prune     delete the Go caches (about 4 GB), keep the binaries (warm runs stay no-ops)
#
# The version and every dependency are pinned by tools/control-plane/go.mod and go.sum (kwok by
# tools/control-plane/kwok/). Binaries and Go's caches live outside the work tree, under
# ${ADZE_CONTROL_PLANE_CACHE:-~/.cache/adze/control-plane}/<version>/{bin,gomod,gocache}; delete that folder to
# force a cold build. ADZE_GO_BUILD_JOBS (default 2) bounds the compiler's parallelism.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE_DIR=$ROOT/tools/control-plane
VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { sub(/^v/, "", $2); print $2; exit }' "$MODULE_DIR/go.mod")
[ -n "$VERSION" ] || { echo "control-plane: no k8s.io/kubernetes version in $MODULE_DIR/go.mod" >&2; exit 2; }
CACHE=${ADZE_CONTROL_PLANE_CACHE:-$HOME/.cache/adze/control-plane}/$VERSION
BIN=$CACHE/bin
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

# The version the binaries report (/version, kubectl version, the emulation version the components derive from it);
# without it they call themselves v0.0.0-master.
MINOR=$(echo "$VERSION" | cut -d. -f2)
VERSION_LDFLAGS=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  VERSION_LDFLAGS+=" -X $pkg.gitVersion=v$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$MINOR"
  VERSION_LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
LDFLAGS="-s -w$VERSION_LDFLAGS"

stamp() {
  # What the binaries are a function of: the pinned modules, the flags, the Go toolchain.
  {
    cat "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum" "$MODULE_DIR/kwok/go.mod" "$MODULE_DIR/kwok/go.sum"
    echo "$LDFLAGS"
    go env GOVERSION
  } | sha256sum | cut -d' ' -f1
}

built() {
  [ -f "$BIN/.stamp" ] || return 1
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
  command -v go > /dev/null 2>&1 || return 0  # built binaries stay usable without Go
  [ "$(cat "$BIN/.stamp")" = "$(stamp)" ]
}

build() {
  if ! command -v go > /dev/null 2>&1; then
    echo "control-plane: 'go' is not installed; the real control plane cannot be built (its tests will skip)" >&2
    return 4
  fi
  export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
  # Kubernetes 1.33 needs Go >= 1.24 (go.mod): a newer local Go is used as is, an older one makes Go fetch 1.24 once
  # through the module proxy (GOTOOLCHAIN=auto). ADZE_GOTOOLCHAIN pins another (e.g. go1.27.3 for a release that
  # needs it).
  export GOTOOLCHAIN=${ADZE_GOTOOLCHAIN:-auto}
  export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
  if built; then
    return 0
  fi
  local jobs=${ADZE_GO_BUILD_JOBS:-2} started=$SECONDS
  mkdir -p "$BIN"
  rm -f "$BIN/.stamp"
  echo "control-plane: building Kubernetes v$VERSION and etcd into $BIN (once; several minutes on 2 cores)" >&2
  (
    cd "$MODULE_DIR"
    go build -p "$jobs" -ldflags "$LDFLAGS" -o "$BIN/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
    # etcd at the version k8s.io/kubernetes itself requires (its main package is the server module's root).
    go build -p "$jobs" -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
    cd kwok
    go build -p "$jobs" -ldflags "-s -w" -o "$BIN/kwok" sigs.k8s.io/kwok/cmd/kwok
  )
  stamp > "$BIN/.stamp"
  echo "control-plane: built in $((SECONDS - started)) s" >&2
}

case "${1:-build}" in
  build) build ;;
  path)
    built || { echo "control-plane: not built; run scripts/control-plane.sh build" >&2; exit 3; }
    echo "$BIN"
    ;;
  env)
    built || { echo "control-plane: not built; run scripts/control-plane.sh build" >&2; exit 3; }
    echo "export ADZE_CONTROL_PLANE_BIN=$BIN"
    ;;
  version) echo "$VERSION" ;;
  prune)
    if command -v go > /dev/null 2>&1; then
      GOMODCACHE=$CACHE/gomod go clean -modcache
      GOCACHE=$CACHE/gocache go clean -cache
    fi
    rm -rf "$CACHE/gomod" "$CACHE/gocache"
    ;;
  *)
    echo "usage: $0 build|path|env|version|prune" >&2
    exit 2
    ;;
esac
