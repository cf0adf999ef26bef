"""The HTTP servers of the extender process: the scheduler extender and the dashboard."""
