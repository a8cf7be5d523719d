from celery import shared_task

from iam.platform import counts, outbox


@shared_task(name="iam.process_outbox_message", ignore_result=True)
def process_outbox_message(message_id: str) -> str:
    return outbox.process(message_id)


@shared_task(name="iam.sweep_outbox", ignore_result=True)
def sweep_outbox() -> int:
    return outbox.sweep()


@shared_task(name="iam.compact_row_counts", ignore_result=True)
def compact_row_counts() -> int | None:
    return counts.compact()
