"""The job framework: one adapter per kind of job, and the registry that names them."""
