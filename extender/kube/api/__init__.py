"""Kubernetes I/O: the API client, watch caches, trimmed views, objects and patches, the lease."""
