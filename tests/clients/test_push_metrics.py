"""Push delivery attempts are counted by result."""

from prometheus_client import REGISTRY

from clients.models import Delivery
from tests.clients.test_push import (  # noqa: F401 (fixtures)
    admin,
    client,
    emit_membership_created,
    receiver,
    run_due_retry,
    workspace,
)


def attempts(result: str) -> float:
    return REGISTRY.get_sample_value("iam_push_delivery_attempts_total", {"result": result}) or 0.0


def test_attempts_are_counted_by_result(client, workspace, receiver, django_capture_on_commit_callbacks):  # noqa: F811
    receiver.fail_first = 1
    failed, delivered = attempts("failed"), attempts("delivered")

    emit_membership_created(workspace, django_capture_on_commit_callbacks)
    assert (attempts("failed"), attempts("delivered")) == (failed + 1, delivered)
    assert run_due_retry(Delivery.objects.get(), django_capture_on_commit_callbacks) == 1
    assert (attempts("failed"), attempts("delivered")) == (failed + 1, delivered + 1)
