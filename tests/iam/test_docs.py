"""The API reference served at /docs: Swagger UI from static files of the service itself (nothing from
another origin), over the schema at /docs/schema; every operation shows an example request body, and no
description points the reader to documents they do not have."""

import re
from html.parser import HTMLParser

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client, override_settings
from drf_spectacular.generators import SchemaGenerator

from iam.http import docs
from tests.endpoints import ENDPOINTS


class _Assets(HTMLParser):
    """Every URL the page makes the browser load: script sources, stylesheets and icons."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline_scripts = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            if attrs.get("src"):
                self.urls.append(attrs["src"])
            else:
                self.inline_scripts += 1
        if tag == "link" and attrs.get("href"):
            self.urls.append(attrs["href"])
        if tag == "img" and attrs.get("src"):
            self.urls.append(attrs["src"])


def _assets(html: str) -> _Assets:
    parser = _Assets()
    parser.feed(html)
    return parser


def _is_same_origin(url: str) -> bool:
    return url.startswith("/") and not url.startswith("//")


@pytest.fixture(scope="module")
def schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def test_docs_page_loads_nothing_from_another_origin(db):
    response = Client().get("/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    page = _assets(html)
    assert page.urls, "the page loads Swagger UI's script and stylesheet"
    assert all(_is_same_origin(url) for url in page.urls), page.urls
    assert not re.search(r"https?://(?!testserver)", html), "no absolute URL of another origin in the page"
    assert any(url.endswith("swagger-ui-bundle.js") for url in page.urls)
    assert any(url.endswith("swagger-ui.css") for url in page.urls)
    # Each is a static file of the service (collectstatic gathers it; whitenoise serves it).
    for url in page.urls:
        assert finders.find(url.removeprefix(f"/{settings.STATIC_URL.lstrip('/')}")), url


def test_docs_page_needs_no_token_and_ignores_a_bad_one(db):
    response = Client().get("/docs", HTTP_AUTHORIZATION="Bearer not-a-token")
    assert response.status_code == 200


def test_the_schema_is_served(db):
    response = Client().get("/docs/schema?format=json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    assert "/workspace/create" in document["paths"]
    assert Client().get("/docs/schema").status_code == 200  # YAML by default


def test_the_schema_is_generated_once_per_process_and_format(db, monkeypatch):
    """Generating the document takes most of a second of CPU: anonymous callers must not be able to make
    the service spend it on every request."""
    calls = []
    original = docs.ApiSchema.generator_class.get_schema

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(docs.ApiSchema.generator_class, "get_schema", counting)
    monkeypatch.setattr(docs.ApiSchema, "_rendered", {})
    first = Client().get("/docs/schema")
    assert Client().get("/docs/schema").content == first.content
    assert len(calls) == 1
    assert Client().get("/docs/schema?format=json").json()["info"]["title"] == "IAM service"
    assert len(calls) == 2
    assert Client().get("/docs/schema?format=json").status_code == 200
    assert len(calls) == 2


def test_docs_render_with_debug_off_after_collectstatic(db, tmp_path, settings):
    """Production serves static files through whitenoise's manifest storage, which only knows the files
    `collectstatic` gathered: the page's URLs must be those hashed names, and collectstatic must pass."""
    settings.STATIC_ROOT = tmp_path
    storages = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    with override_settings(STORAGES=storages, DEBUG=False):
        call_command("collectstatic", "--noinput", verbosity=0)
        response = Client().get("/docs")
        assert response.status_code == 200
        urls = _assets(response.content.decode()).urls
    bundle = next(url for url in urls if "swagger-ui-bundle" in url)
    assert re.search(r"swagger-ui-bundle\.[0-9a-f]{12}\.js$", bundle), bundle
    assert (tmp_path / bundle.removeprefix("/static/")).is_file()


def _operations(schema: dict):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield path, method, operation


def test_every_operation_with_a_body_shows_an_example(schema):
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in _operations(schema)
        if "requestBody" in operation
        and not operation["requestBody"]["content"]["application/json"].get("examples")
    ]
    assert not missing, f"add `example_request = {{...}}` to the endpoint class of: {', '.join(missing)}"


@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_an_endpoint_example_is_a_valid_request(path):
    """The example is what the endpoint's own request serializer accepts, so it cannot drift from the
    shape it documents (references to records are checked later, by the endpoint)."""
    endpoint = ENDPOINTS[path]
    example = endpoint.example_request
    assert isinstance(example, dict), f"{endpoint.__name__} has no example_request"
    if endpoint.request_serializer is not None:
        serializer = endpoint.request_serializer(data=example, context={"request": None})
        assert serializer.is_valid(), (path, serializer.errors)


def test_no_description_cites_the_internal_documents(schema):
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")
        elif isinstance(node, str) and re.search(r"\b(SPEC|CONTRACT)\b", node):
            found.append(f"{where}: {node[:80]!r}")

    walk(schema, "")
    assert not found, "\n".join(found)
