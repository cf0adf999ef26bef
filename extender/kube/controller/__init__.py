"""The controller: its loop, its reconcilers, and the scheduling loop that writes decisions."""
