import functools
import json
import uuid

from django.conf import settings
from django.contrib.auth.hashers import check_password, make_password
from django.db import connection, transaction
from django.http import JsonResponse
from django.urls import path
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from authn import throttling, tokens
from iam.urls import urlpatterns as service_urlpatterns


def ping(request):
    """The floor: a Django view that does nothing, through the same middleware."""
    return JsonResponse({"success": True, "status": 200, "data": "pong"})


@csrf_exempt
def hash_only(request):
    """A password check and nothing else, through the same server and middleware: the request's own cost
    beside argon2id's (`bench.logins`)."""
    body = json.loads(request.body)
    if not check_password(body["password"], _encoded(body["password"])):
        return JsonResponse({"success": False, "status": 401}, status=401)
    return JsonResponse({"success": True, "status": 200, "data": "checked"})


@functools.lru_cache(maxsize=4)  # any password a client sends: bounded
def _encoded(password: str) -> str:
    """The bench's password, hashed once per process (`bench.common.PASSWORD` is drawn per run)."""
    return make_password(password)


# What `authn.services.login` reads, in the statement its ORM query compiles to.
_LOGIN_READ = """
SELECT a.id, a.password, a.enabled, a.session_version, c.id, c.status,
       EXISTS (SELECT 1 FROM authn_totp t WHERE t.account_id = a.id AND t.confirmed_at IS NOT NULL),
       EXISTS (SELECT 1 FROM authn_passkey p WHERE p.account_id = a.id)
FROM accounts_account a LEFT JOIN authn_credential c ON c.account_id = a.id AND c.kind = 'password'
WHERE a.email = %s LIMIT 1
"""


@csrf_exempt
def login_floor(request):
    """The floor of a password login on this stack (`bench.logins`): what `auth/login` does for an account
    without a second factor, by hand and nothing else. The throttle counters read in one round trip, one
    SELECT, the password check, the same five writes in one transaction (the credential's `last_used_at`,
    the session, its refresh token, `last_login`, the audit entry) and two signed tokens; no ORM, no DRF,
    no serializer, no audit context. Not a login: no refusal path, no throttle counted, no metrics."""
    body = json.loads(request.body)
    email, ip = body["email"], request.META["REMOTE_ADDR"]
    throttling.read((throttling.login_failures_by_email, email), (throttling.login_failures_by_ip, ip))
    with connection.cursor() as cursor:
        cursor.execute(_LOGIN_READ, [email])
        account_id, encoded, enabled, version, credential_id, status, totp, passkey = cursor.fetchone()
    if not (check_password(body["password"], encoded) and enabled and status != "revoked"):
        return JsonResponse({"success": False, "status": 401}, status=401)
    if totp or passkey:  # `auth/login` would answer a second-factor challenge: not what the floor measures
        return JsonResponse({"success": False, "status": 409}, status=409)
    now = timezone.now()
    session_id, jti = uuid.uuid4(), uuid.uuid4()
    session_end = now + settings.IAM_REFRESH_TOKEN_LIFETIME
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE authn_credential SET last_used_at = %s WHERE id = %s", [now, credential_id])
        cursor.execute(
            "INSERT INTO authn_session (id, created_at, last_used_at, expires_at, ip, user_agent, amr, "
            "session_version, account_id, kind, secret_digest) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'api', '')",
            [
                session_id,
                now,
                now,
                session_end,
                ip,
                request.headers.get("User-Agent", "")[:512],
                '["pwd"]',
                version,
                account_id,
            ],
        )
        cursor.execute(
            "INSERT INTO authn_refreshtoken (jti, created_at, expires_at, account_id) "
            "VALUES (%s, %s, %s, %s)",
            [jti, now, session_end, account_id],
        )
        cursor.execute("UPDATE accounts_account SET last_login = %s WHERE id = %s", [now, account_id])
        cursor.execute(
            "INSERT INTO iam_auditentry (id, occurred_at, actor_id, actor_kind, action, resource_type, "
            "resource_id, changes, ip, user_agent, request_id) "
            "VALUES (%s, %s, %s, 'account', 'account.login', 'account', %s, '{}', %s, %s, '')",
            [uuid.uuid4(), now, account_id, account_id, ip, request.headers.get("User-Agent", "")[:512]],
        )
    common = {
        "session_version": version,
        "auth_time": int(now.timestamp()),
        "not_after": session_end,
        "extra": {"sid": str(session_id), "amr": ["pwd"]},
    }
    access = tokens.sign(
        account_id, type=tokens.ACCESS, lifetime=settings.IAM_ACCESS_TOKEN_LIFETIME, **common
    )
    refresh = tokens.sign(
        account_id, type=tokens.REFRESH, lifetime=settings.IAM_REFRESH_TOKEN_LIFETIME, jti=jti, **common
    )
    data = {"access_token": access.token, "refresh_token": refresh.token}
    return JsonResponse({"success": True, "status": 200, "data": data})


urlpatterns = [
    path("bench/ping", ping),
    path("bench/hash", hash_only),
    path("bench/login-floor", login_floor),
    *service_urlpatterns,
]
