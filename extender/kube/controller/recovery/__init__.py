"""Recovery of pods that cannot end on their own (Kueue's FailureRecoveryPolicy)."""
