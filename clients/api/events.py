"""`clients/events`: the catch-up of a client's missed push events."""

from rest_framework.request import Request

from iam.http.endpoint import Endpoint

from .. import catchup, serializers


class ClientEvents(Endpoint):
    """The workspace's events after a cursor, in commit order. Public: the client authenticates itself with
    its id and secret in the body, as in `clients/validate`; a wrong pair is 401 `invalid client`. A cursor
    older than IAM_EVENT_RETENTION_DAYS is 410 `cursor expired`."""

    summary = "Read the workspace's events after a cursor"
    example_request = {
        "client_id": "9e5c1a7d-4b2f-4d8e-a6c3-2f7b9d1e5a38",
        "client_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwz0nF3yNp7Aw=",
        "after": None,
        "limit": 100,
    }

    public = True
    read_only = True  # plain reads, each statement its own snapshot (see clients/catchup.py)
    error_statuses = (401, 410)
    request_serializer = serializers.EventsRequest
    response_serializer = serializers.EventsPage

    def handle(self, request: Request, data: dict) -> dict:
        client = catchup.authenticate(data["client_id"], data["client_secret"])
        return catchup.read(client.workspace_id, after=data.get("after"), limit=data["limit"])
