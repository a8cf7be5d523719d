from celery import shared_task

from iam import outbox


@shared_task(name="iam.process_outbox_message", ignore_result=True)
def process_outbox_message(message_id: str) -> str:
    return outbox.process(message_id)


@shared_task(name="iam.sweep_outbox", ignore_result=True)
def sweep_outbox() -> int:
    return outbox.sweep()
