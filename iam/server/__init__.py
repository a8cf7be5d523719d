"""The web process's server (the Procfile's `web`: `gunicorn -k iam.server.worker.Worker`): gunicorn's master,
as before, and in each worker process uvicorn's event loop in front of the project's WSGI application.

No client holds a worker's thread by being slow (docs/operations.md#slow-clients). gunicorn's sync worker
reads a request on the worker itself, so a client that sends its headers, or its body, a byte at a time
holds that worker until the 30 s timeout: two such connections stopped the service. Here the event loop
reads every request whole, headers and body, for any number of connections at once; only then does one
of a fixed pool of threads (`--threads` per worker) run Django's WSGI application on it, exactly as it
runs under a sync worker behind a buffering proxy, with its persistent database connection per thread.
The same holds on the way out: the thread hands its answer to the loop and is free, and the loop writes
it as the client takes it; a client that takes it too slowly is dropped.

- `protocol.py`: each connection (deadlines, limits on the head, connections per address, the read
  rate a client must keep to take its answer).
- `app.py`: each request (its body read whole within the worker's budget, then a static file or the
  application).
- `answers.py`: the application in a thread and its answer, whole or streamed.
- `static.py`: static files, on the loop.
- `access.py`: access-log lines without secrets.
- `responses.py`: what the server answers itself (400, 408, 503).
- `worker.py`: gunicorn's worker class, `iam.server.worker.Worker`.

Why not Django's own ASGI handler (`django.core.asgi`): it runs each request's sync code in a thread of
its own, with a database connection of its own, and hops between the loop and that thread several times
a request; `make bench` measured the bare view at a third of sync gunicorn's throughput and
`clients/validate` at a seventh. This adapter costs one hop to the pool and back."""
