"""What `manage.py cleanup` deletes from the apps' tables: each app registers a sweep next to the models
it sweeps (`@retention.sweep("refresh tokens")` in `authn/models.py`), so iam names no app. A sweep takes
the current time and the outbox retention's cut-off and returns how many rows it deleted."""

from collections.abc import Callable
from datetime import datetime

from iam.platform.registry import Registry

Sweep = Callable[[datetime, datetime], int]
_sweeps: Registry[Sweep] = Registry()
sweep = _sweeps.register


def sweeps() -> dict[str, Sweep]:
    """Name (as printed: `deleted 3 <name>`) -> sweep, in registration order."""
    return dict(_sweeps)
