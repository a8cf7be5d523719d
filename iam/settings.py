"""Settings, all read from the environment through `env()` (see the README's configuration table)."""

import base64
import hashlib
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from iam.env import env
from iam.version import VERSION

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env("DEBUG", False, bool)
TESTING = env("IAM_TESTING", False, bool)

# With DEBUG off these must come from the environment (docs/operations.md#required-settings). Per-process
# caches (no REDIS_URL) cannot enforce revocation or throttling across several web processes, and a built-in
# key signs nothing. DEBUG on (`make run`) and the test suite keep the embedded defaults.
_DEV_SECRET_KEY = "dev-insecure-secret-key-change-me-0123456789abcdef"
_REQUIRED_IN_PRODUCTION = ("SECRET_KEY", "IAM_JWT_SIGNING_KEY", "REDIS_URL")
if not (DEBUG or TESTING):
    _missing = [key for key in _REQUIRED_IN_PRODUCTION if not env(key, "").strip()]
    if env("SECRET_KEY", "") == _DEV_SECRET_KEY:
        _missing.insert(0, "SECRET_KEY")
    if _missing:
        _why = {
            "SECRET_KEY": "a built-in key signs nothing in production",
            "IAM_JWT_SIGNING_KEY": "a built-in key signs nothing in production",
            "REDIS_URL": "without it each process keeps its own cache, so revocation and throttling would "
            "not hold across processes",
        }
        raise ImproperlyConfigured(
            "; ".join(f"{key} must be set ({_why[key]})" for key in dict.fromkeys(_missing))
            + ". DEBUG is off, so this is a production start; for development set DEBUG=1 "
            "(make run, make worker and make beat do)."
        )
SECRET_KEY = env("SECRET_KEY", _DEV_SECRET_KEY)

ALLOWED_HOSTS = env("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"], list)
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS", [], list)
# A POST whose CSRF check fails (the hosted pages', the admin's) gets a page of its own (iam/http/pages.py).
# The API is not concerned: its endpoints take Bearer tokens, never cookies, and are exempt.
CSRF_FAILURE_VIEW = "iam.http.pages.csrf_failure"

INSTALLED_APPS = [
    "iam.apps.IamAdminConfig",  # django.contrib.admin with the operators' site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files for /docs, served from here (no CDN)
    "iam",
    "accounts",
    "tenancy",
    "rbac",
    "authn",
    "clients",
    "sso",
    "scim",
    "oidc",
]

MIDDLEWARE = [
    # outermost: errors made by the others get the headers too
    "iam.http.middleware.SecurityHeadersMiddleware",
    "iam.http.middleware.RequestContextMiddleware",
    "iam.http.middleware.MetricsMiddleware",
    # inside the request id and the metrics: its 503 has both
    "iam.http.middleware.RequestDeadlineMiddleware",
    "iam.http.middleware.JsonErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "iam.urls"
WSGI_APPLICATION = "iam.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env("DB_CONN_MAX_AGE", 60, int),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Development (`make run`): concurrent requests queue for SQLite's one write lock instead of failing
    # with "database is locked". Each transaction takes the lock at BEGIN (IMMEDIATE: a transaction that
    # began reading cannot fail later to upgrade), waits up to 20 s for it, and WAL lets reads run beside
    # the writer.
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    }
elif env("DB_PREPARED_STATEMENTS", True, bool):
    # PostgreSQL: a statement a connection runs a fifth time is prepared, so PostgreSQL plans it once per
    # connection instead of at every run (docs/performance.md: a code exchange's PostgreSQL CPU). Binding
    # on the server is what lets psycopg prepare. A pooler in transaction mode that does not track
    # prepared statements (PgBouncer before 1.21, or without max_prepared_statements) needs it off.
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "server_side_binding": True,
        "prepare_threshold": 5,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "iam.platform.redis_cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env("IAM_CACHE_PREFIX", "iam"),
            # A cache outage must cost milliseconds, not seconds: callers fall back to the database.
            "OPTIONS": {
                "socket_connect_timeout": 0.2,
                "socket_timeout": 0.5,
                # What `clients/validate`, Bearer checks and the token endpoint read is also kept in process
                # memory, dropped as Redis reports each change (iam/platform/redis_cache.py): a warm check
                # makes no round trip.
                "LOCAL_PREFIXES": (
                    [
                        "client:",
                        "application:",
                        "account:",
                        "session:",
                        "apikey:",
                        "service-account:",
                        "grants:",
                        "authz-generation:",
                        "workspace:",
                        "jwt-signing-keys:",  # the keys' version, read by every RS256 ID token
                    ]
                    if env("IAM_CACHE_LOCAL", True, bool)
                    else []
                ),
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "iam"}}

AUTH_USER_MODEL = "accounts.Account"
AUTHENTICATION_BACKENDS = ["authn.backends.AccountBackend"]
PASSWORD_HASHERS = ["accounts.hashers.OwaspArgon2PasswordHasher"]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "accounts.validators.MaximumLengthValidator", "OPTIONS": {"max_length": 1024}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# The hosted pages' text goes through Django's translation machinery (docs/pages.md#languages): English is
# shipped; a language added to LANGUAGES with its catalogue under locale/ is chosen by Accept-Language.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]  # the hosted pages' stylesheet (static/pages/)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not (DEBUG or TESTING)
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# docs/api.md#errors: bodies over 1 MiB are refused with 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env("SESSION_COOKIE_SECURE", not DEBUG, bool)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
IAM_BEHIND_PROXY = env("IAM_BEHIND_PROXY", False, bool)  # TLS ends at a proxy: X-Forwarded-Proto, HSTS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if IAM_BEHIND_PROXY else None
# docs/operations.md#behind-a-reverse-proxy: the client address is REMOTE_ADDR unless N trusted reverse
# proxies stand in front, in which case it is the N-th X-Forwarded-For entry from the right
# (iam/platform/addresses.py).
IAM_NUM_PROXIES = env("IAM_NUM_PROXIES", 0, int)
if IAM_NUM_PROXIES < 0:
    raise ImproperlyConfigured("IAM_NUM_PROXIES must be 0 or more")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["authn.authentication.BearerAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rbac.api.access.EndpointPermission"],
    "DEFAULT_PARSER_CLASSES": ["iam.http.parsers.JsonBodyParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "iam.http.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "NUM_PROXIES": IAM_NUM_PROXIES,  # 0: DRF's own get_ident uses REMOTE_ADDR too (None trusts the header)
    "DEFAULT_SCHEMA_CLASS": "iam.http.schema.EndpointSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "IAM service",
    "DESCRIPTION": (
        "Multi-tenant identity and access management. Every operation is a POST with a JSON body "
        '(except the health GETs); answers are `{"success": true, "status": 200, "data": ...}`, '
        'errors `{"success": false, "status": <int>, "message": "...", "field"?: "..."}`. '
        "Workspace-scoped operations name their workspace in the `X-Workspace` header (id or slug). "
        "Guides: the repository's README.md and docs/."
    ),
    "VERSION": VERSION,  # the release (pyproject.toml)
    "SERVE_INCLUDE_SCHEMA": False,
    # The reference served at /docs (schema at /docs/schema): Swagger UI from the sidecar package's static
    # files, so the page loads nothing from another origin.
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None, "defaultModelsExpandDepth": 0},
    # Several resources have a `kind` or `status`: name their enums after the resource.
    "ENUM_NAME_OVERRIDES": {
        "CredentialKindEnum": "authn.models.Credential.Kind",
        "CredentialProviderEnum": "authn.models.Credential.Provider",
        "CredentialStatusEnum": "authn.models.Credential.Status",
        "MembershipStatusEnum": "rbac.models.Membership.Status",
        "ApplicationTypeEnum": "oidc.models.Application.Type",
    },
}

# E-mail (docs/operations.md#e-mail).
EMAIL_BACKEND = env(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if not TESTING
    else "django.core.mail.backends.locmem.EmailBackend",
)
EMAIL_FILE_PATH = env("EMAIL_FILE_PATH", str(BASE_DIR / "var" / "mail"))
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = env("EMAIL_PORT", 25, int)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env("EMAIL_USE_TLS", False, bool)
EMAIL_USE_SSL = env("EMAIL_USE_SSL", False, bool)
EMAIL_TIMEOUT = env("EMAIL_TIMEOUT", 10, int)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "IAM <no-reply@localhost>")

# Celery: Redis broker when REDIS_URL is set; otherwise tasks run in-process (eagerly).
CELERY_BROKER_URL = env("CELERY_BROKER_URL", REDIS_URL or "memory://")
CELERY_TASK_ALWAYS_EAGER = env("CELERY_TASK_ALWAYS_EAGER", not REDIS_URL, bool)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes the database connection before and after every task unless this is set (it
# then closes it every this many tasks): Django's own rule closes it instead (iam/celery.py).
CELERY_DB_REUSE_MAX = 1000
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Publishing must not hang a request while the broker is down: the outbox sweeper catches up later.
# No ack emulation: with it, kombu's Redis transport keeps unacknowledged messages in a
# hash and, when the broker connection drops while the worker holds one, puts it back through the
# transport it has just closed (`'NoneType' object has no attribute 'hostname'`): the worker logs
# "Unrecoverable error" and exits. The outbox rows in PostgreSQL are the record of what is owed, and the
# sweeper re-publishes whatever a worker did not finish, so the broker's own redelivery is not needed.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 0.5,
    "socket_timeout": 1,
    "max_retries": 0,
    "ack_emulation": False,
}
# The worker reconnects for as long as the broker is away (Celery's default gives up after 100 tries), and
# lets a running task finish (its outcome is committed to PostgreSQL, not to the broker).
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BEAT_SCHEDULE = {
    "compact-row-counts": {"task": "iam.compact_row_counts", "schedule": 60.0},  # iam/platform/counts.py
    "sweep-outbox": {"task": "iam.sweep_outbox", "schedule": env("IAM_OUTBOX_SWEEP_SECONDS", 5.0, float)},
    # Push deliveries carry their own retry state (clients/push.py): the due ones no task took.
    "sweep-push": {"task": "clients.sweep_push", "schedule": env("IAM_OUTBOX_SWEEP_SECONDS", 5.0, float)},
}
# Without a broker (eager tasks) outbox messages run in this many threads of the web process, never in
# the request that committed them (docs/api.md#throttling). Only the unit suite sets 0: its transactions never
# commit, so another thread could not see their rows (iam/test_settings.py).
IAM_OUTBOX_THREADS = 2
# The sweeper leaves a message this long after it was due before re-publishing it (its publish may be in
# flight); the live test layer shortens it so outage recovery is measured in seconds.
IAM_OUTBOX_SWEEP_GRACE_SECONDS = env("IAM_OUTBOX_SWEEP_GRACE_SECONDS", 30.0, float)

# IAM settings.
IAM_ROOT_WORKSPACE = env("IAM_ROOT_WORKSPACE", "root")
IAM_JWT_SIGNING_KEY = env("IAM_JWT_SIGNING_KEY", SECRET_KEY)
IAM_JWT_ALGORITHM = env("IAM_JWT_ALGORITHM", "HS256")
if IAM_JWT_ALGORITHM not in ("HS256", "EdDSA", "ES256"):
    raise ImproperlyConfigured("IAM_JWT_ALGORITHM must be HS256, EdDSA or ES256")
# How long clients may cache /.well-known/jwks.json (Cache-Control max-age).
IAM_JWKS_MAX_AGE_SECONDS = env("IAM_JWKS_MAX_AGE_SECONDS", 300, int)
IAM_JWT_ISSUER = env("IAM_JWT_ISSUER", "iam")
IAM_ACCESS_TOKEN_LIFETIME = timedelta(minutes=60)
IAM_REFRESH_TOKEN_LIFETIME = timedelta(days=env("IAM_REFRESH_TOKEN_DAYS", 30, int))
IAM_EMAIL_TOKEN_LIFETIME = timedelta(hours=24)
IAM_AUTH_CACHE_SECONDS = env("IAM_AUTH_CACHE_SECONDS", 300, int)
# docs/api.md#sessions: ending another session needs a login at most this many seconds old (`auth_time`).
IAM_REAUTH_SECONDS = env("IAM_REAUTH_SECONDS", 600, int)
IAM_PUBLIC_URL = env("IAM_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Passkeys (docs/operations.md#passkeys-relying-party-id-and-origins): the WebAuthn relying party id
# (a registrable domain of the pages' host) and the origins a browser may sign in from. A passkey is bound
# to the RP id: changing it later orphans every passkey registered.
IAM_WEBAUTHN_RP_ID = env("IAM_WEBAUTHN_RP_ID", urlsplit(IAM_PUBLIC_URL).hostname or "localhost")
IAM_WEBAUTHN_ORIGINS = env(
    "IAM_WEBAUTHN_ORIGINS",
    ["{0.scheme}://{0.netloc}".format(urlsplit(IAM_PUBLIC_URL))],
    list,
)
# The base of the e-mails' links (/confirm-email, /reset-password, /accept-invitation): by default the
# service's own hosted pages (docs/pages.md#self-service-pages), or an app that serves those paths itself.
IAM_FRONTEND_URL = env("IAM_FRONTEND_URL", IAM_PUBLIC_URL).rstrip("/")
# The name the hosted pages (/signin and the others, docs/pages.md) show in their header and title.
IAM_SITE_NAME = env("IAM_SITE_NAME", "IAM")
IAM_LOGIN_FAILURES_PER_EMAIL = env("IAM_LOGIN_FAILURES_PER_EMAIL", 5, int)
IAM_LOGIN_FAILURES_PER_IP = env("IAM_LOGIN_FAILURES_PER_IP", 50, int)
IAM_LOGIN_FAILURE_WINDOW = timedelta(minutes=15)
# docs/api.md#second-factor-totp: wrong second-factor codes one account may send within
# IAM_LOGIN_FAILURE_WINDOW; past it, 429.
IAM_MFA_FAILURES_PER_ACCOUNT = env("IAM_MFA_FAILURES_PER_ACCOUNT", 5, int)
IAM_MFA_TOKEN_LIFETIME = timedelta(minutes=5)
IAM_EMAILS_PER_ADDRESS_PER_HOUR = env("IAM_EMAILS_PER_ADDRESS_PER_HOUR", 3, int)
# reset-password and resend-confirm requests one client address may make per hour
# (docs/operations.md#behind-a-reverse-proxy); past it, 429.
IAM_EMAIL_REQUESTS_PER_IP_PER_HOUR = env("IAM_EMAIL_REQUESTS_PER_IP_PER_HOUR", 20, int)
# `auth/register` requests one client address may make per hour (docs/security.md#throttling-and-enumeration):
# the per-account workspace quota is not bypassed by registering more accounts.
IAM_REGISTRATIONS_PER_IP_PER_HOUR = env("IAM_REGISTRATIONS_PER_IP_PER_HOUR", 100, int)
# Invitation e-mails (docs/api.md#invitations) one address receives per hour, whoever invites; past it the
# invitation still stands (the account sees it signed in, `memberships/accept` with Bearer and id), unmailed.
IAM_INVITATIONS_PER_ADDRESS_PER_HOUR = env("IAM_INVITATIONS_PER_ADDRESS_PER_HOUR", 10, int)
# OAuth and SSO logins one client address may start per minute: a whole office behind one address signs
# in at nine (docs/security.md#throttling-and-enumeration).
IAM_OAUTH_STARTS_PER_IP_PER_MINUTE = env("IAM_OAUTH_STARTS_PER_IP_PER_MINUTE", 600, int)
IAM_WEBHOOK_ALLOW_PRIVATE = env("IAM_WEBHOOK_ALLOW_PRIVATE", DEBUG or TESTING, bool)
IAM_WEBHOOK_TIMEOUT_SECONDS = 5
IAM_WEBHOOK_RETRY_HOURS = 24
# `manage.py cleanup` deletes delivered outbox messages processed longer ago than this.
IAM_OUTBOX_RETENTION_DAYS = env("IAM_OUTBOX_RETENTION_DAYS", 7, int)
# `POST /clients/events` serves this many days of events; older cursors answer 410 `cursor expired`.
IAM_EVENT_RETENTION_DAYS = env("IAM_EVENT_RETENTION_DAYS", 7, int)
# `manage.py cleanup` deletes audit entries older than this.
IAM_AUDIT_RETENTION_DAYS = env("IAM_AUDIT_RETENTION_DAYS", 365, int)
# `manage.py cleanup` deletes the SCIM request log (the admin's "SCIM requests") older than this.
IAM_SCIM_LOG_DAYS = env("IAM_SCIM_LOG_DAYS", 7, int)
# `GET /metrics` asks for `Authorization: Bearer <this>` when set.
IAM_METRICS_TOKEN = env("IAM_METRICS_TOKEN", "")

# docs/api.md#quotas-and-budgets: quotas. Per workspace, the records it may hold (`PENDING_INVITATIONS`:
# invitations not yet answered; `PERMISSIONS_PER_ROLE`, `ROLES_PER_MEMBERSHIP`: one role's, one membership's),
# and per account the workspaces it has created and not deleted. Operators (and management commands) are
# exempt.
IAM_QUOTA_PROJECTS = env("IAM_QUOTA_PROJECTS", 1000, int)
IAM_QUOTA_ROLES = env("IAM_QUOTA_ROLES", 1000, int)
IAM_QUOTA_PERMISSIONS = env("IAM_QUOTA_PERMISSIONS", 5000, int)
IAM_QUOTA_CLIENTS = env("IAM_QUOTA_CLIENTS", 100, int)
IAM_QUOTA_SSO_CONNECTIONS = env("IAM_QUOTA_SSO_CONNECTIONS", 10, int)
IAM_QUOTA_PENDING_INVITATIONS = env("IAM_QUOTA_PENDING_INVITATIONS", 1000, int)
IAM_QUOTA_PERMISSIONS_PER_ROLE = env("IAM_QUOTA_PERMISSIONS_PER_ROLE", 500, int)
IAM_QUOTA_ROLES_PER_MEMBERSHIP = env("IAM_QUOTA_ROLES_PER_MEMBERSHIP", 50, int)
IAM_QUOTA_WORKSPACES = env("IAM_QUOTA_WORKSPACES", 20, int)
IAM_QUOTA_APPLICATIONS = env("IAM_QUOTA_APPLICATIONS", 100, int)
IAM_QUOTA_SERVICE_ACCOUNTS = env("IAM_QUOTA_SERVICE_ACCOUNTS", 100, int)
# docs/api.md#quotas-and-budgets: every statement of a request is cancelled past this (503 `request took too
# long`); the worker, beat and management commands run without it (iam/platform/timeouts.py).
IAM_STATEMENT_TIMEOUT_MS = env("IAM_STATEMENT_TIMEOUT_MS", 5000, int)
# No request runs longer than this in all (seconds): past it, 503 `request took too long`, nothing written
# (iam/platform/timeouts.py). gunicorn's `timeout` must stay above it.
IAM_REQUEST_SECONDS = env("IAM_REQUEST_SECONDS", 20.0, float)
# docs/api.md#lists: a list page ends before the record that would take its serialized records past this.
IAM_PAGE_MAX_BYTES = env("IAM_PAGE_MAX_BYTES", 4 * 1024 * 1024, int)
# docs/api.md#quotas-and-budgets: request-body bytes one web worker holds at once, across its connections
# (iam/server/app.py): past it the request holding the most is answered 503 and its connection closed.
# As much again for answers its clients have not taken yet (iam/server/answers.py).
IAM_WEB_BUFFER_BYTES = env("IAM_WEB_BUFFER_BYTES", 64 * 1024 * 1024, int)

# The key that encrypts client secrets at rest (docs/security.md#secrets-at-rest): derived from SECRET_KEY
# when unset.
IAM_ENCRYPTION_KEY = env(
    "IAM_ENCRYPTION_KEY",
    base64.urlsafe_b64encode(hashlib.sha256(f"iam-encryption:{SECRET_KEY}".encode()).digest()).decode(),
)

# OAuth provider idp_a (docs/api.md#oauth-login).
IAM_IDP_A_CLIENT_ID = env("IAM_IDP_A_CLIENT_ID", "")
IAM_IDP_A_CLIENT_SECRET = env("IAM_IDP_A_CLIENT_SECRET", "")
IAM_IDP_A_AUTHORIZE_URL = env("IAM_IDP_A_AUTHORIZE_URL", "")
IAM_IDP_A_TOKEN_URL = env("IAM_IDP_A_TOKEN_URL", "")
IAM_IDP_A_USERINFO_URL = env("IAM_IDP_A_USERINFO_URL", "")
IAM_IDP_A_SCOPE = env("IAM_IDP_A_SCOPE", "openid email profile")
IAM_OAUTH_REDIRECT_ALLOWLIST = env("IAM_OAUTH_REDIRECT_ALLOWLIST", [], list)

# Enterprise SSO per workspace (docs/api.md#sso): the nameservers that answer the DNS TXT proof of a domain
# (`address` or `address:port`, comma-separated; the system's when empty).
IAM_DNS_NAMESERVERS = env("IAM_DNS_NAMESERVERS", [], list)
# A request waits on the network (DNS, an OpenID provider) this long at most in all; at most this many
# requests of one workspace wait at once, across every web process, and of one web process, which keeps a
# thread of the Procfile's WEB_THREADS for the rest (docs/api.md#waiting-on-the-network).
IAM_NETWORK_BUDGET_SECONDS = env("IAM_NETWORK_BUDGET_SECONDS", 5.0, float)
IAM_NETWORK_REQUESTS_PER_WORKSPACE = env("IAM_NETWORK_REQUESTS_PER_WORKSPACE", 2, int)
IAM_NETWORK_REQUESTS_PER_PROCESS = env(
    "IAM_NETWORK_REQUESTS_PER_PROCESS", max(1, env("WEB_THREADS", 2, int) - 1), int
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "iam.platform.context.RequestIdFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["request_id"]}
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}
