"""The sequential cases' UpdateKueueConfigurationAndRestart, saying why when Tower refuses it.

A controller that will not start with the asked Configuration exits at once with one line;
the test then fails on that line, not on a wait for a port that never opens."""

from __future__ import annotations

from tests.e2e.kueue.util import CONFIGURATION, Tower


def restart_with(tower: Tower, configuration: str = CONFIGURATION) -> None:
    """tower.restart_controller, failing with the controller's own words if it exits."""
    try:
        tower.restart_controller(configuration)
    except AssertionError:
        controller = tower.procs[-1]
        if controller.poll() is None:
            raise
        log = (tower.tmp / "controller.log").read_text(errors="replace").strip().splitlines()
        tower.restart_controller()  # the rest of the package runs on the suite's Configuration
        raise AssertionError(
            f"the controller refused the Configuration (exit {controller.returncode}): "
            f"{log[-1] if log else ''}"
        ) from None
