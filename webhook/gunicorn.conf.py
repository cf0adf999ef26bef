"""gunicorn settings for Tower's webhook: TLS 1.2+, gthread workers, keep-alive, cert reload."""

import os

from webhook import metrics
from webhook.tls import ReloadingContext

_env = os.environ.get

bind = f"{_env('TOWER_WEBHOOK_BIND_ADDRESS', '0.0.0.0')}:{_env('TOWER_WEBHOOK_PORT', '9443')}"
# Threads in a few processes: kube-apiserver keeps connections to webhooks open, and a
# sync worker would close each one, paying a TLS handshake per request. A worker holding
# more kept-alive connections than threads stalls them (measured: throughput fell from
# ~7,500 to ~2,600 req/s), so threads are plentiful (see README).
worker_class = "gthread"
workers = int(_env("TOWER_WEBHOOK_WORKERS", "4"))
threads = int(_env("TOWER_WEBHOOK_THREADS", "4"))
keepalive = 75
# Each worker listens on its own socket and the kernel spreads new connections across them.
# On one shared socket the workers race to accept(), and a burst of connections often lands
# mostly on one worker: measured, 16 connections over 2 workers split 2/14 in two of six tries,
# leaving one process (one core) to serve nearly all of kube-apiserver's kept-alive
# connections. The cost: connections still waiting in a dying worker's queue are reset.
reuse_port = True
timeout = 30
graceful_timeout = 10
certfile = _env("TOWER_WEBHOOK_TLS_CERT_FILE")
keyfile = _env("TOWER_WEBHOOK_TLS_PRIVATE_KEY_FILE")
accesslog = None
errorlog = "-"
loglevel = _env("TOWER_WEBHOOK_LOG_LEVEL", "info")
proc_name = "tower-webhook"
# gunicorn's control socket lives at one fixed path per user; replicas and tests on one
# host would fight over it, and nothing here uses it.
control_socket_disable = True

_contexts: dict[tuple[str, str], ReloadingContext] = {}


def ssl_context(conf, default_ssl_context_factory):
    """One reloading context per worker; consulted for every new connection."""
    key = (conf.certfile, conf.keyfile)
    if key not in _contexts:
        _contexts[key] = ReloadingContext(conf.certfile, conf.keyfile)
    return _contexts[key].context()


def when_ready(server):
    """Say where it listens: with reuse_port the arbiter holds no socket (each worker opens
    its own), so gunicorn's own line reads `Listening at:  (1)`."""
    where = ",".join(server.cfg.bind)
    server.log.info(
        "Listening at: https://%s (%s workers, each on its own socket)", where, server.cfg.workers
    )


def worker_exit(server, worker):
    """Write the last counts of a stopping worker."""
    metrics.TALLY.flush()


def child_exit(server, worker):
    """Drop a dead worker's metric files from the merged /metrics."""
    metrics.worker_exited(worker.pid)
