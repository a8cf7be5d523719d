"""The client's address, read in one place (docs/operations.md#behind-a-reverse-proxy). It is the connection's
(`REMOTE_ADDR`): a header the client sends is never trusted by default, or anyone could pick the address its
failures count against. Behind N reverse proxies (`IAM_NUM_PROXIES=N`), each appends the address it received
the request from to `X-Forwarded-For`, so the N-th entry from the right is the last one no client could
write."""

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from rest_framework.request import Request


def client_ip(request: HttpRequest | Request) -> str:
    return address_of(request.META)


def address_of(meta: Mapping[str, Any]) -> str:
    """The client address of a request's WSGI environ (`request.META`)."""
    proxies = settings.IAM_NUM_PROXIES
    if proxies:
        forwarded = [entry.strip() for entry in meta.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [entry for entry in forwarded if entry]
        if forwarded:
            # Fewer entries than proxies: the request skipped the outer ones; the leftmost entry is then
            # the one the first proxy it met wrote (Django REST framework's rule).
            return forwarded[-min(proxies, len(forwarded))]
    return meta.get("REMOTE_ADDR", "")


def user_agent(request: HttpRequest | Request) -> str:
    """The client's `User-Agent` header as sent (callers truncate it to what they keep)."""
    return request.META.get("HTTP_USER_AGENT", "")
