# Local control plane targets (included by the top-level Makefile).
#   make cluster-build   build etcd, kube-apiserver, kube-controller-manager,
#                        kube-scheduler, kubectl, kwok and helm into ~/.cache/quotree (once)
#   make cluster-up      build if needed, start on 127.0.0.1, wait until ready
#   make cluster-down    stop every process cluster-up started
#   make cluster-status  report processes, health, nodes
#   make cluster-reset   stop, then delete etcd data and certificates
# See docs/control-plane.md.

.PHONY: cluster-build cluster-up cluster-down cluster-status cluster-reset

cluster-build:
	hack/build.sh

cluster-up: $(STAMP)
	hack/cluster.sh up

cluster-down:
	hack/cluster.sh down

cluster-status:
	hack/cluster.sh status

cluster-reset:
	hack/cluster.sh reset

# The e2e tests need the binaries, and the chart's unit test (tests/unit/test_chart.py)
# runs helm and kubectl: build them (a no-op once cached, ~10 min on a fresh machine)
# before pytest starts, so the build shows in the output and no per-test timeout can cut
# it short. The e2e fixture would build them too, just less visibly.
test e2e unit: cluster-build
