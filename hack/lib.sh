#!/usr/bin/env bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file
# Shared settings of hack/*.sh: pinned versions, cache and runtime paths, ports.
# Sourced, not run. Every value can be overridden from the environment.

HACK_DIR="${HACK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
REPO_ROOT="$(cd "${HACK_DIR}/.." && pwd)"

# shellcheck source=hack/versions.env
source "${HACK_DIR}/versions.env"

QUOTREE_CACHE="${QUOTREE_CACHE:-${HOME}/.cache/quotree}"
# Runtime state: etcd data, pids, logs, certificates, kubeconfig.
QUOTREE_RUN="${QUOTREE_RUN:-${QUOTREE_CACHE}/run}"

# Fixed, non-default ports on 127.0.0.1 (documented in docs/control-plane.md).
ETCD_CLIENT_PORT="${QUOTREE_ETCD_PORT:-23790}"
ETCD_PEER_PORT="${QUOTREE_ETCD_PEER_PORT:-23800}"
APISERVER_PORT="${QUOTREE_APISERVER_PORT:-26443}"
KCM_PORT="${QUOTREE_KCM_PORT:-26257}"
SCHEDULER_PORT="${QUOTREE_SCHEDULER_PORT:-26259}"
KWOK_PORT="${QUOTREE_KWOK_PORT:-26080}"

# Fake nodes managed by kwok.
NODES="${QUOTREE_NODES:-4}"
NODE_CPU="${QUOTREE_NODE_CPU:-32}"
NODE_MEMORY="${QUOTREE_NODE_MEMORY:-128Gi}"
NODE_GPU="${QUOTREE_NODE_GPU:-8}"
NODE_PODS="${QUOTREE_NODE_PODS:-110}"
# Extra labels per fake node: one set per node, separated by ";", each "key=value,...";
# node i gets the i-th set (none when the list is shorter). Unset: the first half of the
# nodes are A100 nodes and the rest H100 nodes (nvidia.com/gpu.product), for the resource
# flavor tests; set it empty for no extra labels.
NODE_LABELS="${QUOTREE_NODE_LABELS-default}"

# Client rate limits of the scheduler and the controller-manager (requests/s and burst).
# The defaults are upstream's; they cap how fast pods are bound (scheduler) and how fast
# Jobs make pods (controller-manager), so benchmarks raise them (bench/history/2026-11-24.md says which).
SCHEDULER_QPS="${QUOTREE_SCHEDULER_QPS:-50}"
SCHEDULER_BURST="${QUOTREE_SCHEDULER_BURST:-100}"
KCM_QPS="${QUOTREE_KCM_QPS:-20}"
KCM_BURST="${QUOTREE_KCM_BURST:-30}"
# How many pods kwok moves through a stage at once (kwok's podPlayStageParallelism; unset:
# kwok's default, 4, about 40 pods a second made Running on a busy API server, 12 minutes
# for bench_scale's 29,000 bound pods, so it sets it).
KWOK_POD_PARALLELISM="${QUOTREE_KWOK_POD_PARALLELISM:-}"

KUBE_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
ALL_COMPONENTS=(etcd "${KUBE_COMPONENTS[@]}" kwok helm)
# Processes started by cluster-up, in start order (stopped in reverse).
PROCESSES=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

PKI_DIR="${QUOTREE_RUN}/pki"
LOG_DIR="${QUOTREE_RUN}/logs"
PID_DIR="${QUOTREE_RUN}/pids"
DATA_DIR="${QUOTREE_RUN}/etcd-data"
KUBECONFIG_PATH="${QUOTREE_RUN}/kubeconfig"

log() { printf '[quotree-cluster] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

component_version() {
  case "$1" in
    etcd) echo "${ETCD_VERSION}" ;;
    kwok) echo "${KWOK_VERSION}" ;;
    helm) echo "${HELM_VERSION}" ;;
    *) echo "${KUBE_VERSION}" ;;
  esac
}

component_bin() { echo "${QUOTREE_CACHE}/$1-$(component_version "$1")/$1"; }

all_built() {
  local c
  for c in "${ALL_COMPONENTS[@]}"; do [[ -x "$(component_bin "${c}")" ]] || return 1; done
}

venv_python() {
  if [[ -x "${REPO_ROOT}/.venv/bin/python" ]]; then
    echo "${REPO_ROOT}/.venv/bin/python"
  else
    command -v python3
  fi
}
