import json
from typing import Any

from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers

from iam.errors import MALFORMED_JSON, ApiError


class JsonBodyParser(parsers.BaseParser):
    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        try:
            raw = stream.read() if stream is not None else b""
        except RequestDataTooBig as exc:
            raise ApiError(413, "request body too large") from exc
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, MALFORMED_JSON) from exc
