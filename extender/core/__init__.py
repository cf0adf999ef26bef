"""The admission brain of Tower: pure, typed, standard library only, in rooms by concern.

From the floor up (a room imports only the rooms below it; pyproject's import-linter
contract checks it):

    scheduling | config   the cycle (cache, queues, scheduler); Kueue's Configuration file
    tas                   topology-aware scheduling
    placement | admission physical fit on nodes; the admission pipeline after quota
    jobframework          every kind of job and its Workload
    api                   Kueue's API: schema, models, parsing

docs/architecture.md has the map: to change X, open Y.
"""
