"""Kueue's concurrent admission, the controller's part: parents labelled, variants made, kept
active or not, and their admission passed to the parent (extender/core/admission/concurrent.py
decides)."""
