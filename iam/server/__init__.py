"""The web process's server (the Procfile's `web`: `gunicorn -k iam.server.worker.Worker`): gunicorn's master,
as before, and in each worker process uvicorn's event loop in front of the project's WSGI application.

A slow client must hold no worker (docs/operations.md#slow-clients). gunicorn's sync worker reads a request on
the worker itself, so a client that sends its headers, or its body, a byte at a time holds that worker until
the 30 s timeout: two such connections stopped the service. Here the event loop reads every request whole,
headers and body, for any number of connections at once; only then does one of a fixed pool of threads
(`--threads` per worker) run Django's WSGI application on it, exactly as it runs under a sync worker
behind a buffering proxy, with its persistent database connection per thread. A request not received
whole within `REQUEST_TIMEOUT` seconds of its first byte (of its connection's opening, for the first
one) is answered 408 and its connection closed; a body past `DATA_UPLOAD_MAX_MEMORY_SIZE` is not read
further (Django answers 413 from the length seen) and its connection is closed.

A worker holds at most `IAM_WEB_BUFFER_BYTES` of request bodies at once, across all its connections (bodies
arriving, waiting for a thread, or running): a chunk that would pass it makes the worker refuse the body
still arriving that holds the most, this one included, with 503 and a closed connection, so the many
large partial bodies are refused before the small whole ones. And as under gunicorn's sync workers, a
request that runs in a thread longer than gunicorn's `timeout` (with no progress on a streamed answer)
gets its worker killed and replaced by the master: the worker stops notifying it.

Why not Django's own ASGI handler (`django.core.asgi`): it runs each request's sync code in a thread of
its own, with a database connection of its own, and hops between the loop and that thread several times
a request; `make bench` measured the bare view at a third of sync gunicorn's throughput and
`clients/validate` at a seventh. This adapter costs one hop to the pool and back."""
