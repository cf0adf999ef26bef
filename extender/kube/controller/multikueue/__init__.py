"""Tower's MultiKueue admission check: the controller, and the collaborators it composes."""

from extender.kube.controller.multikueue.controller import MultiKueueController

__all__ = ["MultiKueueController"]
