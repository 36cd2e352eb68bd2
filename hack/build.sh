#!/usr/bin/env bash
# Build the local control plane's binaries from Go modules, once, into
#   ${QUOTREE_CACHE:-~/.cache/quotree}/<component>-<version>/<component>
# Components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok, and helm (not part of the control plane: the chart's tests use it). A component whose binary is already cached is skipped, so
# this is safe to re-run; an interrupted build leaves no half-written binary.
#
#   hack/build.sh            build what is missing
#   hack/build.sh --print    print the cached binaries' paths and exit
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "${HACK_DIR}/lib.sh"

if [[ "${1:-}" == "--print" ]]; then
  for c in "${ALL_COMPONENTS[@]}"; do
    echo "${c}: $(component_bin "${c}")"
  done
  exit 0
fi

command -v go >/dev/null || die "go is not on PATH; the control plane is built from Go modules"

mkdir -p "${QUOTREE_CACHE}/src"
exec 9>"${QUOTREE_CACHE}/.build.lock"
if ! flock -n 9; then
  log "another build holds ${QUOTREE_CACHE}/.build.lock; waiting for it"
  flock 9
fi

export CGO_ENABLED=0
TIMES_LOG="${QUOTREE_CACHE}/build-times.log"
LDFLAGS_BASE="-s -w"

record() { # record <what> <seconds> <cache dir>...
  local what="$1" secs="$2" size
  shift 2
  size="$(du -shc "$@" 2>/dev/null | tail -1 | cut -f1 || echo '?')"
  printf '%s %s built in %ss (%s)\n' "$(date -u +%FT%TZ)" "${what}" "${secs}" "${size}" \
    | tee -a "${TIMES_LOG}" >&2
}

install_bin() { # install_bin <staged binary> <component> <version>
  local dir="${QUOTREE_CACHE}/$2-$3"
  mkdir -p "${dir}"
  mv -f "$1" "${dir}/$2.tmp"
  mv -f "${dir}/$2.tmp" "${dir}/$2"
}

# --- etcd: a tiny main calling etcdmain, in a wrapper module ---------------
build_etcd() {
  local bin src start
  bin="$(component_bin etcd)"
  if [[ -x "${bin}" ]]; then log "etcd ${ETCD_VERSION}: cached (${bin})"; return; fi
  log "etcd ${ETCD_VERSION}: building"
  start=${SECONDS}
  src="${QUOTREE_CACHE}/src/etcd-${ETCD_VERSION}"
  mkdir -p "${src}"
  cat >"${src}/go.mod" <<EOF
module quotree.local/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
EOF
  cat >"${src}/main.go" <<'EOF'
// Command etcd is etcd's own server entry point, built from its Go module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  (cd "${src}" && go mod tidy && go build -trimpath -ldflags "${LDFLAGS_BASE}" -o etcd.out .)
  install_bin "${src}/etcd.out" etcd "${ETCD_VERSION}"
  "${bin}" --version | sed -n 1p >&2 # sed reads all: no SIGPIPE under pipefail
  record "etcd-${ETCD_VERSION}" "$((SECONDS - start))" "$(dirname "${bin}")"
}

# --- Kubernetes: wrapper module replacing the staging modules ---------------
build_kube() {
  local missing=() c src start gomod minor
  for c in "${KUBE_COMPONENTS[@]}"; do
    if [[ -x "$(component_bin "${c}")" ]]; then
      log "${c} ${KUBE_VERSION}: cached ($(component_bin "${c}"))"
    else
      missing+=("${c}")
    fi
  done
  ((${#missing[@]})) || return 0
  log "kubernetes ${KUBE_VERSION}: building ${missing[*]}"
  start=${SECONDS}
  src="${QUOTREE_CACHE}/src/kubernetes-${KUBE_VERSION}"
  mkdir -p "${src}"
  # The release's own go.mod: its k8s.io/* v0.0.0 requirements are staging
  # modules replaced by local paths, which a dependency cannot use. Replace
  # each with the published v0.<minor>.<patch> of the same release.
  gomod="$(cd "${src}" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -f "${gomod}" ]] || die "could not download k8s.io/kubernetes@${KUBE_VERSION}'s go.mod"
  local need have
  need="$(awk '$1 == "go" {print $2; exit}' "${gomod}")"
  have="$(go env GOVERSION)"; have="${have#go}"
  if [[ "$(printf '%s\n%s\n' "${need}" "${have}" | sort -V | sed -n 1p)" != "${need}" ]]; then
    die "k8s.io/kubernetes ${KUBE_VERSION} needs go ${need}, this machine has go ${have}: pick an older KUBE_VERSION in hack/versions.env or a newer Go"
  fi
  minor="v0.${KUBE_VERSION#v1.}"
  {
    printf 'module quotree.local/kubernetes\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' \
      "${KUBE_VERSION}"
    awk '/^[[:space:]]*k8s\.io\/[^[:space:]]+ v0\.0\.0([[:space:]]|$)/ {print $1}' "${gomod}" \
      | sort -u | while read -r m; do printf '\t%s => %s %s\n' "${m}" "${m}" "${minor}"; done
    printf ')\n'
  } >"${src}/go.mod"
  log "wrapper go.mod: $(grep -c '=>' "${src}/go.mod") staging modules replaced with ${minor}"
  cat >"${src}/tools.go" <<'EOF'
//go:build tools

// Package tools pins the commands built from k8s.io/kubernetes.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
  (cd "${src}" && go mod tidy)
  local major minor_num ldflags pkgs=()
  major="${KUBE_VERSION#v}"; major="${major%%.*}"
  minor_num="${KUBE_VERSION#v*.}"; minor_num="${minor_num%%.*}"
  ldflags="${LDFLAGS_BASE}"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${p}.gitVersion=${KUBE_VERSION} -X ${p}.gitMajor=${major}"
    ldflags+=" -X ${p}.gitMinor=${minor_num} -X ${p}.gitTreeState=clean"
    ldflags+=" -X ${p}.buildDate=$(date -u +%FT%TZ)"
  done
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${c}"); done
  mkdir -p "${src}/out"
  (cd "${src}" && go build -trimpath -ldflags "${ldflags}" -o out/ "${pkgs[@]}")
  for c in "${missing[@]}"; do install_bin "${src}/out/${c}" "${c}" "${KUBE_VERSION}"; done
  local dirs=()
  for c in "${missing[@]}"; do dirs+=("$(dirname "$(component_bin "${c}")")"); done
  record "kubernetes-${KUBE_VERSION} (${missing[*]})" "$((SECONDS - start))" "${dirs[@]}"
}

# --- kwok: a plain module, go install works ---------------------------------
build_kwok() {
  local bin tmp start
  bin="$(component_bin kwok)"
  if [[ -x "${bin}" ]]; then log "kwok ${KWOK_VERSION}: cached (${bin})"; return; fi
  log "kwok ${KWOK_VERSION}: building"
  start=${SECONDS}
  tmp="${QUOTREE_CACHE}/src/kwok-${KWOK_VERSION}"
  mkdir -p "${tmp}"
  (cd "${tmp}" && GOBIN="${tmp}" go install -trimpath \
    -ldflags "${LDFLAGS_BASE} -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" \
    "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}")
  install_bin "${tmp}/kwok" kwok "${KWOK_VERSION}"
  record "kwok-${KWOK_VERSION}" "$((SECONDS - start))" "$(dirname "${bin}")"
}

# --- helm: a plain module as well ------------------------------------------
build_helm() {
  local bin tmp start
  bin="$(component_bin helm)"
  if [[ -x "${bin}" ]]; then log "helm ${HELM_VERSION}: cached (${bin})"; return; fi
  log "helm ${HELM_VERSION}: building"
  start=${SECONDS}
  tmp="${QUOTREE_CACHE}/src/helm-${HELM_VERSION}"
  mkdir -p "${tmp}"
  (cd "${tmp}" && GOBIN="${tmp}" go install -trimpath \
    -ldflags "${LDFLAGS_BASE} -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}")
  install_bin "${tmp}/helm" helm "${HELM_VERSION}"
  "${bin}" version --short >&2
  record "helm-${HELM_VERSION}" "$((SECONDS - start))" "$(dirname "${bin}")"
}

total_start=${SECONDS}
build_etcd
build_kwok
build_helm
build_kube
log "all binaries present ($((SECONDS - total_start))s this run):"
for c in "${ALL_COMPONENTS[@]}"; do echo "  $(component_bin "${c}")" >&2; done
