"""The floor of the stack: a bare WSGI function answering the webhook's canned response."""

import os

with open(os.environ["TOWER_BENCH_RESPONSE"], "rb") as _file:
    _BODY = _file.read()
_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(_BODY)))]


def app(environ, start_response):
    stream = environ["wsgi.input"]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    while length > 0:  # read the request as the webhook must
        chunk = stream.read(min(length, 65536))
        if not chunk:
            break
        length -= len(chunk)
    start_response("200 OK", _HEADERS)
    return [_BODY]
