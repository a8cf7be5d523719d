"""The SAML 2.0 work of a `saml` connection (docs/saml.md), done by OneLogin's python3-saml toolkit with
xmlsec: reading the IdP's metadata, the service's own (SP) metadata, the AuthnRequest sent by the
HTTP-Redirect binding, and the checks of a Response at the assertion consumer service. The toolkit runs in
strict mode; what it leaves to its caller is checked here, each where it is named in `check_response`
(docs/saml.md#the-checks)."""

import base64
import binascii
import hashlib
import re
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from onelogin.saml2.authn_request import OneLogin_Saml2_Authn_Request
from onelogin.saml2.constants import OneLogin_Saml2_Constants as Saml
from onelogin.saml2.idp_metadata_parser import OneLogin_Saml2_IdPMetadataParser
from onelogin.saml2.response import OneLogin_Saml2_Response
from onelogin.saml2.settings import OneLogin_Saml2_Settings
from onelogin.saml2.utils import OneLogin_Saml2_Utils
from onelogin.saml2.xml_utils import OneLogin_Saml2_XML

from authn.oauth_provider import _is_loopback_http

from .models import SsoConnection

SKEW_SECONDS = 120  # NotBefore / NotOnOrAfter, for Conditions and SubjectConfirmationData alike
METADATA_MAX_CHARS = 256 * 1024
ENTITY_ID_MAX = 1024
URL_MAX = 2048
TRANSIENT = "urn:oasis:names:tc:SAML:2.0:nameid-format:transient"
LAST_SECOND = 253402300799  # 9999-12-31T23:59:59Z, the last time a datetime holds


class InvalidMetadata(Exception):
    """The reason words the 400 `invalid idp metadata: <reason>`."""


class Refused(Exception):
    """A response the service does not accept; the reason goes to the audit log, never to the browser."""


# No DTD, no entity declarations (docs/saml.md#the-checks): refused on the bytes, before any parser sees
# them. The toolkit's parser forbids both as well; this also names the reason. A document in another
# encoding than UTF-8 could spell a declaration in bytes this does not see, so it is refused too.
_DECLARATION = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY|ELEMENT|ATTLIST|NOTATION)", re.IGNORECASE)
_ENCODING = re.compile(rb"""\A(?:\xef\xbb\xbf)?\s*<\?xml[^>]*?\bencoding\s*=\s*["']([^"']*)["']""")
_UTF8 = {b"utf-8", b"utf8"}


def refuse_dtd(document: bytes) -> str | None:
    """Why `document` may not be parsed, or None."""
    declared = _ENCODING.match(document)
    if b"\x00" in document or (declared and declared.group(1).lower() not in _UTF8):
        return "the document is not utf-8"
    try:
        document.decode("utf-8")
    except UnicodeDecodeError:
        return "the document is not utf-8"
    if _DECLARATION.search(document):
        return "the document holds a DTD or entity declarations"
    return None


# The IdP's metadata


@dataclass(frozen=True)
class IdpMetadata:
    entity_id: str
    sso_url: str
    certificates: list[str]  # base64 DER, each a valid X.509 certificate


def _secure(url: str) -> bool:
    """https, or plain http on loopback (tests, local development): the rule of every provider URL."""
    return url.startswith("https://") or _is_loopback_http(url)


def _signing_certificates(document: Any) -> list[str]:
    """The certificates of the IdP's KeyDescriptors for signing (`use="signing"` or no `use`)."""
    found = OneLogin_Saml2_XML.query(
        document,
        "/md:EntityDescriptor/md:IDPSSODescriptor/md:KeyDescriptor[not(contains(@use, 'encryption'))]"
        "/ds:KeyInfo/ds:X509Data/ds:X509Certificate",
    )
    texts = ("".join((OneLogin_Saml2_XML.element_text(node) or "").split()) for node in found)
    return list(dict.fromkeys(texts))


def read_metadata(document: str) -> IdpMetadata:
    """The IdP's entity id, its single sign-on URL for the HTTP-Redirect binding and its signing
    certificates, read by the toolkit's metadata parser; one entity with one IDPSSODescriptor."""
    if len(document) > METADATA_MAX_CHARS:
        raise InvalidMetadata(f"the document is longer than {METADATA_MAX_CHARS} characters")
    data = document.encode("utf-8", "surrogatepass")
    reason = refuse_dtd(data)
    if reason:
        raise InvalidMetadata(reason)
    try:
        root = OneLogin_Saml2_XML.to_etree(data)
        parsed = OneLogin_Saml2_IdPMetadataParser.parse(data, required_sso_binding=Saml.BINDING_HTTP_REDIRECT)
    except Exception as exc:  # lxml's syntax errors, the toolkit's own refusals
        raise InvalidMetadata("not a well-formed xml document") from exc
    if root.tag != f"{{{Saml.NS_MD}}}EntityDescriptor":
        raise InvalidMetadata("the document must be one EntityDescriptor")
    if len(OneLogin_Saml2_XML.query(root, "/md:EntityDescriptor/md:IDPSSODescriptor")) != 1:
        raise InvalidMetadata("the entity must have one IDPSSODescriptor")
    idp = parsed.get("idp", {})
    entity_id = idp.get("entityId") or ""
    if not entity_id or len(entity_id) > ENTITY_ID_MAX:
        raise InvalidMetadata(f"entityID missing or longer than {ENTITY_ID_MAX} characters")
    sso_url = idp.get("singleSignOnService", {}).get("url") or ""
    if not sso_url:
        raise InvalidMetadata("no SingleSignOnService with the HTTP-Redirect binding")
    if not _secure(sso_url) or len(sso_url) > URL_MAX or urlsplit(sso_url).fragment:
        raise InvalidMetadata("the SingleSignOnService location must be an https url")
    certificates = _signing_certificates(root)
    if not certificates:
        raise InvalidMetadata("no signing certificate")
    for certificate in certificates:
        try:
            x509.load_der_x509_certificate(base64.b64decode(certificate, validate=True))
        except (ValueError, binascii.Error) as exc:
            raise InvalidMetadata("a signing certificate is not an X.509 certificate") from exc
    return IdpMetadata(entity_id=entity_id, sso_url=sso_url, certificates=certificates)


# The toolkit's settings for one connection (docs/saml.md#how-the-toolkit-is-set-up)


def toolkit_settings(connection: SsoConnection) -> OneLogin_Saml2_Settings:
    return OneLogin_Saml2_Settings(
        {
            "strict": True,  # every check of the response, not the signature alone
            "debug": False,
            "sp": {
                "entityId": connection.sp_entity_id,
                "assertionConsumerService": {"url": connection.acs_url, "binding": Saml.BINDING_HTTP_POST},
                "NameIDFormat": Saml.NAMEID_EMAIL_ADDRESS,
            },
            "idp": {
                "entityId": connection.idp_entity_id,
                "singleSignOnService": {"url": connection.idp_sso_url, "binding": Saml.BINDING_HTTP_REDIRECT},
                "x509certMulti": {"signing": list(connection.idp_certificates)},
            },
            "security": {
                # The assertion or the whole response signed by a certificate of the metadata: the toolkit
                # refuses a response with neither, whatever these two say.
                "wantAssertionsSigned": False,
                "wantMessagesSigned": False,
                "rejectDeprecatedAlgorithm": True,  # no SHA-1 signature or digest
                "wantNameId": True,
                "wantAttributeStatement": False,  # the NameID may be all an IdP sends
                "requestedAuthnContext": False,  # the IdP's own way of signing in (MFA, passwordless)
                "rejectUnsolicitedResponsesWithInResponseTo": True,
                "authnRequestsSigned": False,
                "signatureAlgorithm": Saml.RSA_SHA256,
                "digestAlgorithm": Saml.SHA256,
                "allowSingleLabelDomains": True,  # IAM_PUBLIC_URL may name an intranet host (`http://iam`)
            },
        },
        sp_validation_only=False,
    )


def sp_metadata(connection: SsoConnection) -> str:
    """The service's metadata for the connection's IdP (its entity id, the ACS, the NameID format)."""
    metadata = toolkit_settings(connection).get_sp_metadata()
    return metadata.decode() if isinstance(metadata, bytes) else metadata


def request_id(nonce: str) -> str:
    """The AuthnRequest's ID for a login whose state holds `nonce` (an xsd:ID starts with a letter or
    an underscore; the nonce's URL-safe characters may follow)."""
    return f"_{nonce}"


class _AuthnRequest(OneLogin_Saml2_Authn_Request):
    """The toolkit's AuthnRequest with the ID the login's state keeps (the toolkit's hook for it)."""

    def __init__(self, settings: OneLogin_Saml2_Settings, given_id: str):
        self.given_id = given_id
        super().__init__(settings, set_nameid_policy=True)

    def _generate_request_id(self) -> str:
        return self.given_id


def request_url(connection: SsoConnection, *, authn_request_id: str, relay_state: str) -> str:
    """The IdP's single sign-on URL with the AuthnRequest (HTTP-Redirect binding: deflated, base64) and
    the RelayState that must come back with the response."""
    request = _AuthnRequest(toolkit_settings(connection), authn_request_id)
    return OneLogin_Saml2_Utils.redirect(
        connection.idp_sso_url, {"SAMLRequest": request.get_request(), "RelayState": relay_state}
    )


# The response


@dataclass(frozen=True)
class Asserted:
    """What a checked response says of the person: the NameID, the address (the NameID when its format is
    e-mail, else the `email` attribute) and a display name, and the assertion's id and expiry."""

    name_id: str
    email: str | None
    name: str | None
    assertion_id: str
    expires_at: datetime


# The toolkit tests time conditions against its own clock with no allowance for SubjectConfirmationData
# (python3-saml 1.16). It reads the time through `OneLogin_Saml2_Utils.now`, which here answers the
# instant this module chose for the response being checked (`_instant_for`), and the real time otherwise.
_instant: ContextVar[int | None] = ContextVar("saml_instant", default=None)
_real_now = OneLogin_Saml2_Utils.now


def _now() -> int:
    instant = _instant.get()
    return _real_now() if instant is None else instant


OneLogin_Saml2_Utils.now = staticmethod(_now)
Saml.ALLOWED_CLOCK_DRIFT = 0  # the skew is in the chosen instant


def _times(document: Any) -> tuple[list[int], list[int]]:
    """The NotBefore and NotOnOrAfter values of the assertion's Conditions and SubjectConfirmationData."""
    assertion = "/samlp:Response/saml:Assertion"
    nodes = OneLogin_Saml2_XML.query(
        document,
        f"{assertion}/saml:Conditions"
        f" | {assertion}/saml:Subject/saml:SubjectConfirmation/saml:SubjectConfirmationData",
    )
    before, after = [], []
    try:
        for node in nodes:
            if node.get("NotBefore"):
                before.append(OneLogin_Saml2_Utils.parse_SAML_to_time(node.get("NotBefore")))
            if node.get("NotOnOrAfter"):
                after.append(OneLogin_Saml2_Utils.parse_SAML_to_time(node.get("NotOnOrAfter")))
    except ValueError as exc:
        raise Refused("a NotBefore or NotOnOrAfter is not a time") from exc
    return before, after


def _instant_for(document: Any, now: int) -> int:
    """The instant the toolkit checks every time condition at: now, or the nearest instant within the
    skew at which every NotBefore has come and no NotOnOrAfter has passed. A response whose conditions
    hold at no instant within two minutes of now fails the toolkit's checks at whichever it gets."""
    before, after = _times(document)
    instant = max([now, *before])
    if after:
        instant = min(instant, min(after) - 1)
    return max(now - SKEW_SECONDS, min(now + SKEW_SECONDS, instant))


def _request_data(connection: SsoConnection) -> dict:
    """The toolkit's view of the request: the ACS URL the service publishes, never the Host header."""
    url = urlsplit(connection.acs_url)
    https = "on" if url.scheme == "https" else "off"
    return {"https": https, "http_host": url.netloc, "script_name": url.path}


def _decoded(saml_response: str) -> bytes:
    try:
        return base64.b64decode(saml_response, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Refused("SAMLResponse is not base64") from exc


def check_response(connection: SsoConnection, saml_response: str, *, authn_request_id: str) -> Asserted:
    """The response posted to the connection's ACS, accepted only when every check of docs/saml.md#the-checks
    holds (the toolkit's and the ones below); else `Refused` with the reason."""
    document = _decoded(saml_response)
    reason = refuse_dtd(document)
    if reason:
        raise Refused(reason)
    try:
        response = OneLogin_Saml2_Response(
            toolkit_settings(connection), base64.b64encode(document).decode()
        )  # the bytes screened above, and no others
        token = _instant.set(_instant_for(response.document, OneLogin_Saml2_Utils.now()))
        try:
            # Strict mode: the signature by a certificate of the metadata (and where it sits: no wrapping),
            # exactly one assertion, the schema, Issuer, Audience (when present), Destination (when
            # present), InResponseTo (when present), the time conditions, a bearer SubjectConfirmation.
            response.is_valid(_request_data(connection), request_id=authn_request_id, raise_exceptions=True)
        finally:
            _instant.reset(token)
        name_id = response.get_nameid()
        name_id_format = response.get_nameid_format()
        attributes = response.get_attributes()
        assertion_id = response.get_assertion_id()
    except Refused:
        raise
    except Exception as exc:  # the toolkit's refusals, and lxml's for what it cannot parse
        raise Refused(f"response refused: {str(exc)[:300]}") from exc
    _check_what_the_toolkit_leaves(connection, response, authn_request_id)
    if not name_id or not assertion_id:
        raise Refused("no NameID or no assertion id")
    if name_id_format == TRANSIENT:
        raise Refused("a transient NameID names nobody twice")
    email = name_id if name_id_format == Saml.NAMEID_EMAIL_ADDRESS else _first(attributes, "email")
    _, after = _times(response.document)
    return Asserted(
        name_id=name_id,
        email=email,
        name=_first(attributes, "name") or _first(attributes, "displayName"),
        assertion_id=assertion_id,
        expires_at=datetime.fromtimestamp(min(min(after) + SKEW_SECONDS, LAST_SECOND), UTC),
    )


def _first(attributes: dict, name: str) -> str | None:
    values = attributes.get(name) or []
    return values[0] if values and isinstance(values[0], str) else None


def _check_what_the_toolkit_leaves(connection: SsoConnection, response: Any, authn_request_id: str) -> None:
    """The toolkit accepts a response without Destination, without InResponseTo (unsolicited) and without
    Audience, and a SubjectConfirmationData without Recipient or NotOnOrAfter; it compares Destination
    and Recipient to the ACS URL as a prefix and a substring; and it needs one SubjectConfirmation and
    one AudienceRestriction to hold, not each. Each of those is refused here. (It has already refused a
    response without a bearer SubjectConfirmation that holds, and one whose SubjectConfirmationData
    answers another request.)"""
    document = response.document
    if document.get("Destination") is None:
        raise Refused("Destination missing")
    if document.get("Destination") != connection.acs_url:
        raise Refused("Destination is not the ACS URL")
    if response.get_in_response_to() != authn_request_id:  # None: unsolicited
        raise Refused("InResponseTo does not name the request of this login")
    assertions = OneLogin_Saml2_XML.query(document, "/samlp:Response/saml:Assertion")
    if len(assertions) != 1:  # the toolkit counted them already: the checks below read this one
        raise Refused("the response must hold exactly one assertion")
    (assertion,) = assertions
    bearer = f"saml:Subject/saml:SubjectConfirmation[@Method='{Saml.CM_BEARER}']"
    confirmations = OneLogin_Saml2_XML.query(assertion, f"{bearer}/saml:SubjectConfirmationData")
    for data in confirmations:
        if data.get("Recipient") != connection.acs_url:
            raise Refused("Recipient is not the ACS URL")
        if not data.get("NotOnOrAfter"):  # the profile requires it: an assertion that never expires
            raise Refused("SubjectConfirmationData without NotOnOrAfter")
    restrictions = OneLogin_Saml2_XML.query(assertion, "saml:Conditions/saml:AudienceRestriction")
    if not restrictions:
        raise Refused("no Audience")
    for restriction in restrictions:  # each restriction must be met (SAML Core 2.5.1.4)
        nodes = OneLogin_Saml2_XML.query(restriction, "saml:Audience")
        audiences = [OneLogin_Saml2_XML.element_text(node) for node in nodes]
        if connection.sp_entity_id not in audiences:
            raise Refused("Audience is not the SP entity id")


def assertion_digest(assertion_id: str) -> str:
    return hashlib.sha256(assertion_id.encode("utf-8", "surrogatepass")).hexdigest()
