from celery import shared_task

from . import push


@shared_task(name="clients.deliver_push", ignore_result=True)
def deliver_push(client_id: str | None, delivery_id: int) -> int:
    return push.deliver_due(client_id, delivery_id)


@shared_task(name="clients.sweep_push", ignore_result=True)
def sweep_push() -> int:
    return push.sweep()
