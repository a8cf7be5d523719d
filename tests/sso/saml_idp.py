"""A SAML identity provider in the test's hands: its key and certificate made with `cryptography`, its
metadata, and responses the test writes and signs itself with the toolkit's signing utility (xmlsec), each
part of which a test can break. `Spec` says what a response holds; `response_xml` writes it, `sign`
signs its assertion, the whole response, both or neither."""

import base64
import datetime as dt
import secrets
import zlib
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape, quoteattr

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from onelogin.saml2.constants import OneLogin_Saml2_Constants as Saml
from onelogin.saml2.utils import OneLogin_Saml2_Utils

EMAIL_FORMAT = Saml.NAMEID_EMAIL_ADDRESS
PERSISTENT = Saml.NAMEID_PERSISTENT
TRANSIENT = Saml.NAMEID_TRANSIENT
REDIRECT = Saml.BINDING_HTTP_REDIRECT
POST = Saml.BINDING_HTTP_POST


def new_signing_pair() -> tuple[str, str]:
    """A key and its self-signed certificate, both PEM."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test idp")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return key_pem, certificate.public_bytes(serialization.Encoding.PEM).decode()


def certificate_body(certificate_pem: str) -> str:
    """The base64 DER of a PEM certificate, as metadata carries it."""
    return "".join(line for line in certificate_pem.strip().splitlines() if "CERTIFICATE" not in line)


def saml_time(seconds_from_now: float) -> str:
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Spec:
    """A response to `request_id` for the connection whose ACS and SP entity id are given. None leaves a
    part out; times are seconds from now."""

    acs_url: str
    sp_entity_id: str
    request_id: str | None
    issuer: str
    name_id: str = "alice@acme.test"
    name_id_xml: str | None = None  # the NameID's content as written (markup and all), instead of name_id
    name_id_format: str = EMAIL_FORMAT
    attributes: dict = field(default_factory=dict)
    destination: str | None = "ACS"  # "ACS": the acs_url
    recipient: str | None = "ACS"
    in_response_to: str | None = "REQUEST"  # "REQUEST": the request_id
    scd_in_response_to: str | None = "REQUEST"
    audience: str | None = "SP"  # "SP": the sp_entity_id
    other_restriction: str | None = None  # a second AudienceRestriction, naming this audience
    conditions_not_before: float | None = -30
    conditions_not_on_or_after: float | None = 300
    scd_not_before: float | None = None
    scd_not_on_or_after: float | None = 300
    assertion_issuer: str | None = None  # None: the issuer
    status: str = Saml.STATUS_SUCCESS
    assertion_id: str = field(default_factory=lambda: "_a" + secrets.token_hex(16))
    response_id: str = field(default_factory=lambda: "_r" + secrets.token_hex(16))

    def but(self, **changes) -> "Spec":
        return replace(self, **changes)


def _attribute(name: str, value) -> str:
    return (
        f"<saml:Attribute Name={quoteattr(name)}>"
        f'<saml:AttributeValue xsi:type="xs:string">{escape(value)}</saml:AttributeValue></saml:Attribute>'
    )


def _optional(name: str, value) -> str:
    return "" if value is None else f" {name}={quoteattr(value)}"


def assertion_xml(spec: Spec) -> str:
    acs = spec.acs_url
    recipient = acs if spec.recipient == "ACS" else spec.recipient
    scd_irt = spec.request_id if spec.scd_in_response_to == "REQUEST" else spec.scd_in_response_to
    audience = spec.sp_entity_id if spec.audience == "SP" else spec.audience
    scd = (
        _optional("NotBefore", None if spec.scd_not_before is None else saml_time(spec.scd_not_before))
        + _optional(
            "NotOnOrAfter", None if spec.scd_not_on_or_after is None else saml_time(spec.scd_not_on_or_after)
        )
        + _optional("Recipient", recipient)
        + _optional("InResponseTo", scd_irt)
    )
    conditions = _optional(
        "NotBefore", None if spec.conditions_not_before is None else saml_time(spec.conditions_not_before)
    ) + _optional(
        "NotOnOrAfter",
        None if spec.conditions_not_on_or_after is None else saml_time(spec.conditions_not_on_or_after),
    )
    restriction = "".join(
        f"<saml:AudienceRestriction><saml:Audience>{escape(name)}</saml:Audience></saml:AudienceRestriction>"
        for name in (audience, spec.other_restriction)
        if name is not None
    )
    attributes = "".join(_attribute(name, value) for name, value in spec.attributes.items())
    statement = f"<saml:AttributeStatement>{attributes}</saml:AttributeStatement>" if attributes else ""
    return (
        '<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'ID="{spec.assertion_id}" Version="2.0" IssueInstant="{saml_time(0)}">'
        f"<saml:Issuer>{escape(spec.assertion_issuer or spec.issuer)}</saml:Issuer>"
        "<saml:Subject>"
        f"<saml:NameID Format={quoteattr(spec.name_id_format)}>"
        f"{escape(spec.name_id) if spec.name_id_xml is None else spec.name_id_xml}</saml:NameID>"
        f'<saml:SubjectConfirmation Method="{Saml.CM_BEARER}">'
        f"<saml:SubjectConfirmationData{scd}/></saml:SubjectConfirmation>"
        "</saml:Subject>"
        f"<saml:Conditions{conditions}>{restriction}</saml:Conditions>"
        f'<saml:AuthnStatement AuthnInstant="{saml_time(-5)}" SessionIndex="_s1"><saml:AuthnContext>'
        "<saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"
        "</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>"
        f"{statement}</saml:Assertion>"
    )


def response_xml(spec: Spec, assertion: str) -> str:
    destination = spec.acs_url if spec.destination == "ACS" else spec.destination
    irt = spec.request_id if spec.in_response_to == "REQUEST" else spec.in_response_to
    return (
        '<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" '
        'xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" '
        f'ID="{spec.response_id}" Version="2.0" IssueInstant="{saml_time(0)}"'
        f"{_optional('Destination', destination)}{_optional('InResponseTo', irt)}>"
        f"<saml:Issuer>{escape(spec.issuer)}</saml:Issuer>"
        f'<samlp:Status><samlp:StatusCode Value="{spec.status}"/></samlp:Status>'
        f"{assertion}</samlp:Response>"
    )


class TestIdp:
    """One IdP: its entity id, single sign-on URL and signing pair."""

    __test__ = False

    def __init__(
        self, entity_id: str = "https://idp.acme.test/saml", sso_url: str = "https://idp.acme.test/sso"
    ):
        self.entity_id = entity_id
        self.sso_url = sso_url
        self.key, self.certificate = new_signing_pair()

    def metadata(self, *, certificates: list[str] | None = None, use: str | None = "signing",
                 binding: str = REDIRECT, prologue: str = "") -> str:  # fmt: skip
        bodies = certificates if certificates is not None else [self.certificate]
        use_attribute = "" if use is None else f' use="{use}"'
        keys = "".join(
            f"<md:KeyDescriptor{use_attribute}><ds:KeyInfo><ds:X509Data><ds:X509Certificate>"
            f"{certificate_body(pem)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>"
            for pem in bodies
        )
        return (
            f'{prologue}<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" '
            f'xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="{self.entity_id}">'
            '<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">'
            f"{keys}<md:NameIDFormat>{EMAIL_FORMAT}</md:NameIDFormat>"
            f'<md:SingleSignOnService Binding="{binding}" Location="{self.sso_url}"/>'
            "</md:IDPSSODescriptor></md:EntityDescriptor>"
        )

    def spec(self, connection: dict, request_id: str | None, **changes) -> Spec:
        """A response to `request_id` for `connection` (its API answer)."""
        base = Spec(
            acs_url=connection["acs_url"],
            sp_entity_id=connection["sp_entity_id"],
            request_id=request_id,
            issuer=self.entity_id,
        )
        return base.but(**changes)

    def sign_xml(self, xml: str, *, key: str | None = None, certificate: str | None = None,
                 algorithm: str = Saml.RSA_SHA256, digest: str = Saml.SHA256) -> str:  # fmt: skip
        """The toolkit's signing utility (xmlsec): a Signature after the first Issuer of `xml`, over the
        element holding it."""
        signed = OneLogin_Saml2_Utils.add_sign(
            xml,
            key or self.key,
            certificate or self.certificate,
            sign_algorithm=algorithm,
            digest_algorithm=digest,
        )
        return signed.decode() if isinstance(signed, bytes) else signed

    def signed_assertion(self, spec: Spec, **signing) -> str:
        return self.sign_xml(assertion_xml(spec), **signing)

    def response(self, spec: Spec, *, sign: str = "assertion", **signing) -> str:
        """The response, base64 as the HTTP-POST binding carries it; `sign`: `assertion`, `response`,
        `both` or `none`."""
        assertion = assertion_xml(spec)
        if sign in ("assertion", "both"):
            assertion = self.sign_xml(assertion, **signing)
        xml = response_xml(spec, assertion)
        if sign in ("response", "both"):
            xml = self.sign_xml(xml, **signing)
        return encode(xml)


def encode(xml: str) -> str:
    return base64.b64encode(xml.encode()).decode()


def strip_declaration(xml: str) -> str:
    return xml.split("?>", 1)[1] if xml.startswith("<?xml") else xml


@dataclass(frozen=True)
class Sent:
    """What `auth/sso/initiate` sent the browser to: the AuthnRequest (its XML and ID) and the RelayState."""

    url: str
    request_xml: str
    request_id: str
    relay_state: str


def read_redirect(url: str) -> Sent:
    query = dict(parse_qsl(urlsplit(url).query))
    xml = zlib.decompress(base64.b64decode(query["SAMLRequest"]), -15).decode()
    request_id = xml.split(' ID="', 1)[1].split('"', 1)[0]
    return Sent(url=url, request_xml=xml, request_id=request_id, relay_state=query["RelayState"])
