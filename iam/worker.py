"""The Procfile's worker: `python -m iam.worker [the options of celery worker]`.

It runs Celery's own `worker` command, with its options and its start, for this project's app, without
Celery's umbrella command `celery`, which imports every other subcommand before it runs one (`celery
amqp`'s shell among them, with prompt_toolkit: about 0.1 s of a 0.75 s start). A worker started in place
of one that crashed delivers again that much sooner (docs/performance.md#what-keeps-the-hot-paths-fast).
`celery -A iam worker` starts the same worker, only later."""

import sys

from celery import maybe_patch_concurrency


def main() -> None:
    maybe_patch_concurrency()  # `-P eventlet|gevent`, as `celery`'s own entry point does, before the imports
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    from iam.celery import app

    worker.main(
        args=sys.argv[1:],
        prog_name="python -m iam.worker",
        obj=CLIContext(app=app, no_color=None, workdir=None, quiet=False),
    )


if __name__ == "__main__":
    main()
