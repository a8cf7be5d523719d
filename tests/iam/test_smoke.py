from tests.conftest import ok


def test_index(api):
    assert ok(api.get("/")) == "Welcome to the IAM service"
