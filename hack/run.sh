#!/usr/bin/env bash
# make run: quotree on the local control plane, with a demo tree and demo workloads.
#
#  1. start the local control plane unless KUBECONFIG is set (hack/cluster.sh up; the first
#     build takes a while, later starts take seconds);
#  2. install the CRDs (crds/, server-side apply: no last-applied annotation to warn about
#     on a cluster where the e2e tests or another `make run` applied them server-side);
#  3. start the operator (webhooks included unless QUOTREE_WEBHOOKS=0) as the Deployment's
#     ServiceAccount quotree-system/quotree, with the RBAC of manifests/access and a token
#     from the TokenRequest API (hack/sa-kubeconfig.sh), so it behaves as when deployed and
#     the admin's kubectl is checked like any user's (QUOTREE_RUN_AS=admin: the admin's
#     credentials, as before); its log in $QUOTREE_RUN/logs/operator.log;
#  4. apply examples/demo/ (a Cohort tree and workloads that borrow) and print
#     `kubectl get coh,eq -A`;
#  5. keep the operator in the foreground: Ctrl-C stops it and deletes its webhook
#     configurations local.quotree.io, so that pods are created ungated again and quotree
#     can be installed on the same cluster (`kubectl apply -k manifests/`, Helm); the
#     control plane keeps running (`make cluster-down` stops it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
VENV_BIN="${ROOT}/.venv/bin"
# shellcheck source=hack/lib.sh
source "${ROOT}/hack/lib.sh"

if [[ -z "${KUBECONFIG:-}" ]]; then
  echo ">>> KUBECONFIG is not set: starting the local control plane (hack/cluster.sh up)"
  "${ROOT}/hack/cluster.sh" up
  eval "$("${ROOT}/hack/cluster.sh" env)"
elif ! command -v kubectl >/dev/null; then
  eval "$("${ROOT}/hack/cluster.sh" env | grep '^export PATH=')"
fi
KC=(kubectl)

echo ">>> installing the CRDs"
"${KC[@]}" apply --server-side --force-conflicts -f crds/ >/dev/null
"${KC[@]}" wait --for condition=established --timeout=60s \
  crd/cohorts.quotree.io crd/elasticquotas.quotree.io >/dev/null
NS="${QUOTREE_NAMESPACE:-quotree-system}"
# Created only when missing, with the last-applied annotation that `kubectl apply -k
# manifests/access` (below, and when installing) expects: no warning either way.
"${KC[@]}" get namespace "${NS}" >/dev/null 2>&1 \
  || "${KC[@]}" create namespace "${NS}" --save-config >/dev/null

OPERATOR_KUBECONFIG="${KUBECONFIG:-}"
if [[ "${QUOTREE_RUN_AS:-serviceaccount}" != "admin" ]]; then
  [[ "${NS}" == "quotree-system" ]] \
    || die "QUOTREE_NAMESPACE=${NS}: the ServiceAccount's RBAC is for quotree-system (or set QUOTREE_RUN_AS=admin)"
  OPERATOR_KUBECONFIG="${QUOTREE_RUN}/operator.kubeconfig"
  echo ">>> the operator runs as system:serviceaccount:quotree-system:quotree (manifests/access)"
  "${ROOT}/hack/sa-kubeconfig.sh" "${OPERATOR_KUBECONFIG}" 24h
fi

LOG_DIR="${QUOTREE_RUN}/logs"
mkdir -p "${LOG_DIR}"
LOG="${LOG_DIR}/operator.log"
echo ">>> starting the operator (log: ${LOG})"
KUBECONFIG="${OPERATOR_KUBECONFIG}" "${VENV_BIN}/kopf" run --all-namespaces --standalone \
  -m quotree_main >"${LOG}" 2>&1 &
OPERATOR_PID=$!
# On Ctrl-C (or TERM) the operator is stopped, and said so, even when it took the same
# SIGINT from the terminal and ended first; on EXIT only if it still runs (it may have
# failed on its own).
stop() {
  trap '' INT TERM # one Ctrl-C, however late it reaches this script, cuts no clean-up short
  trap - EXIT
  if [[ "${1:-}" == "signal" ]] || kill -0 "${OPERATOR_PID}" 2>/dev/null; then
    echo ">>> stopping the operator"
    kill -INT "${OPERATOR_PID}" 2>/dev/null || true
    wait "${OPERATOR_PID}" 2>/dev/null || true
  fi
  echo ">>> deleting the webhook configurations local.quotree.io (pods are created ungated)"
  "${KC[@]}" delete mutatingwebhookconfiguration,validatingwebhookconfiguration \
    local.quotree.io --ignore-not-found >/dev/null || true
}
trap 'stop signal' INT TERM
trap stop EXIT

for _ in $(seq 1 120); do
  grep -q "acquired the leader lease" "${LOG}" 2>/dev/null && break
  if ! kill -0 "${OPERATOR_PID}" 2>/dev/null; then
    echo "the operator exited; last lines of ${LOG}:" >&2
    tail -n 30 "${LOG}" >&2
    exit 1
  fi
  sleep 0.5
done
grep -q "acquired the leader lease" "${LOG}" \
  || { echo "the operator did not become active within 60s (another one holds the lease?)" >&2; exit 1; }

echo ">>> applying examples/demo/"
"${KC[@]}" apply -f examples/demo/01-tree.yaml >/dev/null
"${KC[@]}" apply -f examples/demo/02-workloads.yaml >/dev/null
# Wait until the demo settles (polling, at most 60 s): vision admits its 6 pods (2 GPUs
# borrowed from nlp's idle min), ci admits 4 and keeps 1 waiting (platform may not borrow
# cpu), and the nlp Job has run (kwok completes Job pods at once, so nlp ends idle).
admitted() {
  "${KC[@]}" get eq "$1" -n "$2" -o jsonpath='{.status.admittedPods}+{.status.pendingPods}' 2>/dev/null
}
# The status's used/runtime/min/max column ("cpu 0/0/12/-, ..."): nlp's Job pods are gone
# from it only once the status round after their completion is written.
summary() {
  "${KC[@]}" get "$@" -o jsonpath='{.status.summary}' 2>/dev/null
}
for _ in $(seq 1 120); do
  job="$("${KC[@]}" get job finetune -n demo-nlp -o jsonpath='{.status.succeeded}' 2>/dev/null)"
  [[ "$(admitted vision demo-vision)" == "6+0" && "$(admitted ci demo-ci)" == "4+1" \
    && "${job}" == "4" && "$(summary eq nlp -n demo-nlp)" == "cpu 0/"* \
    && "$(summary cohort company)" == "cpu 28/"* ]] && break
  sleep 0.5
done
sleep 1 # the Cohorts' status follows within a status round
echo
echo "\$ kubectl get coh,eq -A"
"${KC[@]}" get coh,eq -A
echo
echo "\$ kubectl get events -n demo-ci --field-selector reason=Pending"
"${KC[@]}" get events -n demo-ci --field-selector reason=Pending -o custom-columns=POD:.involvedObject.name,MESSAGE:.message | tail -n 1
echo
echo "\$ kubectl quotree tree"
PATH="${VENV_BIN}:${PATH}" "${KC[@]}" quotree tree || true
echo
echo ">>> the tree page: http://127.0.0.1:${QUOTREE_METRICS_PORT:-8000}/ (metrics: /metrics)"
echo ">>> the operator runs in the foreground (log: ${LOG}); Ctrl-C stops it."
echo ">>> try: kubectl get coh,eq -A; kubectl describe pod -n demo-ci; make cluster-down"
status=0
wait "${OPERATOR_PID}" || status=$?
# Ctrl-C reaches the operator too (a terminal signals the whole process group), and Kopf
# may have stopped it, cleanly, before this script has run its own trap (which `set -e`
# would then skip): an operator that ended cleanly was stopped by that Ctrl-C or TERM.
if [[ "${status}" == 0 ]]; then
  stop signal
  exit 130
fi
exit "${status}"
