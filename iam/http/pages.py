"""The machinery every hosted page shares (docs/pages.md): the language, the marks that give a page its
Content-Security-Policy and keep it out of the API's JSON error rendering (iam/http/middleware.py), no
caching, the header's brand, and the page a refused CSRF check answers. The pages themselves live in their
apps' `pages/` modules and extend `templates/pages/base.html`."""

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render as render_template
from django.utils import translation
from django.utils.cache import add_never_cache_headers, patch_vary_headers

# No inline script or style anywhere: the one stylesheet comes from the service; logos may be any https
# image (a workspace's branding); no page may be framed (clickjacking).
CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' https:; frame-ancestors 'none'"

# A response attribute, not a header: iam's middleware reads it without knowing any app.
PAGE_MARK = "iam_hosted_page"


def mark(response: HttpResponse) -> HttpResponse:
    """Makes `response` a hosted page's: it gets the page CSP, is never cached (it holds a CSRF token and
    says who is signed in) and keeps its own status page (a 403, a 429) instead of the API's JSON body."""
    setattr(response, PAGE_MARK, True)
    add_never_cache_headers(response)
    patch_vary_headers(response, ["Accept-Language", "Cookie"])
    return response


def is_page(response: HttpResponse) -> bool:
    return getattr(response, PAGE_MARK, False)


def brand() -> dict:
    """What the header shows when no workspace's branding applies: the service's name."""
    return {"name": settings.IAM_SITE_NAME, "logo_url": ""}


def render(
    request: HttpRequest,
    template: str,
    context: dict | None = None,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> HttpResponse:
    """A page: `template` (extending pages/base.html) rendered in the request's language."""
    context = {"brand": brand(), **(context or {})}
    with translation.override(language_of(request)):
        response = render_template(request, template, context, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return mark(response)


def language_of(request: HttpRequest) -> str:
    """The first of the browser's languages (`Accept-Language`) that LANGUAGES holds, else LANGUAGE_CODE."""
    return translation.get_language_from_request(request)


def hosted_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A page view: its answers (redirects included) carry the page marks, and its text its language."""

    @wraps(view)
    def page(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        with translation.override(language_of(request)):
            return mark(view(request, *args, **kwargs))

    return page


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """Django's CSRF_FAILURE_VIEW: a POST without a valid token (a form sent from elsewhere, or one whose
    cookie expired) gets a page of its own with status 403, the admin's included."""
    return render(request, "pages/403_csrf.html", status=403)
