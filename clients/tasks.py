from celery import shared_task
from celery.signals import worker_ready

from iam.platform import outbox

from . import push


@shared_task(name="clients.deliver_push", ignore_result=True)
def deliver_push(client_id: str | None, delivery_id: int) -> int:
    return push.deliver_due(client_id, delivery_id)


@shared_task(name="clients.sweep_push", ignore_result=True)
def sweep_push(grace: float | None = None) -> int:
    return push.sweep(grace=grace)


@worker_ready.connect(dispatch_uid="clients.tasks.sweep_on_start")
def sweep_on_start(**kwargs: object) -> None:
    """A worker that starts hands over every due delivery at once (`push.sweep`'s `grace=0`): it may
    replace one that died with their tasks, and beat's sweep would wait its grace for them."""
    outbox.dispatch(sweep_push, 0.0)
