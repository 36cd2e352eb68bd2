#!/usr/bin/env bash
# The local control plane: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (fake nodes), as processes on 127.0.0.1.
#
#   hack/cluster.sh up       build if needed, start, wait until ready (no-op if running)
#   hack/cluster.sh up --fresh   same, but a start (not a no-op) begins with empty etcd data
#   hack/cluster.sh down     stop every process `up` started, by pid
#   hack/cluster.sh status   report processes, health and nodes; exit 0 only if all is up
#   hack/cluster.sh reset    down, then delete etcd data and certificates
#   hack/cluster.sh env      print `export KUBECONFIG=...` and PATH for our kubectl
#
# Ports, paths and node settings: hack/lib.sh (each can be set from the environment).
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "${HACK_DIR}/lib.sh"

APISERVER_URL="https://127.0.0.1:${APISERVER_PORT}"
KUBECTL="$(component_bin kubectl)"

# Kubernetes' own pod groups (docs/pod-groups.md): the alpha API scheduling.k8s.io/v1alpha2
# served, GenericWorkload in every component, the scheduler's gang cycle and the job
# controller's own Workloads and PodGroups (WorkloadWithJob also in the API server: its
# built-in RBAC lets the job controller create them only then).
RUNTIME_CONFIG="scheduling.k8s.io/v1alpha2=true"
APISERVER_GATES="GenericWorkload=true,WorkloadWithJob=true"
KCM_GATES="GenericWorkload=true,WorkloadWithJob=true"
SCHEDULER_GATES="GenericWorkload=true,GangScheduling=true"
# What a start wrote down of these: a running control plane started with other ones is
# restarted by `up` (and `status` says so and fails).
FLAGS_FILE="${QUOTREE_RUN}/control-plane.flags"

flags_wanted() {
  printf 'runtime-config %s\napiserver %s\ncontroller-manager %s\nscheduler %s\n' \
    "${RUNTIME_CONFIG}" "${APISERVER_GATES}" "${KCM_GATES}" "${SCHEDULER_GATES}"
}

flags_current() { [[ -f "${FLAGS_FILE}" && "$(<"${FLAGS_FILE}")" == "$(flags_wanted)" ]]; }

port_of() {
  case "$1" in
    etcd) echo "${ETCD_CLIENT_PORT} ${ETCD_PEER_PORT}" ;;
    kube-apiserver) echo "${APISERVER_PORT}" ;;
    kube-controller-manager) echo "${KCM_PORT}" ;;
    kube-scheduler) echo "${SCHEDULER_PORT}" ;;
    kwok) echo "${KWOK_PORT}" ;;
  esac
}

all_ports() {
  local p
  for p in "${PROCESSES[@]}"; do port_of "${p}"; done | tr ' ' '\n'
}

listening() { # listening <port>: true if something listens on 127.0.0.1:<port>
  [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
}

# pid_of <name>: the recorded pid if that process is still alive and is ours.
pid_of() {
  local f="${PID_DIR}/$1.pid" pid exe
  [[ -f "${f}" ]] || return 1
  pid="$(<"${f}")"
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
  kill -0 "${pid}" 2>/dev/null || return 1
  # Guard against a recycled pid: the process must run our binary.
  exe="$(readlink "/proc/${pid}/exe" 2>/dev/null || true)"
  [[ "${exe}" == "$(readlink -f "$(component_bin "$1")")" ]] || return 1
  echo "${pid}"
}

kc() { KUBECONFIG="${KUBECONFIG_PATH}" "${KUBECTL}" "$@"; }

apiserver_ready() {
  [[ -x "${KUBECTL}" && -f "${KUBECONFIG_PATH}" ]] || return 1
  kc get --raw /readyz >/dev/null 2>&1
}

running_count() {
  local n=0 p
  for p in "${PROCESSES[@]}"; do
    if pid_of "${p}" >/dev/null; then n=$((n + 1)); fi
  done
  echo "${n}"
}

wait_for() { # wait_for <seconds> <description> <command...>
  local timeout="$1" what="$2" deadline
  shift 2
  deadline=$((SECONDS + timeout))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for ${what}"
      return 1
    fi
    sleep 0.5
  done
}

start_process() { # start_process <name> <args...>
  local name="$1" bin pid
  shift
  bin="$(component_bin "${name}")"
  : >"${LOG_DIR}/${name}.log"
  # setsid: the component survives a Ctrl-C of make/pytest; stop it with `down`.
  # 8>&-: the component must not inherit (and so hold) cluster-up's lock.
  setsid "${bin}" "$@" >>"${LOG_DIR}/${name}.log" 2>&1 </dev/null 8>&- &
  pid=$!
  echo "${pid}" >"${PID_DIR}/${name}.pid"
  log "started ${name} (pid ${pid}, log ${LOG_DIR}/${name}.log)"
}

process_alive_or_die() { # process_alive_or_die <name>
  if ! pid_of "$1" >/dev/null; then
    log "$1 exited; last lines of ${LOG_DIR}/$1.log:"
    tail -n 30 "${LOG_DIR}/$1.log" >&2 || true
    return 1
  fi
}

healthy_http() { # healthy_http <url>
  curl -sf --max-time 2 "$1" >/dev/null 2>&1
}

secure_healthz() { # secure_healthz <port>: kcm/scheduler serve /healthz (self-signed)
  curl -skf --max-time 2 "https://127.0.0.1:$1/healthz" >/dev/null 2>&1
}

fail_up() {
  log "cluster-up failed: $1"
  log "logs: ${LOG_DIR}; stopping what was started"
  cmd_down >/dev/null 2>&1 || true
  exit 1
}

node_label_set() { # node_label_set <i>: the extra labels of node i, "key=value,..."
  local i="$1" sets
  if [[ "${NODE_LABELS}" == default ]]; then
    if ((i < (NODES + 1) / 2)); then
      echo "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"
    else
      echo "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
    fi
    return
  fi
  IFS=';' read -r -a sets <<<"${NODE_LABELS}"
  echo "${sets[i]:-}"
}

node_labels_yaml() { # node_labels_yaml <i>: node i's extra labels as YAML lines
  local pair pairs
  IFS=',' read -r -a pairs <<<"$(node_label_set "$1")"
  for pair in "${pairs[@]}"; do
    [[ -n "${pair}" ]] && echo "    ${pair%%=*}: \"${pair#*=}\""
  done
  return 0
}

nodes_yaml() {
  local i
  for ((i = 0; i < NODES; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: quotree-node-${i}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    quotree.dev/fake-node: "true"
    kubernetes.io/hostname: quotree-node-${i}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
$(node_labels_yaml "${i}")
spec: {}
status:
  capacity:
    cpu: "${NODE_CPU}"
    memory: ${NODE_MEMORY}
    nvidia.com/gpu: "${NODE_GPU}"
    pods: "${NODE_PODS}"
  allocatable:
    cpu: "${NODE_CPU}"
    memory: ${NODE_MEMORY}
    nvidia.com/gpu: "${NODE_GPU}"
    pods: "${NODE_PODS}"
EOF
  done
}

node_capacity_ok() { # every fake node has the configured capacity
  local want got
  want="$(for ((i = 0; i < NODES; i++)); do
    echo "quotree-node-${i} ${NODE_CPU} ${NODE_GPU} ${NODE_PODS}"
  done)"
  got="$(kc get nodes -l quotree.dev/fake-node=true -o jsonpath='{range .items[*]}{.metadata.name} {.status.allocatable.cpu} {.status.allocatable.nvidia\.com/gpu} {.status.allocatable.pods}{"\n"}{end}' | sort -V)"
  [[ "${got}" == "${want}" ]]
}

all_nodes_ready() {
  local total ready
  total="$(kc get nodes -l quotree.dev/fake-node=true -o name 2>/dev/null | wc -l)"
  ready="$(kc get nodes -l quotree.dev/fake-node=true \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
    2>/dev/null | grep -c '^True$' || true)"
  [[ "${total}" -eq "${NODES}" && "${ready}" -eq "${NODES}" ]]
}

default_sa_exists() { kc -n default get serviceaccount default >/dev/null 2>&1; }

create_nodes() {
  nodes_yaml | kc apply -f - >/dev/null
  # A node left over from a larger QUOTREE_NODES of an earlier run goes away.
  local n idx
  for n in $(kc get nodes -l quotree.dev/fake-node=true -o name); do
    idx="${n##*quotree-node-}"
    if [[ "${idx}" =~ ^[0-9]+$ ]] && ((idx >= NODES)); then kc delete "${n}" --wait=false >/dev/null; fi
  done
  # Capacity lives in status; if an existing node has other numbers, set them.
  if ! node_capacity_ok; then
    local i patch
    patch="$(printf '{"status":{"capacity":{"cpu":"%s","memory":"%s","nvidia.com/gpu":"%s","pods":"%s"},"allocatable":{"cpu":"%s","memory":"%s","nvidia.com/gpu":"%s","pods":"%s"}}}' \
      "${NODE_CPU}" "${NODE_MEMORY}" "${NODE_GPU}" "${NODE_PODS}" \
      "${NODE_CPU}" "${NODE_MEMORY}" "${NODE_GPU}" "${NODE_PODS}")"
    for ((i = 0; i < NODES; i++)); do
      kc patch node "quotree-node-${i}" --subresource=status --type=merge -p "${patch}" >/dev/null
    done
  fi
}

print_access() {
  cat <<EOF
[quotree-cluster] control plane ${KUBE_VERSION} is up at ${APISERVER_URL}
  kubeconfig: ${KUBECONFIG_PATH}
  kubectl:    ${KUBECTL}
  logs:       ${LOG_DIR}
  webhook serving cert/key (127.0.0.1, signed by ${PKI_DIR}/ca.crt): ${PKI_DIR}/webhook.crt ${PKI_DIR}/webhook.key
Use it with:
  export KUBECONFIG=${KUBECONFIG_PATH}
  export PATH=$(dirname "${KUBECTL}"):\$PATH
EOF
}

cmd_up() {
  if ! all_built; then
    log "binaries missing in ${QUOTREE_CACHE}; building (first build takes a while, see docs/control-plane.md)"
    "${HACK_DIR}/build.sh"
  fi
  mkdir -p "${QUOTREE_RUN}" "${LOG_DIR}" "${PID_DIR}" "${DATA_DIR}"
  exec 8>"${QUOTREE_RUN}/.up.lock"
  flock 8

  local n
  n="$(running_count)"
  if [[ "${n}" -eq "${#PROCESSES[@]}" ]] && apiserver_ready; then
    if flags_current; then
      log "already running (${n}/${#PROCESSES[@]} processes, /readyz ok); nothing to do"
      print_access
      return 0
    fi
    log "running, but started with other flags than these (${FLAGS_FILE}); restarting"
    cmd_down
  elif [[ "${n}" -gt 0 ]]; then
    log "${n}/${#PROCESSES[@]} processes running from an earlier start; stopping them first"
    cmd_down
  fi
  if [[ "${1:-}" == "--fresh" ]]; then
    log "--fresh: starting with empty etcd data"
    rm -rf "${DATA_DIR}"
    mkdir -p "${DATA_DIR}"
  fi
  local port
  for port in $(all_ports); do
    if listening "${port}"; then
      die "port 127.0.0.1:${port} is in use by another program ($(ss -Hltnp "sport = :${port}" | sed -n 1p)); stop it or set QUOTREE_*_PORT"
    fi
  done

  "$(venv_python)" "${HACK_DIR}/pki.py" --pki-dir "${PKI_DIR}" --run-dir "${QUOTREE_RUN}" \
    --server "${APISERVER_URL}"
  local start=${SECONDS}
  rm -f "${FLAGS_FILE}"

  start_process etcd \
    --name=quotree \
    --data-dir="${DATA_DIR}" \
    --listen-client-urls="http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --advertise-client-urls="http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --listen-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-cluster="quotree=http://127.0.0.1:${ETCD_PEER_PORT}" \
    --unsafe-no-fsync=true \
    --log-level=warn
  wait_for 60 "etcd /health" healthy_http "http://127.0.0.1:${ETCD_CLIENT_PORT}/health" \
    || { process_alive_or_die etcd || true; fail_up "etcd did not become healthy"; }

  start_process kube-apiserver \
    --etcd-servers="http://127.0.0.1:${ETCD_CLIENT_PORT}" \
    --bind-address=127.0.0.1 \
    --secure-port="${APISERVER_PORT}" \
    --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none \
    --tls-cert-file="${PKI_DIR}/apiserver.crt" \
    --tls-private-key-file="${PKI_DIR}/apiserver.key" \
    --client-ca-file="${PKI_DIR}/ca.crt" \
    --requestheader-client-ca-file="${PKI_DIR}/ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="${PKI_DIR}/front-proxy-client.crt" \
    --proxy-client-key-file="${PKI_DIR}/front-proxy-client.key" \
    --authorization-mode=Node,RBAC \
    --service-cluster-ip-range=10.0.0.0/24 \
    --allow-privileged=true \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="${PKI_DIR}/sa.pub" \
    --service-account-signing-key-file="${PKI_DIR}/sa.key" \
    --runtime-config="${RUNTIME_CONFIG}" \
    --feature-gates="${APISERVER_GATES}" \
    --profiling=false \
    --v=1
  wait_for 120 "kube-apiserver /readyz" apiserver_ready \
    || { process_alive_or_die kube-apiserver || true; fail_up "kube-apiserver not ready"; }

  start_process kube-controller-manager \
    --kubeconfig="${QUOTREE_RUN}/controller-manager.kubeconfig" \
    --authentication-kubeconfig="${QUOTREE_RUN}/controller-manager.kubeconfig" \
    --authorization-kubeconfig="${QUOTREE_RUN}/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="${KCM_PORT}" \
    --service-account-private-key-file="${PKI_DIR}/sa.key" \
    --root-ca-file="${PKI_DIR}/ca.crt" \
    --cluster-signing-cert-file="${PKI_DIR}/ca.crt" \
    --cluster-signing-key-file="${PKI_DIR}/ca.key" \
    --use-service-account-credentials=true \
    --service-cluster-ip-range=10.0.0.0/24 \
    --leader-elect=false \
    --kube-api-qps="${KCM_QPS}" \
    --kube-api-burst="${KCM_BURST}" \
    --feature-gates="${KCM_GATES}" \
    --profiling=false \
    --v=1
  start_process kube-scheduler \
    --kubeconfig="${QUOTREE_RUN}/scheduler.kubeconfig" \
    --authentication-kubeconfig="${QUOTREE_RUN}/scheduler.kubeconfig" \
    --authorization-kubeconfig="${QUOTREE_RUN}/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="${SCHEDULER_PORT}" \
    --leader-elect=false \
    --kube-api-qps="${SCHEDULER_QPS}" \
    --kube-api-burst="${SCHEDULER_BURST}" \
    --feature-gates="${SCHEDULER_GATES}" \
    --profiling=false \
    --v=1
  local kwok_options=()
  if [[ -n "${KWOK_POD_PARALLELISM}" ]]; then
    # A KwokConfiguration given leaves kwok's other defaults unset: they are written out too.
    printf '%s\n' 'apiVersion: config.kwok.x-k8s.io/v1alpha1' 'kind: KwokConfiguration' \
      'options:' "  podPlayStageParallelism: ${KWOK_POD_PARALLELISM}" \
      '  nodePlayStageParallelism: 4' '  nodeLeaseParallelism: 4' \
      '  podsOnNodeSyncParallelism: 4' '  cidr: 10.0.0.1/24' > "${QUOTREE_RUN}/kwok-options.yaml"
    kwok_options=(--config="${QUOTREE_RUN}/kwok-options.yaml")
  fi
  start_process kwok \
    --config="${HACK_DIR}/kwok/stages.yaml" \
    "${kwok_options[@]}" \
    --kubeconfig="${QUOTREE_RUN}/kwok.kubeconfig" \
    --manage-all-nodes=true \
    --server-address="127.0.0.1:${KWOK_PORT}" \
    --node-lease-duration-seconds=40
  wait_for 60 "kube-controller-manager /healthz" secure_healthz "${KCM_PORT}" \
    || { process_alive_or_die kube-controller-manager || true; fail_up "kube-controller-manager not healthy"; }
  wait_for 60 "kube-scheduler /healthz" secure_healthz "${SCHEDULER_PORT}" \
    || { process_alive_or_die kube-scheduler || true; fail_up "kube-scheduler not healthy"; }
  wait_for 30 "kwok /healthz" healthy_http "http://127.0.0.1:${KWOK_PORT}/healthz" \
    || { process_alive_or_die kwok || true; fail_up "kwok not healthy"; }

  create_nodes
  wait_for 120 "${NODES} fake nodes Ready" all_nodes_ready \
    || fail_up "fake nodes not Ready ($(kc get nodes --no-headers 2>&1 | tr '\n' ';'))"
  wait_for 60 "the default ServiceAccount" default_sa_exists \
    || fail_up "kube-controller-manager made no default ServiceAccount"
  local p
  for p in "${PROCESSES[@]}"; do process_alive_or_die "${p}" || fail_up "${p} died"; done
  flags_wanted >"${FLAGS_FILE}"
  log "ready in $((SECONDS - start))s"
  print_access
}

stop_one() { # stop_one <name>
  local name="$1" pid i
  if pid="$(pid_of "${name}")"; then
    kill -TERM "${pid}" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "${pid}" 2>/dev/null; then
      log "${name} (pid ${pid}) ignored SIGTERM for 10s; sending SIGKILL"
      kill -KILL "${pid}" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        kill -0 "${pid}" 2>/dev/null || break
        sleep 0.1
      done
    fi
    log "stopped ${name} (pid ${pid})"
  fi
  rm -f "${PID_DIR}/${name}.pid"
}

cmd_down() {
  local i port left=()
  for ((i = ${#PROCESSES[@]} - 1; i >= 0; i--)); do stop_one "${PROCESSES[i]}"; done
  for port in $(all_ports); do
    if listening "${port}"; then left+=("${port}"); fi
  done
  if ((${#left[@]})); then
    log "WARNING: still listening on ${left[*]} (not a process this script started?)"
    return 1
  fi
  log "stopped; no listener left on $(all_ports | tr '\n' ' ')"
}

cmd_status() {
  local p pid ok=0 port
  echo "quotree local control plane (${KUBE_VERSION}, etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION})"
  echo "  runtime dir: ${QUOTREE_RUN}"
  for p in "${PROCESSES[@]}"; do
    if pid="$(pid_of "${p}")"; then
      printf '  %-24s running  pid %-8s ports %s\n' "${p}" "${pid}" "$(port_of "${p}")"
    else
      printf '  %-24s stopped\n' "${p}"
      ok=1
    fi
  done
  if ((ok == 0)) && ! flags_current; then
    echo "  started with other flags than hack/cluster.sh's (${FLAGS_FILE}): \`up\` restarts it"
    ok=1
  fi
  if apiserver_ready; then
    echo "  apiserver ${APISERVER_URL}: /readyz ok, $(kc version -o json 2>/dev/null \
      | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1)"
    kc get nodes -o wide 2>/dev/null | sed 's/^/    /' | cut -c1-110
    echo "  export KUBECONFIG=${KUBECONFIG_PATH}"
  else
    echo "  apiserver ${APISERVER_URL}: not ready"
    ok=1
    for port in $(all_ports); do
      if listening "${port}"; then echo "  port ${port}: something listens"; fi
    done
  fi
  return "${ok}"
}

cmd_reset() {
  cmd_down || true
  rm -rf "${DATA_DIR}" "${PKI_DIR}" "${PID_DIR}"
  rm -f "${QUOTREE_RUN}"/*.kubeconfig "${KUBECONFIG_PATH}"
  log "removed etcd data and certificates under ${QUOTREE_RUN}"
}

cmd_env() {
  echo "export KUBECONFIG=${KUBECONFIG_PATH}"
  echo "export PATH=$(dirname "${KUBECTL}"):\$PATH"
}

case "${1:-}" in
  up) cmd_up "${2:-}" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  reset) cmd_reset ;;
  env) cmd_env ;;
  *)
    echo "usage: $0 up [--fresh]|down|status|reset|env" >&2
    exit 2
    ;;
esac
