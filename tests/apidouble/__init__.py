"""A Kubernetes API double for tests: kube-apiserver's wire behaviour without a control plane."""

from tests.apidouble.jobs import JobRunner
from tests.apidouble.server import ApiDouble, Fault

__all__ = ["ApiDouble", "Fault", "JobRunner"]
