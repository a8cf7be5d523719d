"""A SAML connection's own URLs (docs/saml.md): its SP metadata and its assertion consumer service."""

from uuid import UUID

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from iam.http.errors import error_response
from iam.platform.addresses import client_ip, user_agent

from .. import saml, saml_login
from ..models import SsoConnection


@require_GET
def saml_metadata(request: HttpRequest, connection_id: UUID) -> HttpResponse:
    """A SAML connection's SP metadata (docs/saml.md#the-values-to-copy), public like any metadata: its
    IdP reads the entity id, the ACS and the NameID format from it."""
    connection = SsoConnection.objects.filter(pk=connection_id, protocol=SsoConnection.Protocol.SAML).first()
    if connection is None:
        return error_response(404, "sso connection not found")
    return HttpResponse(saml.sp_metadata(connection), content_type="application/samlmetadata+xml")


@csrf_exempt  # the IdP's page posts here from its own origin; the RelayState binds the response instead
@require_POST
def saml_acs(request: HttpRequest, connection_id: UUID) -> HttpResponseRedirect:
    """A SAML connection's assertion consumer service (HTTP-POST binding): the browser arrives from the IdP
    and is sent on (303) to the client app, as from the OpenID callback; a login the hosted sign-in page
    started goes on to the SSO callback, where the page finishes it in the browser session."""
    form = request.POST.dict()
    target = saml_login.hand_over(connection_id, form) or saml_login.complete(
        connection_id, form, ip=client_ip(request), user_agent=user_agent(request)
    )
    response = HttpResponseRedirect(target, status=303)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
