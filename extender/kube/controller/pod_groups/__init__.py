"""Pod groups in the controller: their pods, their Workloads, and the reconciler that joins them."""
