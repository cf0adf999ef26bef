"""Kueue's API as the core reads it: the schema, typed models, parsing, quantities and labels.

The floor of the core: it imports nothing of the core's other rooms. Everything else speaks
in its types (`models`), reads manifests with its parsers (`parse`), and asks its schema
(`schema`) for Kueue's enums, defaults and v1beta1 spellings. `topology` holds the objects
of topology-aware scheduling that Workloads carry (a request, an assignment); the placement
on domains lives in `extender.core.tas`.
"""
