"""Tower's certificates: CA, serving certificate, caBundle injection (the webhook issue)."""
