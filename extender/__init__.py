"""Tower's extender: the admission core, the simulator and (later) the controller."""
