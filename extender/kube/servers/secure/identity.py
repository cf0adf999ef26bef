"""Who a request comes from: Kubernetes' user.Info (name, uid, groups, extra)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS_NAME = "system:anonymous"
MASTERS = "system:masters"


@dataclass(frozen=True, slots=True)
class User:
    """An authenticated identity, as TokenReview or the front proxy's headers name it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted by key: hashable, one order

    @staticmethod
    def of(
        name: str,
        uid: str = "",
        groups: Iterable[str] = (),
        extra: Mapping[str, Iterable[str]] | None = None,
    ) -> User:
        return User(
            name,
            uid,
            tuple(groups),
            tuple(sorted((k, tuple(v)) for k, v in (extra or {}).items())),
        )

    @staticmethod
    def from_review(info: Mapping[str, Any]) -> User:
        """TokenReview's status.user (authentication.k8s.io/v1 UserInfo)."""
        extra = info.get("extra") or {}
        return User.of(
            str(info.get("username") or ""),
            str(info.get("uid") or ""),
            [str(g) for g in info.get("groups") or ()],
            {str(k): [str(x) for x in v or ()] for k, v in extra.items()},
        )

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS_NAME

    def with_authenticated_group(self) -> User:
        """As Kubernetes' AuthenticatedGroupAdder: every authenticated user is in
        system:authenticated."""
        if self.anonymous or AUTHENTICATED in self.groups:
            return self
        return User(self.name, self.uid, (*self.groups, AUTHENTICATED), self.extra)

    def review_fields(self) -> dict[str, Any]:
        """The SubjectAccessReview spec's user, uid, groups and extra."""
        fields: dict[str, Any] = {"user": self.name, "groups": list(self.groups)}
        if self.uid:
            fields["uid"] = self.uid
        if self.extra:
            fields["extra"] = {k: list(v) for k, v in self.extra}
        return fields


ANONYMOUS = User(ANONYMOUS_NAME, groups=(UNAUTHENTICATED,))
