#!/usr/bin/env bash
# Write a kubeconfig for quotree's ServiceAccount (system:serviceaccount:quotree-system:quotree)
# on the cluster of the current KUBECONFIG: applies manifests/access (namespace,
# ServiceAccount, RBAC) and asks the TokenRequest API for a token (`kubectl create token`).
# The operator then runs with the Deployment's permissions and nothing of the admin's.
#
#   hack/sa-kubeconfig.sh OUT [DURATION]     DURATION: a token lifetime, default 24h
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: hack/sa-kubeconfig.sh OUT [DURATION]}"
DURATION="${2:-24h}"
NS=quotree-system
SA=quotree

kubectl apply -k "${ROOT}/manifests/access" >/dev/null
token="$(kubectl create token "${SA}" -n "${NS}" --duration="${DURATION}")"
server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
ca="$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
if [[ -z "${ca}" ]]; then
  ca_file="$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')"
  ca="$(base64 -w0 <"${ca_file}")"
fi
umask 077
mkdir -p "$(dirname "${OUT}")"
cat >"${OUT}.tmp" <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: quotree
    cluster: {server: "${server}", certificate-authority-data: "${ca}"}
users:
  - name: ${SA}
    user: {token: "${token}"}
contexts:
  - name: ${SA}@quotree
    context: {cluster: quotree, user: ${SA}, namespace: ${NS}}
current-context: ${SA}@quotree
YAML
mv -f "${OUT}.tmp" "${OUT}"
