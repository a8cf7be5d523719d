"""The production settings, with the benchmark's URLs: the service plus a trivial view to compare with."""

from iam.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
