"""The WSGI application of one web tier in test_web_worker_limits.py: the project's own, with one more
path, `/test/hang`, whose request never ends (a loop in Python, holding no database statement: what
`IAM_STATEMENT_TIMEOUT_MS` cannot end). Not part of the service: gunicorn loads it by name in that test
only."""

import time

from iam.wsgi import application as project

HANG = "/test/hang"


def application(environ, start_response):
    if environ["PATH_INFO"] == HANG:
        while True:
            time.sleep(0.1)
    return project(environ, start_response)
