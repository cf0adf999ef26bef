"""Label selectors, node affinity, taints and tolerations, matched as Kubernetes matches them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Labels = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One matchExpressions entry of a label or node selector."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (and Gt, Lt for node selectors)
    values: tuple[str, ...] = ()

    def matches(self, labels: Labels) -> bool:
        """Whether a set of labels satisfies this requirement."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                have, bound = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > bound if self.operator == "Gt" else have < bound
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: matchLabels AND matchExpressions; empty selects everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Labels) -> bool:
        """Whether the labels are selected."""
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (a ResourceFlavor's nodeTaints)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates the taint (core/v1 ToleratesTaint)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def tolerated(taint: Taint, tolerations: tuple[Toleration, ...]) -> bool:
    """Whether any toleration covers the taint."""
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of requiredDuringSchedulingIgnoredDuringExecution (its requirements are ANDed)."""

    match_expressions: tuple[Requirement, ...] = ()


def flavor_matches_node_constraints(
    node_labels: Labels,
    node_selector: Labels,
    required_terms: tuple[NodeSelectorTerm, ...],
) -> bool:
    """Whether a pod's nodeSelector and required affinity can land on a flavor's nodes.

    As Kueue does, only the keys that the flavor itself sets are considered: the pod's
    constraints are narrowed to those keys and matched against a node carrying exactly the
    flavor's labels. An affinity term left empty by the narrowing matches anything.
    """
    for key, value in node_selector.items():
        if key in node_labels and node_labels[key] != value:
            return False
    if not required_terms:
        return True
    for term in required_terms:
        narrowed = [r for r in term.match_expressions if r.key in node_labels]
        if all(r.matches(node_labels) for r in narrowed):
            return True
    return False
