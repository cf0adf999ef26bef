"""The leader's loop for one term: the Controller, and the parts of its work it composes."""

from extender.kube.controller.loop.controller import Controller, Settings

__all__ = ["Controller", "Settings"]
