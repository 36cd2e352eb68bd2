"""`kubectl quotree`: the quota tree, why a pod waits, and what-if, from the live cluster.

A shell around the engine like the operator and the webhooks, but a CLI: it reads the
cluster by running `kubectl get ... -o json` (so it uses the user's kubeconfig, context
and credentials exactly as kubectl does) and never writes anything.
"""
