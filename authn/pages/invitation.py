"""`/accept-invitation?token=` (docs/pages.md#self-service-pages): the page an invitation e-mail's link
opens. It shows the workspace, who invited and the roles; `Accept` and `Decline` for the invited address
signed in; signed out, `Sign in` and `Create account` for that address first, coming back here; signed
in as another address, whom the invitation is for and `Sign out`.

Every rule is the API's, through its services: the link names an open invitation as for
`invitations/accept` and `memberships/accept` (`linked_invitation`, `linked_membership`); only the
invited address accepts (a verified address equal to the invitation's, or the invited membership's own
account, as their Bearer paths); `Create account` is `invited_account` (created verified, or, for an
address registered without its mailbox, reclaimed: the hijack defence); accepting and declining are
`accept_email_invitation`, `decline_email_invitation`, `accept_invitation` and `decline_invitation`."""

from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from accounts.models import Account
from iam.http import pages
from iam.http.errors import ApiError
from iam.platform.addresses import client_ip, user_agent
from rbac.models import Invitation, Membership
from rbac.services.invitations import (
    accept_email_invitation,
    decline_email_invitation,
    linked_invitation,
    linked_membership,
)
from rbac.services.memberships import accept_invitation as accept_membership
from rbac.services.memberships import decline_invitation as decline_membership
from tenancy.models import Workspace

from .. import browser, services, tokens
from ..tokens import TokenError
from .common import disabled_page, go, page_url, workspace_brand
from .email_links import link_token, no_longer_valid
from .forms import InvitedAccountForm, password_rule_message


@dataclass
class Opened:
    """What a link names: an invitation by e-mail address, or an existing account's invited membership."""

    invitation: Invitation | None = None
    membership: Membership | None = None

    @property
    def record(self) -> Invitation | Membership:
        return self.invitation or self.membership

    @property
    def workspace(self) -> Workspace:
        return self.record.workspace

    @property
    def address(self) -> str:
        return self.invitation.email if self.invitation else self.membership.account.email

    @property
    def inviter(self) -> str:
        """Who invited (an invitation records it; an invited membership does not)."""
        invited_by = self.invitation.invited_by if self.invitation else None
        return (invited_by.name or invited_by.email) if invited_by else ""

    @property
    def project_name(self) -> str:
        """The project a project-scope invitation is for ("" for the whole workspace)."""
        project = self.record.project if self.record.project_id else None
        return project.name if project else ""

    def role_names(self) -> list[str]:
        return sorted(role.name for role in self.record.roles.all())

    def is_for(self, account: Account | None) -> bool:
        """Whether `account` may accept it as the API's signed-in paths let it: the invitation's address,
        verified; the invited membership's own account."""
        if account is None:
            return False
        if self.invitation is not None:
            return account.verified and account.email == self.invitation.email
        return account.pk == self.membership.account_id


def opened(token: str) -> Opened | None:
    try:
        claims = tokens.decode(token, types={tokens.MEMBERSHIP_INVITE})
    except TokenError:
        return None
    if "iid" in claims:
        invitation = linked_invitation(claims)
        return Opened(invitation=invitation) if invitation else None
    membership = linked_membership(claims)
    return Opened(membership=membership) if membership else None


@pages.hosted_page
@sensitive_post_parameters("password")
@require_http_methods(["GET", "POST"])
def accept_invitation(request: HttpRequest) -> HttpResponse:
    token = link_token(request)
    found = opened(token)
    if found is None:
        return no_longer_valid(request)
    here = f"/accept-invitation?{urlencode({'token': token})}"
    session = browser.current_session(request)
    account = session.account if session is not None else None
    if request.method == "GET":
        if request.GET.get("step") == "create" and account is None:
            return _create_page(request, found, InvitedAccountForm(), token)
        return _page(request, found, token, account)
    action = request.POST.get("action")
    if action == "signout":  # signed in as another address: out, then back here
        response = go(here)
        browser.end_browser_session(request, response)
        return response
    if action == "create":
        return _create(request, found, token, here, account)
    if action not in ("accept", "decline"):
        return _page(request, found, token, account, status=400)
    if not found.is_for(account):
        return _page(request, found, token, account, status=403)
    try:
        services.require_enabled(account)
        if action == "accept":
            _accept(found, account)
        else:
            _decline(found, account)
    except ApiError as exc:
        if exc.status == 403:
            return disabled_page(request)
        if exc.status == 409:  # already a member there
            return _finished(request, found, _("You are already a member"), _("You already belong here."))
        return no_longer_valid(request)  # used or withdrawn meanwhile
    if action == "accept":
        message = _("You are now a member of %(workspace)s.") % {"workspace": _name(found.workspace)}
        return _finished(request, found, _("Invitation accepted"), message)
    return _finished(request, found, _("Invitation declined"), _("You declined the invitation."))


def _accept(found: Opened, account: Account) -> None:
    if found.invitation is not None:
        accept_email_invitation(found.invitation, account=account)
    else:
        accept_membership(found.membership)


def _decline(found: Opened, account: Account) -> None:
    if found.invitation is not None:
        decline_email_invitation(found.invitation, account=account)
    else:
        decline_membership(found.membership)


def _create(
    request: HttpRequest, found: Opened, token: str, here: str, account: Account | None
) -> HttpResponse:
    """`Create account` for the invited address: the link proves the mailbox, so the account is created
    verified (or an unverified one holding the address is reclaimed), signed in, and back to the
    invitation."""
    if account is not None:
        return go(here)
    form = InvitedAccountForm(request.POST)
    if not form.is_valid():
        return _create_page(request, found, form, token, status=400)
    try:
        started = services.invited_account(
            found.address,
            password=form.cleaned_data["password"],
            name=form.cleaned_data["name"],
            ip=client_ip(request),
            user_agent=user_agent(request),
            browser=True,
        )[1]
    except ApiError as exc:
        if exc.status == 403:
            return disabled_page(request)
        form.add_error("password", password_rule_message(exc.message))
        return _create_page(request, found, form, token, status=400)
    if started is None:  # the address has an account already: its password signs in
        alert = _("You already have an account with this address. Sign in to accept.")
        return _create_page(request, found, InvitedAccountForm(), token, alert=alert, status=400)
    if isinstance(started, dict):  # a second factor is due: the sign-in pages ask for it
        return go(page_url("/signin", here, login_hint=found.address))
    return browser.signed_in(request, go(here), started)


def _context(found: Opened, token: str) -> dict:
    here = f"/accept-invitation?{urlencode({'token': token})}"
    return {
        "workspace_name": _name(found.workspace),
        "inviter": found.inviter,
        "roles": found.role_names(),
        "project": found.project_name,
        "address": found.address,
        "token": token,
        "here": here,
        "signin": page_url("/signin", here, login_hint=found.address),
        "create": f"{here}&step=create",
        "brand": workspace_brand(found.workspace),
    }


def _page(
    request: HttpRequest, found: Opened, token: str, account: Account | None, *, status: int = 200
) -> HttpResponse:
    if account is None:
        state = "signed_out"
    elif found.is_for(account):
        state = "invited"
    elif found.invitation is not None and account.email == found.address:
        state = "unverified"  # its own address, never confirmed: the API's signed-in path refuses it too
    else:
        state = "other"
    context = {**_context(found, token), "state": state, "account": account}
    return pages.render(request, "authn/invitation.html", context, status=status)


def _create_page(
    request: HttpRequest,
    found: Opened,
    form: InvitedAccountForm,
    token: str,
    *,
    alert: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {**_context(found, token), "form": form, "alert": alert}
    return pages.render(request, "authn/invitation_create.html", context, status=status)


def _finished(request: HttpRequest, found: Opened, heading: str, message: str) -> HttpResponse:
    context = {
        "heading": heading,
        "message": message,
        "next": browser.SIGNED_IN,
        "next_words": _("Continue"),
        "brand": workspace_brand(found.workspace),
    }
    return pages.render(request, "authn/done.html", context)


def _name(workspace: Workspace) -> str:
    return workspace_brand(workspace)["name"]
