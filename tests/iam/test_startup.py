"""docs/operations.md#required-settings: with DEBUG off the service refuses to start without SECRET_KEY,
IAM_JWT_SIGNING_KEY and REDIS_URL, naming the setting; DEBUG on keeps the embedded defaults. Each case is a
fresh process that loads the production settings (`iam.settings`, no IAM_TESTING), as gunicorn, celery and
manage.py do."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from iam import celery

REQUIRED = ("SECRET_KEY", "IAM_JWT_SIGNING_KEY", "REDIS_URL")
PRODUCTION = {
    "SECRET_KEY": "a-real-secret-key-for-this-test-0123456789",
    "IAM_JWT_SIGNING_KEY": "a-real-signing-key-for-this-test-0123456789",
    "REDIS_URL": "redis://127.0.0.1:1/0",  # settings only read it: nothing connects at start
}
SHOW = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.CACHES['default']['BACKEND'], s.CELERY_TASK_ALWAYS_EAGER)"
)


def start(code: str = SHOW, **variables: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DJANGO_SETTINGS_MODULE": "iam.settings",
        "DATABASE_URL": "sqlite:///:memory:",
        **variables,
    }
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("missing", "how"),
    [*((key, "unset") for key in REQUIRED), ("REDIS_URL", "empty"), ("SECRET_KEY", "empty")],
)
def test_debug_off_refuses_to_start_without_the_setting(missing, how):
    variables = {key: value for key, value in PRODUCTION.items() if key != missing}
    if how == "empty":
        variables[missing] = ""
    process = start(DEBUG="0", **variables)
    assert process.returncode != 0
    last_line = process.stderr.strip().splitlines()[-1]
    assert last_line.startswith(f"django.core.exceptions.ImproperlyConfigured: {missing} must be set"), (
        last_line
    )
    assert process.stdout == ""


def test_debug_off_refuses_the_built_in_secret_key():
    process = start(
        DEBUG="0", **{**PRODUCTION, "SECRET_KEY": "dev-insecure-secret-key-change-me-0123456789abcdef"}
    )
    assert process.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY must be set" in process.stderr


def test_debug_off_names_every_missing_setting():
    process = start(DEBUG="0")
    assert process.returncode != 0
    last_line = process.stderr.strip().splitlines()[-1]
    for key in ("SECRET_KEY", "IAM_JWT_SIGNING_KEY", "REDIS_URL"):
        assert f"{key} must be set (" in last_line
    assert "for development set DEBUG=1" in last_line


def test_debug_off_blames_only_what_is_missing():
    """With REDIS_URL set, the message does not send the reader looking for it."""
    process = start(DEBUG="0", REDIS_URL=PRODUCTION["REDIS_URL"])
    assert process.returncode != 0
    last_line = process.stderr.strip().splitlines()[-1]
    assert "SECRET_KEY must be set" in last_line
    assert "REDIS_URL" not in last_line


def test_debug_off_starts_with_all_three_and_uses_the_shared_cache():
    process = start(DEBUG="0", **PRODUCTION)
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["iam.platform.redis_cache.RedisCache", "False"]


def test_debug_on_keeps_the_embedded_defaults():
    process = start(DEBUG="1")
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["django.core.cache.backends.locmem.LocMemCache", "True"]


def test_the_wsgi_application_loads_every_endpoint_before_its_first_request():
    """gunicorn imports `iam.wsgi` when a worker starts: the URLconf and the endpoint modules are imported
    then, not in the time of the worker's first request."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DEBUG": "0",
        "DATABASE_URL": "sqlite:///:memory:",
        **PRODUCTION,
    }
    modules = "('rbac.api', 'accounts.api', 'clients.api', 'authn.admin')"
    show = f"import sys, iam.wsgi; print(*(m in sys.modules for m in {modules}))"
    process = subprocess.run(
        [sys.executable, "-c", show], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["True", "True", "True", "True"]


ADMIN_MODULES = [
    f"{app}.admin"
    for app in ("iam", "accounts", "tenancy", "rbac", "authn", "clients", "sso", "scim", "oidc")
]


def test_a_worker_starts_without_what_only_pages_and_domain_proofs_need():
    """A worker (and beat) sets Django up and imports the tasks, and serves no page: the admin's modules,
    with the forms, DRF and the SAML and WebAuthn libraries they import, are left to the URLconf
    (iam.apps.IamAdminConfig). They were 0.6 s of a worker's 1.5 s start. Nor does it check a domain's
    DNS proof: the start checks IAM_DNS_NAMESERVERS (sso.nameservers) without dnspython (sso.dns_proof),
    25 ms of a worker's start."""
    unneeded = [*ADMIN_MODULES, "sso.dns_proof", "dns"]
    show = (
        "import sys, django; from iam.celery import app; django.setup(); "
        "app.loader.import_default_modules(); "
        f"print(*(m in sys.modules for m in {unneeded!r}))"
    )
    process = start(show, DEBUG="1", IAM_DNS_NAMESERVERS="127.0.0.1:5353")
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["False"] * len(unneeded)


def test_the_admin_checks_cover_every_admin_module():
    """`manage.py check` may run the admin's checks before anything loads the URLconf: they import the
    admin modules themselves, so every ModelAdmin is checked."""
    show = (
        "import django; django.setup(); from django.core import checks; "
        "print(checks.run_checks(tags=['admin'])); "
        "from django.contrib import admin; from accounts.models import Account; "
        "print(admin.site.is_registered(Account))"
    )
    process = start(show, DEBUG="1")
    assert process.returncode == 0, process.stderr
    assert process.stdout.splitlines() == ["[]", "True"]


def test_a_starting_worker_skips_djangos_system_checks(monkeypatch):
    """Celery's Django fixup runs every system check in each worker that starts unless CELERY_SKIP_CHECKS
    is set (iam/celery.py): as long as Django's own start, which a worker replaced after a crash would wait
    before delivering again. `migrate`, in the release step, runs them."""
    from celery.fixups.django import DjangoWorkerFixup
    from django.core import checks

    def run_checks(*args, **kwargs):
        raise AssertionError("system checks ran at worker start")

    monkeypatch.setattr(checks, "run_checks", run_checks)
    monkeypatch.setattr(DjangoWorkerFixup, "django_setup", lambda self: None)
    DjangoWorkerFixup(celery.app).validate_models()


def test_a_started_worker_keeps_what_it_imported_out_of_the_collectors_scans():
    """Celery collects garbage before it forks each pool process: with Django's setup and the tasks frozen
    (`gc.freeze`, iam/celery.py) that scan skips them, and a worker replaced after a crash delivers
    sooner. A process of its own: the signal also installs Celery's Django fixup."""
    show = (
        "import gc, django; from celery import signals; from iam.celery import app; django.setup(); "
        "print(gc.get_freeze_count()); signals.worker_init.send(sender=None); print(gc.get_freeze_count())"
    )
    process = start(show, DEBUG="1")
    assert process.returncode == 0, process.stderr
    before, after = map(int, process.stdout.split())
    assert before == 0
    assert after > 10_000


def test_the_procfiles_worker_starts_with_the_collector_off_until_worker_init():
    """`python -m iam.worker` turns the garbage collector off before Celery's and Django's imports (180,000
    objects, collected again and again as they were made: about 0.1 s of a worker's start), and
    `worker_init` (iam/celery.py) turns it on again after the freeze, before the pool processes fork."""
    show = (
        "import gc, runpy, sys; from celery import signals; from celery.bin.worker import worker\n"
        "seen = []; worker.main = lambda **options: seen.append((gc.isenabled(), options['args']))\n"
        "sys.argv = ['iam.worker', '-c', '2']; runpy.run_module('iam.worker', run_name='__main__')\n"
        "signals.worker_init.send(sender=None); print(seen, gc.isenabled(), gc.get_freeze_count() > 0)"
    )
    process = start(show, DEBUG="1")
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == "[(False, ['-c', '2'])] True True"


@pytest.mark.parametrize(
    ("database_url", "variables", "options"),
    [
        ("postgres://iam@db.example:5432/iam", {}, {"server_side_binding": True, "prepare_threshold": 5}),
        ("postgres://iam@db.example:5432/iam", {"DB_PREPARED_STATEMENTS": "false"}, {}),
        ("sqlite:///:memory:", {}, {"transaction_mode": "IMMEDIATE"}),
    ],
)
def test_postgresql_prepares_repeated_statements_unless_turned_off(database_url, variables, options):
    """docs/operations.md#postgresql-prepared-statements: on PostgreSQL a statement a connection runs a fifth
    time is prepared; DB_PREPARED_STATEMENTS=false (behind a pooler that cannot follow prepared statements)
    binds on the client. SQLite has neither."""
    show = (
        "import django, json; django.setup(); from django.db import connection; "
        "print(json.dumps(connection.settings_dict['OPTIONS']))"
    )
    process = start(show, DEBUG="1", DATABASE_URL=database_url, **variables)
    assert process.returncode == 0, process.stderr
    shown = json.loads(process.stdout)
    assert {key: shown.get(key) for key in options} == options
    if "prepare_threshold" not in options:
        assert "server_side_binding" not in shown and "prepare_threshold" not in shown


def test_the_procfiles_worker_is_celerys_worker_command_without_the_umbrella_command():
    """`python -m iam.worker` (the Procfile's worker) takes `celery worker`'s options and starts the same
    worker, without importing Celery's other subcommands (`celery amqp`'s shell with prompt_toolkit):
    about 0.1 s less before a worker started in place of a crashed one delivers again."""
    procfile = (settings.BASE_DIR / "Procfile").read_text()
    assert "\nworker: python -m iam.worker --loglevel=INFO " in procfile
    umbrella = ("celery.bin.celery", "click_repl", "prompt_toolkit")
    show = (
        "import sys, runpy; sys.argv = ['iam.worker', '--help']\n"
        "try:\n    runpy.run_module('iam.worker', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        f"    print(exit.code, *(m in sys.modules for m in {umbrella!r}))"
    )
    process = start(show, DEBUG="1")
    assert process.returncode == 0, process.stderr
    *usage, last = process.stdout.splitlines()
    assert last == "0 False False False"
    usage = "\n".join(usage)
    assert "Usage: python -m iam.worker [OPTIONS]" in usage
    assert "--concurrency" in usage and "--without-mingle" in usage and "--loglevel" in usage
