from django.contrib.auth.hashers import Argon2PasswordHasher


class OwaspArgon2PasswordHasher(Argon2PasswordHasher):
    """argon2id at OWASP's first recommended setting (m=19 MiB, t=2, p=1): about a fifth of the cost of
    Django's defaults for the same resistance class. Hashes made with other parameters are upgraded at the
    next successful login (Django's `must_update`)."""

    time_cost = 2
    memory_cost = 19 * 1024
    parallelism = 1
