"""quotree's Kopf operator: the shell that makes the engine's decisions real on a cluster.

Start it with `kopf run --all-namespaces -m quotree_operator.main` (see docs/operator.md).
"""
