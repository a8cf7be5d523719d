"""The machinery every hosted page shares (docs/pages.md): the language, the marks that give a page its
Content-Security-Policy and keep it out of the API's JSON error rendering (iam/http/middleware.py), no
caching, the header's brand, and the page a refused CSRF check answers. The pages themselves live in their
apps' `pages/` modules and extend `templates/pages/base.html`."""

import re
from collections.abc import Callable
from functools import lru_cache, wraps

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
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
    return {"name": settings.IAM_SITE_NAME, "logo_url": "", "stylesheet": ""}


# docs/pages.md#branding: a workspace's colour reaches its pages as a stylesheet of the service's own
# (`<link>`, allowed by `default-src 'self'`), never as an inline style the CSP would refuse. Its URL
# names the colour, so it reads nothing and is cached for ever.
ACCENT_PATH = "/pages/accent/{}.css"
_HEX = re.compile(r"[0-9a-f]{6}")
PAGE_BACKGROUND = (0xF3, 0xF4, 0xF6)  # --page in static/pages/pages.css, the lightest the accent sits on
WHITE = (0xFF, 0xFF, 0xFF)
TEXT_CONTRAST = 4.5  # WCAG 2.1 AA, 1.4.3: the accent is link text, and white text on the accent


def _luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG 2.1's relative luminance."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(channel) for channel in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _darker(rgb: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    return tuple(int(channel * factor) for channel in rgb)


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{channel:02x}" for channel in rgb)


@lru_cache(maxsize=256)
def accent_css(color: str) -> str:
    """The stylesheet of an accent `rrggbb`: the colour itself when links in it and white text on it pass
    WCAG AA on the pages' backgrounds, else the same hue darkened until they do (a pale brand colour
    stays legible)."""
    rgb = tuple(int(color[i : i + 2], 16) for i in (0, 2, 4))
    while contrast(rgb, PAGE_BACKGROUND) < TEXT_CONTRAST or contrast(rgb, WHITE) < TEXT_CONTRAST:
        rgb = _darker(rgb, 0.94)
    hover = _darker(rgb, 0.8)
    return f":root {{ --accent: {_hex(rgb)}; --accent-hover: {_hex(hover)}; }}\n"


def accent_stylesheet(request: HttpRequest, color: str) -> HttpResponse:
    if not _HEX.fullmatch(color):
        raise Http404
    response = HttpResponse(accent_css(color), content_type="text/css; charset=utf-8")
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    return response


def accent_url(color: str | None) -> str:
    """The accent stylesheet of a `#rrggbb` colour, or "" without one."""
    if not color or not _HEX.fullmatch(color.lstrip("#").lower()):
        return ""
    return ACCENT_PATH.format(color.lstrip("#").lower())


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
