"""The admission pipeline after quota: admission checks, ProvisioningRequest, MultiKueue, PodsReady.

Quota is reserved first (the scheduling cycle); then the admission checks that apply each say
Ready, Retry or Rejected (`checks`), cluster-autoscaler's ProvisioningRequest and MultiKueue's
dispatch being two of them; WaitForPodsReady watches what was started (`pods_ready`). Each is
a policy of pure functions the controller calls. Imports `api` and `jobframework` only.
"""
