"""TokenReview and SubjectAccessReview, asked of the API server and remembered for a while.

As Kubernetes' webhook authenticator and authorizer cache them: an answer that lets the
caller in is kept 10 s, a refusal 5 s (a role just granted counts soon), an error never.
Prometheus scraping every 15 s costs two reviews a scrape at worst, and a dashboard polled
every 2 s costs two reviews every 10 s.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from extender.kube.api.client import KubeClient
from extender.kube.api.resources import Resource
from extender.kube.servers.secure.attributes import Attributes
from extender.kube.servers.secure.identity import User

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
ALLOW_TTL = 10.0
DENY_TTL = 5.0
CACHE_SIZE = 4096  # answers kept at most: a flood of made-up tokens cannot grow memory

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """Answers kept until their time is up, the least recently used dropped when full."""

    def __init__(self, clock: Callable[[], float], size: int = CACHE_SIZE) -> None:
        self.clock = clock
        self.size = size
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self.clock():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        with self._lock:
            self._entries[key] = (self.clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Decision:
    """A SubjectAccessReview's answer: allowed, and the authorizer's reason."""

    allowed: bool
    reason: str = ""


class TokenReviewer:
    """Who a bearer token is, by TokenReview (None: the API server does not know it).
    Raises the client's KubeError when the API server cannot answer."""

    def __init__(
        self,
        client: KubeClient,
        clock: Callable[[], float],
        *,
        allow_ttl: float = ALLOW_TTL,
        deny_ttl: float = DENY_TTL,
    ) -> None:
        self.client = client
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        # Keyed by the token's digest: the cache never holds a usable credential.
        self._cache: TtlCache[bytes, tuple[User | None]] = TtlCache(clock)
        self.asked = 0  # reviews sent (the cache's misses)

    def review(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        cached = self._cache.get(key)
        if cached is not None:
            return cached[0]
        self.asked += 1
        answer = self.client.create(
            TOKEN_REVIEWS,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = answer.get("status") or {}
        user = None
        if status.get("authenticated") is True:
            user = User.from_review(status.get("user") or {})
            if not user.name:
                user = None
        self._cache.put(key, (user,), self.allow_ttl if user else self.deny_ttl)
        return user


class AccessReviewer:
    """Whether a user may do what a request asks, by SubjectAccessReview. Raises the
    client's KubeError when the API server cannot answer."""

    def __init__(
        self,
        client: KubeClient,
        clock: Callable[[], float],
        *,
        allow_ttl: float = ALLOW_TTL,
        deny_ttl: float = DENY_TTL,
    ) -> None:
        self.client = client
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self._cache: TtlCache[tuple[User, Attributes], Decision] = TtlCache(clock)
        self.asked = 0

    def review(self, user: User, attributes: Attributes) -> Decision:
        key = (user, attributes)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        self.asked += 1
        answer = self.client.create(
            ACCESS_REVIEWS,
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {**user.review_fields(), **attributes.review_fields()},
            },
        )
        status = answer.get("status") or {}
        allowed = status.get("allowed") is True and status.get("denied") is not True
        decision = Decision(allowed, str(status.get("reason") or ""))
        self._cache.put(key, decision, self.allow_ttl if allowed else self.deny_ttl)
        return decision
