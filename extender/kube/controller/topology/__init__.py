"""Topology-aware scheduling in the controller: failed nodes, node replacement, and the ungater."""
