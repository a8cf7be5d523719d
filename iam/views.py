import logging

from django.db import connection
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from iam.api import envelope
from iam.errors import error_response

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
