"""`kubectl tower`: the plugin that explains queues and pending jobs."""
