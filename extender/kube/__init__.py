"""Kubernetes I/O for the controller: the API client, watch caches, writers and leader election."""
