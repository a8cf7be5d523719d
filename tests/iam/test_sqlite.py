"""SQLite, the development database (`make run`), under concurrent writes: requests that
read then write in one transaction, as every write endpoint does, answered 500 `database is locked`.

The settings are evaluated in a child process with a file-based SQLite `DATABASE_URL` (the suite's own
database is whatever CI configured), and its threads run such transactions at once."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, os, sys, threading, time
import django
django.setup()
from django.conf import settings
from django.db import connection, transaction

options = settings.DATABASES["default"].get("OPTIONS", {})
if sys.argv[1] == "deferred":  # the settings as they were: Django's default DEFERRED transactions
    settings.DATABASES["default"]["OPTIONS"] = {}
with connection.cursor() as cursor:
    cursor.execute("CREATE TABLE hits (n integer)")
connection.close()

THREADS = 8
barrier = threading.Barrier(THREADS)
errors = []

def work():
    barrier.wait()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM hits")  # read first, as a service checks first
                time.sleep(0.05)
                cursor.execute("INSERT INTO hits VALUES (1)")
    except Exception as exc:
        errors.append(str(exc))
    finally:
        connection.close()

threads = [threading.Thread(target=work) for _ in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with connection.cursor() as cursor:
    cursor.execute("SELECT count(*) FROM hits")
    rows = cursor.fetchone()[0]
    cursor.execute("PRAGMA journal_mode")
    journal = cursor.fetchone()[0]
print(json.dumps({"options": options, "errors": errors, "rows": rows, "journal": journal}))
"""


def run(tmp_path: Path, mode: str) -> dict:
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "iam.settings",
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'dev.sqlite3'}",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sqlite_settings_queue_concurrent_writers(tmp_path):
    result = run(tmp_path, "immediate")
    assert result["options"] == {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    }
    assert result["journal"] == "wal"
    assert result["errors"] == []
    assert result["rows"] == 8


def test_without_them_concurrent_writers_fail(tmp_path):
    """The control: the same work with Django's default transactions is refused, so the test above
    proves the settings."""
    result = run(tmp_path, "deferred")
    assert result["errors"] and all("database is locked" in error for error in result["errors"])
    assert result["rows"] == 8 - len(result["errors"])
