#!/usr/bin/env bash
# make undeploy: remove quotree from the cluster of KUBECONFIG without stranding a pod.
#
#  1. delete the webhook configurations quotree.io (and local.quotree.io, a local run's,
#     if one is left): from now on pods are created ungated
#     and nothing waits for the operator (and the gate may be removed by anyone);
#  2. delete the Deployment and wait for its pods to go (a replica whose listener restarts
#     would write the configurations again), then delete the configurations once more;
#  3. release every pod still behind the quotree.io/admission scheduling gate (a JSON
#     patch that tests the gate is still at that index, then removes it; other gates stay),
#     until none is left;
#  4. remove the quotree.io/managed label from namespaces (nothing selects by it any more);
#  5. remove the quotree.io/in-use finalizer from every Cohort (the operator kept it on
#     Cohorts with children and would have removed it; with no operator left it would hold
#     a deleted Cohort, and `kubectl delete -f crds/`, for ever); a Cohort deleted earlier
#     and kept only by it goes now;
#  6. delete the rest of manifests/ (Services, PDB, RBAC, namespace) except the CRDs: the
#     Cohorts and ElasticQuotas stay until you `kubectl delete -f crds/` (docs/deploy.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NS=quotree-system
GATE=quotree.io/admission
IN_USE=quotree.io/in-use
KC=(kubectl)

say() { printf '>>> %s\n' "$*" >&2; }

CONFIGURATIONS=(quotree.io local.quotree.io)
say "deleting the webhook configurations ${CONFIGURATIONS[*]}"
"${KC[@]}" delete mutatingwebhookconfiguration,validatingwebhookconfiguration \
  "${CONFIGURATIONS[@]}" --ignore-not-found >/dev/null

say "deleting the operator's Deployment (waiting for its pods)"
"${KC[@]}" -n "${NS}" delete deployment quotree-operator --ignore-not-found --wait=true \
  --timeout=120s >/dev/null
"${KC[@]}" -n "${NS}" wait --for=delete pod -l app.kubernetes.io/name=quotree \
  --timeout=120s >/dev/null 2>&1 || true
"${KC[@]}" delete mutatingwebhookconfiguration,validatingwebhookconfiguration \
  "${CONFIGURATIONS[@]}" --ignore-not-found >/dev/null

# "namespace name gate gate ..." for every pod with at least one scheduling gate.
gated_pods() {
  "${KC[@]}" get pods -A -o jsonpath='{range .items[?(@.spec.schedulingGates)]}{.metadata.namespace}{" "}{.metadata.name}{" "}{.spec.schedulingGates[*].name}{"\n"}{end}'
}
release() { # release <namespace> <name> <index of our gate>
  "${KC[@]}" -n "$1" patch pod "$2" --type=json -p \
    "[{\"op\":\"test\",\"path\":\"/spec/schedulingGates/$3/name\",\"value\":\"${GATE}\"},{\"op\":\"remove\",\"path\":\"/spec/schedulingGates/$3\"}]" \
    >/dev/null 2>&1 || true # gone, or its gates changed: the next round looks again
}
released=0
for round in $(seq 1 10); do
  left=0
  while read -r ns name gates; do
    [[ -z "${ns}" ]] && continue
    index=0
    for gate in ${gates}; do
      if [[ "${gate}" == "${GATE}" ]]; then
        release "${ns}" "${name}" "${index}"
        left=$((left + 1))
        break
      fi
      index=$((index + 1))
    done
  done < <(gated_pods)
  [[ ${left} -eq 0 ]] && break
  released=$((released + left))
  say "round ${round}: released the gate of ${left} pod(s)"
done
if gated_pods | grep -q " ${GATE}\( \|$\)"; then
  printf 'ERROR: some pods still carry the %s gate; run make undeploy again\n' "${GATE}" >&2
  exit 1
fi
say "no pod carries the ${GATE} gate (${released} released)"

say "removing the quotree.io/managed label from namespaces"
"${KC[@]}" label namespaces -l quotree.io/managed quotree.io/managed- >/dev/null

# "name finalizer finalizer ..." for every Cohort with at least one finalizer.
cohorts_with_finalizers() {
  "${KC[@]}" get cohorts.quotree.io -o jsonpath='{range .items[?(@.metadata.finalizers)]}{.metadata.name}{" "}{.metadata.finalizers[*]}{"\n"}{end}' 2>/dev/null || true
}
unprotect() { # unprotect <cohort> <index of our finalizer>
  "${KC[@]}" patch cohorts.quotree.io "$1" --type=json -p \
    "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/$2\",\"value\":\"${IN_USE}\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/$2\"}]" \
    >/dev/null 2>&1 || true # gone, or its finalizers changed: the next round looks again
}
unprotected=0
for round in $(seq 1 10); do
  left=0
  while read -r name finalizers; do
    [[ -z "${name}" ]] && continue
    index=0
    for finalizer in ${finalizers}; do
      if [[ "${finalizer}" == "${IN_USE}" ]]; then
        unprotect "${name}" "${index}"
        left=$((left + 1))
        break
      fi
      index=$((index + 1))
    done
  done < <(cohorts_with_finalizers)
  [[ ${left} -eq 0 ]] && break
  unprotected=$((unprotected + left))
done
if cohorts_with_finalizers | grep -q " ${IN_USE}\( \|$\)"; then
  printf 'ERROR: some Cohorts still carry the %s finalizer; run make undeploy again\n' "${IN_USE}" >&2
  exit 1
fi
say "no Cohort carries the ${IN_USE} finalizer (${unprotected} removed)"

say "deleting the rest of manifests/ (the CRDs and quota objects stay)"
M="${ROOT}/manifests"
"${KC[@]}" delete --ignore-not-found --wait=false -f "${M}/webhooks.yaml" -f "${M}/pdb.yaml" \
  -f "${M}/service.yaml" -f "${M}/metrics-service.yaml" -f "${M}/deployment.yaml" >/dev/null
"${KC[@]}" delete --ignore-not-found --wait=false -k "${M}/access" >/dev/null
say "done; the CRDs stay (kubectl delete -f crds/ deletes them with every Cohort and ElasticQuota)"
