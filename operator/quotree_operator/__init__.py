"""quotree's Kopf operator: the shell that makes the engine's decisions real on a cluster.

Start it with `kopf run --all-namespaces -m quotree_main` (see docs/operator.md).
"""
