"""accounts/hashers.py: a process runs at most `at_once` argon2id hashes side by side, checks and new
hashes alike (a web worker allows as many as it has cores: tests/iam/test_gunicorn_conf.py)."""

import threading
import time

import argon2
import pytest
from django.contrib.auth.hashers import check_password, make_password

from accounts import hashers


@pytest.fixture
def most_at_once(monkeypatch):
    """argon2's verify and hash made 50 ms longer, counting how many run at once: the most is kept."""
    monkeypatch.setattr(
        hashers.OwaspArgon2PasswordHasher, "at_once", hashers.OwaspArgon2PasswordHasher.at_once
    )
    running, most, lock = [0], [0], threading.Lock()

    def counted(real):
        def call(*args, **kwargs):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(argon2.PasswordHasher, "verify", counted(argon2.PasswordHasher.verify))
    monkeypatch.setattr(argon2.low_level, "hash_secret", counted(argon2.low_level.hash_secret))
    return most


@pytest.mark.parametrize("allowed", [1, 2])
def test_a_process_hashes_at_most_as_many_passwords_at_once_as_it_allows(most_at_once, allowed):
    encoded = make_password("correct horse battery")
    hashers.hash_at_most(allowed)
    checked, made = [], []
    threads = [
        *(
            threading.Thread(target=lambda: checked.append(check_password("correct horse battery", encoded)))
            for _ in range(3)
        ),
        threading.Thread(target=lambda: made.append(make_password("another password"))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most_at_once[0] == allowed
    assert checked == [True, True, True]
    assert check_password("another password", made[0])
