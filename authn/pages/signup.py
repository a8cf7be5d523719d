"""`/signup` (docs/pages.md#self-service-pages): `Name`, `Email`, `Password`, `Create account`, then
`Check your email`, whether or not the address already had an account (that one is told by e-mail).
The rules are `services.sign_up`'s: `auth/register`'s account, password rules and per-address limit."""

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from iam.http import pages
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip

from .. import services
from .common import wait_page
from .email_links import check_email
from .forms import SignupForm, password_rule_message


@pages.hosted_page
@sensitive_post_parameters("password")
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, SignupForm(initial={"email": request.GET.get("email", "")[:254]}))
    form = SignupForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    email = form.cleaned_data["email"]
    try:
        services.sign_up(
            email=email,
            password=form.cleaned_data["password"],
            name=form.cleaned_data["name"],
            ip=client_ip(request),
        )
    except ApiError as exc:
        if exc.status == 429:
            return wait_page(request, exc.headers["Retry-After"])
        form.add_error("password", password_rule_message(exc.message))
        return _page(request, form, status=400)
    message = _("We've sent an email to %(email)s. Open the link in it to finish.") % {"email": email}
    return check_email(request, message)


def _page(request: HttpRequest, form: SignupForm, *, status: int = 200) -> HttpResponse:
    return pages.render(request, "authn/signup.html", {"form": form}, status=status)
