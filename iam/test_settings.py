"""Settings for the test suite: the production settings with IAM_TESTING on (locmem e-mail, development
SECRET_KEY allowed, private webhook endpoints allowed), tasks run eagerly unless a test starts a real
worker, and each xdist worker gets a Redis database of its own (the suite clears the cache per test)."""

import os
import re

os.environ.setdefault("IAM_TESTING", "1")

_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_redis = os.environ.get("REDIS_URL", "")
if _redis:
    base = re.search(r"/(\d+)$", _redis)
    index = (int(base.group(1)) if base else 0) + int(_worker.removeprefix("gw") or 0)
    os.environ["REDIS_URL"] = re.sub(r"(/\d+)?$", f"/{index % 16}", _redis, count=1)

from iam.settings import *  # noqa: E402, F403

CELERY_TASK_ALWAYS_EAGER = True
# Each test runs in a transaction that never commits, which the embedded worker's threads could not see:
# eager tasks run in the thread that ran the commit hooks. Tests of the threads themselves set it back
# (the `embedded_outbox` fixture, with a committing database).
IAM_OUTBOX_THREADS = 0
