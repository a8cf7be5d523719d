"""The Procfile's worker: `python -m iam.worker [the options of celery worker]`.

It runs Celery's own `worker` command, with its options and its start, for this project's app, without
Celery's umbrella command `celery`, which imports every other subcommand before it runs one (`celery
amqp`'s shell among them, with prompt_toolkit: about 0.1 s of a 0.75 s start). A worker started in place
of one that crashed delivers again that much sooner (docs/performance.md#what-keeps-the-hot-paths-fast).
`celery -A iam worker` starts the same worker, only later.

The garbage collector is off from here to `worker_init` (iam/celery.py turns it on again there, after the
freeze): importing Django, the models and the tasks creates about 180,000 objects and hardly a cycle, and
the collections that allocation triggers scanned them again and again, about 0.1 s of the start."""

import gc
import sys

from celery import maybe_patch_concurrency


def main() -> None:
    gc.disable()  # until `worker_init` (iam.celery._freeze)
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
