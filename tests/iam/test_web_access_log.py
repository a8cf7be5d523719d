"""iam/server/access.py: authorization codes, states and tokens stay out of the access log (they were
in its request line)."""

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from iam.server.access import redact_query
from iam.server.app import ReadWhole
from tests.iam.test_gunicorn_conf import load_conf
from tests.iam.web_servers import connect, read_answer, serving

SECRETS = ["c0de-SECRET", "st4te-SECRET", "t0ken-SECRET", "bearer-SECRET", "cookie-SECRET", "hint-SECRET"]


def app(environ, start_response):
    start_response("302 Found", [("Location", "http://localhost:3000/"), ("Content-Length", "0")])
    return [b""]


@pytest.fixture
def access_log(tmp_path):
    """gunicorn's logger with the service's access-log format, writing to a file."""
    cfg = Config()
    cfg.set("access_log_format", load_conf().access_log_format)
    path = tmp_path / "access.log"
    cfg.set("accesslog", str(path))
    return Logger(cfg), path


@pytest.mark.parametrize(
    "path",
    [
        "/auth/oauth/idp_a/callback?code=c0de-SECRET&state=st4te-SECRET&scope=openid",
        "/auth/sso/callback?state=st4te-SECRET&code=c0de-SECRET&iss=https%3A%2F%2Fidp.example&scope=openid",
        "/anything?access_token=t0ken-SECRET&id_token_hint=hint-SECRET&scope=openid",
        "/anything?Refresh_Token=t0ken-SECRET&mfa%5Ftoken=hint-SECRET&scope=openid",
    ],
)
def test_codes_states_and_tokens_stay_out_of_the_access_log(access_log, path):
    logger, file = access_log
    with serving(ReadWhole(app, threads=1, max_body=1024, buffer_bytes=1024 * 1024, log=logger)) as port:
        sock = connect(port)
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer bearer-SECRET\r\n"
            "Cookie: sessionid=cookie-SECRET\r\n"
            "Referer: https://idp.example/authorize?state=st4te-SECRET&client_id=abc\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        assert read_answer(sock)[0] == 302
        sock.close()
    for handler in logger.access_log.handlers:
        handler.flush()
    line = file.read_text()
    assert path.split("?")[0] in line and "[redacted]" in line and "scope=openid" in line
    assert "client_id=abc" in line  # the Referer, its state redacted
    for secret in SECRETS:
        assert secret not in line, line


def test_only_the_values_of_secret_parameters_are_redacted():
    query = "code=1&state=2&scope=openid&x_token=3&client_id=c&code_verifier=4&password=5&flag&error=e"
    assert redact_query(query) == (
        "code=[redacted]&state=[redacted]&scope=openid&x_token=[redacted]&client_id=c"
        "&code_verifier=[redacted]&password=[redacted]&flag&error=e"
    )
