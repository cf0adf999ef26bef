"""Kueue's visibility API (visibility.kueue.x-k8s.io v1beta1 and v1beta2), behind the
aggregated API server's front door: the pending workloads of a ClusterQueue or LocalQueue
(`api`), the discovery documents kube-aggregator reads (`discovery`), and where the answers
come from on the leader and on a standby replica (`source`).

The front door (authentication of the front proxy, TokenReview, SubjectAccessReview) is not
here: it hands a `VisibilityRequest` to `VisibilityApi.handle` and writes the
`VisibilityResponse` back (docs/visibility.md).
"""

from extender.kube.servers.visibility.api import (
    VisibilityApi,
    VisibilityRequest,
    VisibilityResponse,
)
from extender.kube.servers.visibility.source import CachedPositions, leader_or_cached

__all__ = [
    "CachedPositions",
    "VisibilityApi",
    "VisibilityRequest",
    "VisibilityResponse",
    "leader_or_cached",
]
