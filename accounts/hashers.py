import os
import threading

from django.contrib.auth.hashers import Argon2PasswordHasher


class OwaspArgon2PasswordHasher(Argon2PasswordHasher):
    """argon2id at OWASP's first recommended setting (m=19 MiB, t=2, p=1): about a fifth of the cost of
    Django's defaults for the same resistance class. Hashes made with other parameters are upgraded at the
    next successful login (Django's `must_update`).

    At most `at_once` hashes run side by side in a process (`hash_at_most`: a web worker allows as many as
    it has cores, iam/server/gunicorn.conf.py). A hash fills 19 MiB; two on one core take turns, each turn
    evicting the other's memory from the caches, and each costs about a tenth more CPU: a web worker's
    threads outnumber its cores (`python -m bench.hashing`, docs/performance.md)."""

    time_cost = 2
    memory_cost = 19 * 1024
    parallelism = 1
    at_once = threading.BoundedSemaphore(os.cpu_count() or 1)

    def encode(self, password, salt):
        with self.at_once:
            return super().encode(password, salt)

    def verify(self, password, encoded):
        with self.at_once:
            return super().verify(password, encoded)


def hash_at_most(count: int) -> None:
    """Lets `count` password hashes run at once in this process, from now on."""
    OwaspArgon2PasswordHasher.at_once = threading.BoundedSemaphore(count)
