"""The production settings, with the benchmark's URLs: the service plus a trivial view to compare with."""

from iam.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"

# The bench's tasks go to a queue of their own, purged when it ends: a burst it stops waiting for must not
# reach the workers of a service that shares the broker.
CELERY_TASK_DEFAULT_QUEUE = "iam-bench"
