"""Settings for the test suite: the production settings with IAM_TESTING on (locmem e-mail, development
SECRET_KEY allowed, private webhook endpoints allowed)."""

import os

os.environ.setdefault("IAM_TESTING", "1")

from iam.settings import *  # noqa: E402, F403
