"""`kubectl tower`: the plugin that explains queues and pending jobs, and kueuectl's verbs.

One module per verb (why, queue, forecast, listing and pods, hold, create), their shared
printing (output) and connection (connect), and the command line (cli, the console script).
"""
