"""The internals of uvicorn, uvicorn-worker and httptools that iam/server/ leans on (pinned in
pyproject.toml to the minor versions tested): when an upgrade moves one, this fails by name, before any
behaviour quietly changes."""

import inspect

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState
from uvicorn_worker import UvicornWorker


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_protocol_methods_overridden_keep_their_signatures():
    expected = {
        "connection_made": ["self", "transport"],
        "connection_lost": ["self", "exc"],
        "data_received": ["self", "data"],
        "on_message_begin": ["self"],
        "on_url": ["self", "url"],
        "on_header": ["self", "name", "value"],
        "on_headers_complete": ["self"],
        "on_body": ["self", "body"],
        "on_message_complete": ["self"],
        "send_400_response": ["self", "msg"],  # what uvicorn answers a request httptools refuses
    }
    for name, arguments in expected.items():
        assert parameters(getattr(HttpToolsProtocol, name)) == arguments, name


def test_the_protocol_state_read_is_there():
    source = inspect.getsource(HttpToolsProtocol)
    for attribute in ("self.connections", "self.server_state", "self.cycle", "self.pipeline", "self.client"):
        assert attribute in source, attribute
    assert "except httptools.HttpParserError:" in source and "self.send_400_response(" in source
    assert "RequestResponseCycle(" in source and "transport=self.transport" in source
    assert set(vars(ServerState())) >= {"connections", "tasks", "default_headers"}
    cycle = inspect.getsource(RequestResponseCycle)
    for attribute in ("self.response_complete", "self.response_started", "self.more_body", "self.keep_alive"):
        assert attribute in cycle, attribute
    # A send waits while the connection's buffer is full, and returns at once once it is gone.
    assert "await self.flow.drain()" in cycle and "if self.disconnected:" in cycle
    assert {"drain", "pause_writing", "resume_writing"} <= set(vars(FlowControl))
    assert hasattr(httptools, "HttpParserError")


def test_the_worker_hooks_used_are_there():
    source = inspect.getsource(UvicornWorker)
    assert "config_kwargs.update(self.CONFIG_KWARGS)" in source and "self.config = Config(" in source
    assert '"callback_notify": self.callback_notify' in source
    assert "self.config.app = self.wsgi" in source  # the ASGI application is the worker's `wsgi`
    for name in ("http", "ws", "loop", "interface", "lifespan", "timeout_notify", "callback_notify"):
        assert name in parameters(Config.__init__), name
