"""The port of Kueue v0.19.2's e2e suite (a package: its Tower lives for these tests only)."""
