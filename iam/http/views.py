import logging

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from iam.http.endpoint import envelope
from iam.http.errors import error_response
from iam.http.list_endpoint import ListEndpoint
from iam.models import AuditEntry

logger = logging.getLogger(__name__)


class HealthView(APIView):
    http_method_names = ["get"]
    authentication_classes: list = []
    permission_classes: list = []


class Index(HealthView):
    @extend_schema(summary="Greeting", responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response(envelope("Welcome to the IAM service"))


class HealthCheck(HealthView):
    @extend_schema(summary="Readiness: 200 while the database answers, 503 otherwise", responses={200: dict})
    def get(self, request: Request) -> Response:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception:
            logger.exception("health-check: database unavailable")
            return error_response(503, "database unavailable")
        return Response(envelope("Healthy"))


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = (
            "id",
            "occurred_at",
            "actor_id",
            "actor_kind",
            "via",
            "action",
            "workspace_id",
            "resource_type",
            "resource_id",
            "changes",
            "ip",
            "user_agent",
            "request_id",
        )


class AuditList(ListEndpoint):
    """The audit entries of the `X-Workspace` workspace, newest first; in the root workspace also the
    global ones (accounts, logins, sessions). Append-only: no other audit endpoint."""

    summary = "List the workspace's audit entries"
    example_request = {
        "filter": {"fields": {"action": "role.update"}},
        "options": {"limit": 50, "order_bys": "!occurred_at"},
    }

    permission = "audit:list"
    workspace_scoped = True
    list_key = "entries"
    filter_fields = {
        "actor_id": "actor_id",
        "action": "action",
        "resource_type": "resource_type",
        "resource_id": "resource_id",
    }
    order_fields = ("occurred_at",)
    default_order = "!occurred_at"
    response_serializer = AuditEntrySerializer

    def get_queryset(self, request: Request) -> QuerySet:
        workspace = request.workspace
        scope = Q(workspace_id=workspace.pk)
        if workspace.slug == settings.IAM_ROOT_WORKSPACE:
            scope |= Q(workspace_id__isnull=True)
        return AuditEntry.objects.filter(scope)
