"""The JWKS document is never empty, and the first keys are made once however many processes race for
them (docs/security.md#tokens; authn/keys.py): a fresh web tier of two gunicorn workers, switched to
EdDSA, gets 24 first reads at once on a database with no key; every answer publishes the same RS256 and
EdDSA keys, and the database holds one key of each."""

import threading

import psycopg
import requests

READS = 24
NO_KEYS = (
    "from authn.models import SigningKey; from iam import cache; "
    "SigningKey.objects.all().delete(); cache.delete_many(['jwt-signing-keys:version'])"
)


def test_the_first_keys_are_made_once_by_racing_processes(live):
    # No key anywhere, and every process's copy dropped (the version they are stamped with is gone).
    cleared = live.manage("shell", "-c", NO_KEYS)
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    tier = live.start_web(workers=2, env={"IAM_JWT_ALGORITHM": "EdDSA"})
    try:
        start = threading.Barrier(READS)
        answers: list = [None] * READS

        def read(i: int) -> None:
            start.wait()
            answers[i] = requests.get(f"{tier.url}/.well-known/jwks.json", timeout=30)

        threads = [threading.Thread(target=read, args=(i,)) for i in range(READS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        tier.stop()

    assert [answer.status_code for answer in answers] == [200] * READS
    documents = {
        tuple(sorted((key["alg"], key["kid"]) for key in answer.json()["keys"])) for answer in answers
    }
    assert len(documents) == 1, documents
    [published] = documents
    assert [alg for alg, _ in published] == ["EdDSA", "RS256"]
    with psycopg.connect(live.env["DATABASE_URL"]) as db:
        rows = db.execute("SELECT algorithm, kid FROM authn_signingkey WHERE retired_at IS NULL").fetchall()
    assert sorted(rows) == list(published)
    # The session's tier (HS256) publishes the same RS256 key.
    session_tier = requests.get(f"{live.url}/.well-known/jwks.json", timeout=30).json()["keys"]
    assert [(key["alg"], key["kid"]) for key in session_tier] == [published[1]]
