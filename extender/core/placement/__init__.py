"""Physical fit: the node inventory per flavor, the planner, and the scheduler extender's answers.

Kueue admits on quota alone; here a workload that uses an accelerator is admitted only with a
node for every pod (`fit`), and the extender keeps its pods on the nodes planned. `model`
holds nodes, pods and plans; `inventory` what is where, with `holds` what plans reserve;
`planner` and `shortcuts` make plans; `extender` answers kube-scheduler. Imports `api` only.
"""
