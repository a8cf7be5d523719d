"""Settings, all read from the environment through `env()` (see the README's configuration table)."""

import base64
import hashlib
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from iam.env import env

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env("DEBUG", False, bool)
TESTING = env("IAM_TESTING", False, bool)

_DEV_SECRET_KEY = "dev-insecure-secret-key-change-me-0123456789abcdef"
SECRET_KEY = env("SECRET_KEY", _DEV_SECRET_KEY)
if SECRET_KEY == _DEV_SECRET_KEY and not (DEBUG or TESTING):
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")

ALLOWED_HOSTS = env("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"], list)
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS", [], list)

INSTALLED_APPS = [
    "iam.apps.IamAdminConfig",  # django.contrib.admin with the operators' site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "iam",
    "accounts",
    "tenancy",
    "rbac",
    "authn",
    "clients",
]

MIDDLEWARE = [
    "iam.middleware.JsonErrorsMiddleware",
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "iam.redis_cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env("IAM_CACHE_PREFIX", "iam"),
            # A cache outage must cost milliseconds, not seconds: callers fall back to the database.
            "OPTIONS": {
                "socket_connect_timeout": 0.2,
                "socket_timeout": 0.5,
                # What `clients/validate` and Bearer checks read is also kept in process memory, dropped
                # as Redis reports each change (iam/redis_cache.py): a warm check makes no round trip.
                "LOCAL_PREFIXES": (
                    ["client:", "account:", "grants:", "authz-generation:"]
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

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not (DEBUG or TESTING)
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# CONTRACT 1: bodies over 1 MiB are refused with 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env("SESSION_COOKIE_SECURE", not DEBUG, bool)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env("IAM_BEHIND_PROXY", False, bool) else None
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["authn.authentication.BearerAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rbac.permissions.EndpointPermission"],
    "DEFAULT_PARSER_CLASSES": ["iam.parsers.JsonBodyParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "iam.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "NUM_PROXIES": env("IAM_NUM_PROXIES", None, int),
    "DEFAULT_SCHEMA_CLASS": "iam.schema.EndpointSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "IAM service",
    "DESCRIPTION": "Multi-tenant identity and access management. See SPEC.md and CONTRACT.md.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Several resources have a `kind` or `status`: name their enums after the resource.
    "ENUM_NAME_OVERRIDES": {
        "CredentialKindEnum": "authn.models.Credential.Kind",
        "CredentialProviderEnum": "authn.models.Credential.Provider",
        "CredentialStatusEnum": "authn.models.Credential.Status",
        "MembershipStatusEnum": "rbac.models.Membership.Status",
    },
}

# E-mail (CONTRACT 9).
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
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Publishing must not hang a request while the broker is down: the outbox sweeper catches up later.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 0.5, "socket_timeout": 1, "max_retries": 0}
CELERY_BEAT_SCHEDULE = {
    "sweep-outbox": {"task": "iam.sweep_outbox", "schedule": env("IAM_OUTBOX_SWEEP_SECONDS", 5.0, float)},
}

# IAM settings (CONTRACT).
IAM_ROOT_WORKSPACE = env("IAM_ROOT_WORKSPACE", "root")
IAM_JWT_SIGNING_KEY = env("IAM_JWT_SIGNING_KEY", SECRET_KEY)
IAM_JWT_ALGORITHM = env("IAM_JWT_ALGORITHM", "HS256")
IAM_JWT_ISSUER = env("IAM_JWT_ISSUER", "iam")
IAM_ACCESS_TOKEN_LIFETIME = timedelta(minutes=60)
IAM_REFRESH_TOKEN_LIFETIME = timedelta(days=env("IAM_REFRESH_TOKEN_DAYS", 30, int))
IAM_EMAIL_TOKEN_LIFETIME = timedelta(hours=24)
IAM_AUTH_CACHE_SECONDS = env("IAM_AUTH_CACHE_SECONDS", 300, int)
IAM_FRONTEND_URL = env("IAM_FRONTEND_URL", "http://localhost:3000").rstrip("/")
IAM_PUBLIC_URL = env("IAM_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
IAM_LOGIN_FAILURES_PER_EMAIL = env("IAM_LOGIN_FAILURES_PER_EMAIL", 5, int)
IAM_LOGIN_FAILURES_PER_IP = env("IAM_LOGIN_FAILURES_PER_IP", 50, int)
IAM_LOGIN_FAILURE_WINDOW = timedelta(minutes=15)
IAM_EMAILS_PER_ADDRESS_PER_HOUR = env("IAM_EMAILS_PER_ADDRESS_PER_HOUR", 3, int)
IAM_OAUTH_STARTS_PER_IP_PER_MINUTE = env("IAM_OAUTH_STARTS_PER_IP_PER_MINUTE", 30, int)
IAM_WEBHOOK_ALLOW_PRIVATE = env("IAM_WEBHOOK_ALLOW_PRIVATE", DEBUG or TESTING, bool)
IAM_WEBHOOK_TIMEOUT_SECONDS = 5
IAM_WEBHOOK_RETRY_HOURS = 24
# `manage.py cleanup` deletes delivered outbox messages processed longer ago than this.
IAM_OUTBOX_RETENTION_DAYS = env("IAM_OUTBOX_RETENTION_DAYS", 7, int)

# The key that encrypts client secrets at rest (CONTRACT 7): derived from SECRET_KEY when unset.
IAM_ENCRYPTION_KEY = env(
    "IAM_ENCRYPTION_KEY",
    base64.urlsafe_b64encode(hashlib.sha256(f"iam-encryption:{SECRET_KEY}".encode()).digest()).decode(),
)

# OAuth provider idp_a (CONTRACT 10).
IAM_IDP_A_CLIENT_ID = env("IAM_IDP_A_CLIENT_ID", "")
IAM_IDP_A_CLIENT_SECRET = env("IAM_IDP_A_CLIENT_SECRET", "")
IAM_IDP_A_AUTHORIZE_URL = env("IAM_IDP_A_AUTHORIZE_URL", "")
IAM_IDP_A_TOKEN_URL = env("IAM_IDP_A_TOKEN_URL", "")
IAM_IDP_A_USERINFO_URL = env("IAM_IDP_A_USERINFO_URL", "")
IAM_IDP_A_SCOPE = env("IAM_IDP_A_SCOPE", "openid email profile")
IAM_OAUTH_REDIRECT_ALLOWLIST = env("IAM_OAUTH_REDIRECT_ALLOWLIST", [], list)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}
