"""Tower's admission webhook (Flask behind gunicorn over TLS); built by the webhook issue."""
