# quotree: everything a newcomer types goes through this file.
#   make run    start quotree (see README)
#   make test   lint, types, unit tests, e2e tests against a real local control plane

SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv tools lint typecheck unit e2e test fuzz run simulate-demo bench bench-engine bench-flavors bench-operator bench-webhooks bench-webhook-process bench-kueue-shape bench-scale bench-growth clean \
	image deploy undeploy docs

$(STAMP): pyproject.toml
	@case "$(abspath $(BIN))/" in "$(CURDIR)"/*) ;; *) \
	  echo "make: BIN=$(BIN) is outside this tree: installing this tree there would point" \
	    "that venv's quotree at this tree; give STAMP=<an existing file> to use it as it is" >&2; \
	  exit 1;; esac
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Debian's prometheus (promtool) and chromium, for the alert rule and page tests; installed
# once when missing (hack/tools.sh).
tools:
	hack/tools.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check quotree operator webhooks plugin tests bench hack
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy quotree
	$(BIN)/mypy operator/quotree_main operator/quotree_operator webhooks/quotree_webhooks plugin/quotree_kubectl
	$(BIN)/mypy -m tests.unit.operator.fake_kube  # the tests' fake API against the real one's protocols

unit: $(STAMP) tools
	$(BIN)/pytest -q tests/unit

e2e: $(STAMP) tools
	$(BIN)/pytest -q tests/e2e

# One pytest run so CI reads one closing line.
test: lint typecheck tools
	$(BIN)/pytest -q tests

# The engine's property tests over SEEDS fresh random seeds (default 5): where rare cases
# are found. CI draws fixed examples (HYPOTHESIS_PROFILE=ci, tests/conftest.py).
fuzz: $(STAMP)
	@for seed in $$(shuf -i 1-999999999 -n $(or $(SEEDS),5)); do \
	  echo "hypothesis seed $$seed"; \
	  $(BIN)/pytest -q -x -p no:cacheprovider --hypothesis-seed=$$seed \
	    $$(grep -rl --include='test_*.py' 'from hypothesis' tests/unit) || exit 1; \
	done

# quotree on the local control plane: builds/starts it unless KUBECONFIG is set, installs
# the CRDs, starts the operator (with its webhooks), applies examples/demo/. See README.
run: $(STAMP)
	hack/run.sh

# Rewrite the command output shown in README.md and docs/*.md from the real output: the
# offline commands (`quotree ...`); tests/doc_outputs.py says how the cluster ones are.
docs: $(STAMP)
	$(BIN)/python -m tests.doc_outputs

# The engine alone, no cluster: what quotree decides for one of the examples.
simulate-demo: $(STAMP)
	$(BIN)/quotree simulate examples/koordinator-runtime.yaml -o table

# Benchmarks (never part of `make test`); each prints figures for bench/RESULTS.md and
# takes under 15 minutes. The cluster ones start the local control plane if it is not up;
# bench-kueue-shape wants the scheduler's client rate limit raised and room for 1,000 pods
# (see its docstring), e.g. QUOTREE_SCHEDULER_QPS=500 QUOTREE_SCHEDULER_BURST=1000
# QUOTREE_NODES=12 on a fresh `hack/cluster.sh up`. bench-scale (10,000 quotas, 30,000
# pods) restarts the control plane itself, fresh, with 10 nodes of room for
# 4,000 pods each, and stops it at the end (15 to 16 minutes at load 5 on 2 cores).
bench: bench-engine bench-flavors bench-operator bench-webhooks bench-webhook-process bench-kueue-shape bench-scale bench-growth

bench-engine: $(STAMP)
	$(BIN)/python bench/bench_engine.py

# Flavors and trees against the flavorless single tree, per event, and against a baseline
# engine: BASELINE_REV from this repository's history (default 5b14748, the engine without
# resource flavors and several trees), unpacked with git archive into BASELINE_DIR. First
# with the flavors sharing the GPUs (the same cluster and workload), then with K times the
# GPUs. Add --version NAME=DIR to compare with another version (see its docstring).
BASELINE_REV ?= 5b14748
BASELINE_DIR := $(or $(TMPDIR),/tmp)/quotree-baseline-$(BASELINE_REV)
bench-flavors: $(STAMP)
	rm -rf $(BASELINE_DIR) && mkdir -p $(BASELINE_DIR) && git archive $(BASELINE_REV) | tar -x -C $(BASELINE_DIR)
	$(BIN)/python bench/bench_flavor_ab.py --version after=. --baseline baseline=$(BASELINE_DIR) \
	  --sizes 1000,10000 --events 2000 --rounds 2 --split-gpus
	$(BIN)/python bench/bench_flavor_ab.py --version after=. --baseline baseline=$(BASELINE_DIR) \
	  --sizes 1000,10000 --events 2000 --rounds 2 --regimes contended

bench-operator: $(STAMP)
	$(BIN)/python bench/bench_operator.py --pods 3000 --trace --write

bench-webhooks: $(STAMP)
	$(BIN)/python bench/bench_webhooks.py --burst 150 --burst-rounds 4

# The webhook process's own cost per review against a no-op server, no cluster.
bench-webhook-process: $(STAMP)
	$(BIN)/python bench/bench_webhook_process.py

bench-kueue-shape: $(STAMP)
	$(BIN)/python bench/bench_kueue_shape.py

bench-scale: $(STAMP)
	$(BIN)/python bench/bench_scale.py

# How the cost per pod grows, no cluster: one quota filling up to 100,000 pods, the
# contended burst from 200 to 10,000 quotas, a mixed tree of 10,000 quotas and 50,000 pods
# through the CLI; each size against the first (bench/bench_growth.py, inputs from
# bench/scale_inputs.py).
bench-growth: $(STAMP)
	$(BIN)/python bench/bench_growth.py

# The container image (podman; on a machine without a registry it debootstraps its own base,
# cached in ~/.cache/quotree/image). See docs/deploy.md.
image:
	hack/image.sh

# Install on the cluster of KUBECONFIG (the image must be where its nodes pull from; see
# docs/deploy.md). undeploy removes the webhook configurations first, releases every pod
# still behind quotree's gate, then removes the rest (the CRDs and quota objects stay).
deploy:
	kubectl apply -k manifests/

undeploy:
	hack/undeploy.sh

# The e2e tests run the image (tests/e2e/test_deploy*.py): build it before pytest starts,
# as cluster-build is (hack/cluster.mk); cached afterwards (seconds).
test e2e: image

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis

-include hack/cluster.mk
