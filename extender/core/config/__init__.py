"""Kueue's Configuration file, read as Kueue v0.19.2 reads it, and its `resources` policy.

The top of the core beside `scheduling`: it knows each room's settings (the integrations of
`jobframework`, WaitForPodsReady of `admission`, admission fair sharing of `scheduling`), and
no room imports it back.
"""
