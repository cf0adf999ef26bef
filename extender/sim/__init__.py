"""The what-if simulator: Kueue manifests and Jobs in, an admission timeline out."""
