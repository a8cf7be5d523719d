"""Every check of a SAML response (docs/saml.md#the-checks), each broken in turn in a response the test's
IdP signs itself, against a response that passes in all else: each is refused with `error=sso_failed`
only, its reason in the `sso.login_failed` entry. Where the toolkit checks a part only when present, or
loosely, both the toolkit's case and the one left to the service are here."""

import base64
import datetime as dt

import pytest
from lxml import etree
from onelogin.saml2.constants import OneLogin_Saml2_Constants as Saml

from accounts.models import Account
from authn.models import OAuthState
from sso.models import SamlAssertion

from .saml_flow import (  # noqa: F401 (the autouse fixture)
    _public_urls,
    connect_saml,
    login,
    post_acs,
    refused,
    start,
)
from .saml_idp import (
    Spec,
    TestIdp,
    assertion_xml,
    encode,
    new_signing_pair,
    response_xml,
    strip_declaration,
)

NS = {"samlp": Saml.NS_SAMLP, "saml": Saml.NS_SAML, "ds": Saml.NS_DS}


@pytest.fixture
def connection(admin, saml_idp) -> dict:
    return connect_saml(admin, saml_idp)


def accepted(query: dict) -> None:
    assert set(query) == {"access_token"}, query


# Parts of the response, each broken in turn: (changes to the Spec, given the connection), the reason.
BROKEN = {
    "audience of another sp": (
        lambda c: {"audience": "https://someone-else.test"},
        "is not a valid audience",
    ),
    "audience missing": (lambda c: {"audience": None}, "no Audience"),
    "a second audience restriction without this sp": (
        lambda c: {"other_restriction": "https://someone-else.test"},
        "Audience is not the SP entity id",
    ),
    "recipient elsewhere": (
        lambda c: {"recipient": "https://evil.test/acs"},
        "A valid SubjectConfirmation was not found",
    ),
    "recipient holding the acs url": (
        lambda c: {"recipient": c["acs_url"] + "/x"},
        "Recipient is not the ACS URL",
    ),
    "recipient missing": (lambda c: {"recipient": None}, "Recipient is not the ACS URL"),
    "destination elsewhere": (
        lambda c: {"destination": "https://evil.test/acs"},
        "The response was received at",
    ),
    "destination starting with the acs url": (
        lambda c: {"destination": c["acs_url"] + "-evil"},
        "Destination is not the ACS URL",
    ),
    "destination missing": (lambda c: {"destination": None}, "Destination missing"),
    "in response to an unknown request": (
        lambda c: {"in_response_to": "_unknown", "scd_in_response_to": "_unknown"},
        "does not match the ID of the AuthNRequest",
    ),
    "in response to nothing": (
        lambda c: {"in_response_to": None, "scd_in_response_to": None},
        "InResponseTo does not name the request of this login",
    ),
    "confirmation in response to another request": (
        lambda c: {"scd_in_response_to": "_other"},
        "A valid SubjectConfirmation was not found",
    ),
    "conditions not yet valid beyond the skew": (
        lambda c: {"conditions_not_before": 240},
        "not yet valid",
    ),
    "conditions expired beyond the skew": (
        lambda c: {"conditions_not_before": -600, "conditions_not_on_or_after": -180},
        "expired",
    ),
    "confirmation not yet valid beyond the skew": (
        lambda c: {"scd_not_before": 240},
        "A valid SubjectConfirmation was not found",
    ),
    "confirmation expired beyond the skew": (
        lambda c: {"conditions_not_before": -600, "scd_not_on_or_after": -180},
        "A valid SubjectConfirmation was not found",
    ),
    "confirmation that never expires": (
        lambda c: {"scd_not_on_or_after": None},
        "SubjectConfirmationData without NotOnOrAfter",
    ),
    "issuer of another idp": (lambda c: {"issuer": "https://evil-idp.test/saml"}, "Invalid issuer"),
    "assertion issuer of another idp": (
        lambda c: {"assertion_issuer": "https://evil-idp.test/saml"},
        "Invalid issuer",
    ),
    "status not success": (lambda c: {"status": Saml.STATUS_RESPONDER}, "was not Success"),
}


@pytest.mark.parametrize("case", BROKEN)
@pytest.mark.parametrize("sign", ["assertion", "response"])
def test_each_broken_part_is_refused(api, saml_idp, connection, case, sign):
    changes, reason = BROKEN[case]
    refused(login(api, saml_idp, connection, sign=sign, **changes(connection)), connection, reason)
    assert not Account.objects.filter(email="alice@acme.test").exists()


@pytest.mark.parametrize(
    "changes",
    [
        {"conditions_not_before": 90},
        {"conditions_not_before": -600, "conditions_not_on_or_after": -90},
        {"scd_not_before": 90},
        {"conditions_not_before": -600, "scd_not_on_or_after": -90},
        {"conditions_not_before": 90, "scd_not_on_or_after": 100},  # a window of 10 seconds, 90 s ahead
    ],
)
def test_two_minutes_of_skew_for_conditions_and_subject_confirmation_alike(
    api, saml_idp, connection, changes
):
    accepted(login(api, saml_idp, connection, **changes))


def test_a_window_that_holds_at_no_instant_is_refused(api, saml_idp, connection):
    """One IdP, one clock: the conditions must hold together at an instant within the skew."""
    refused(login(api, saml_idp, connection, conditions_not_before=60, scd_not_on_or_after=30), connection,
            "not yet valid")  # fmt: skip


# Signatures


def test_an_unsigned_response_is_refused(api, saml_idp, connection):
    refused(login(api, saml_idp, connection, sign="none"), connection, "No Signature found")


@pytest.mark.parametrize("sign", ["assertion", "response", "both"])
def test_a_response_signed_by_another_key_is_refused(api, saml_idp, connection, sign):
    key, certificate = new_signing_pair()
    sent = start(api, connection_id=connection["id"])
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id), sign=sign, key=key,
                                 certificate=certificate)  # fmt: skip
    refused(post_acs(api, connection, response, sent.relay_state), connection, "Signature validation failed")


def test_a_key_the_metadata_lists_beside_another_signs(api, admin, saml_idp):
    old_key, old_certificate = saml_idp.key, saml_idp.certificate
    saml_idp.key, saml_idp.certificate = new_signing_pair()  # the IdP rolls over to a new key
    connection = connect_saml(admin, saml_idp, idp_metadata_xml=saml_idp.metadata(
        certificates=[old_certificate, saml_idp.certificate]))  # fmt: skip
    accepted(login(api, saml_idp, connection))
    saml_idp.key, saml_idp.certificate = old_key, old_certificate
    accepted(login(api, saml_idp, connection))


def test_a_sha1_signature_is_refused(api, saml_idp, connection):
    sent = start(api, connection_id=connection["id"])
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id), algorithm=Saml.RSA_SHA1,
                                 digest=Saml.SHA1)  # fmt: skip
    refused(
        post_acs(api, connection, response, sent.relay_state), connection, "Deprecated signature algorithm"
    )


def test_a_signed_assertion_changed_after_signing_is_refused(api, saml_idp, connection):
    sent = start(api, connection_id=connection["id"])
    spec = saml_idp.spec(connection, sent.request_id, name_id="bob@acme.test")
    xml = response_xml(spec, saml_idp.signed_assertion(spec)).replace("bob@acme.test", "alice@acme.test")
    refused(
        post_acs(api, connection, encode(xml), sent.relay_state), connection, "Signature validation failed"
    )


# Exactly one assertion, and signature wrapping in its classic positions (XSW)


def _signed_parts(idp: TestIdp, connection: dict, request_id: str):
    """A signed assertion for alice, and an unsigned one for mallory, both otherwise valid."""
    spec = idp.spec(connection, request_id)
    signed = strip_declaration(idp.signed_assertion(spec))
    evil = assertion_xml(spec.but(name_id="mallory@acme.test", assertion_id="_evil"))
    return spec, signed, evil


def _wrapped(api, idp, connection, build) -> dict:
    sent = start(api, connection_id=connection["id"])
    spec, signed, evil = _signed_parts(idp, connection, sent.request_id)
    return post_acs(api, connection, encode(build(spec, signed, evil, idp)), sent.relay_state)


def _beside(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    return response_xml(spec, evil + signed)


def _beside_after(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    return response_xml(spec, signed + evil)


def _inside(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    """The unsigned assertion inside the signed one's Advice (the signature then no longer holds either)."""
    return response_xml(
        spec, signed.replace("<saml:AuthnStatement", f"<saml:Advice>{evil}</saml:Advice><saml:AuthnStatement")
    )


def _signed_in_extensions(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    moved = f"<samlp:Extensions>{signed}</samlp:Extensions>"
    return response_xml(spec, evil).replace("<samlp:Status>", f"{moved}<samlp:Status>")


def _signed_in_signature_object(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    """A signed response whose signature's Object holds the original assertion, the evil one in its
    place."""
    document = etree.fromstring(strip_declaration(idp.sign_xml(response_xml(spec, signed))).encode())
    original = document.find("saml:Assertion", NS)
    signature = document.find("ds:Signature", NS)
    document.remove(original)
    holder = etree.SubElement(signature, f"{{{Saml.NS_DS}}}Object")
    holder.append(original)
    document.append(etree.fromstring(evil))
    return etree.tostring(document).decode()


def _signed_response_in_extensions(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    """An unsigned response around the original signed one (in its Extensions), with the evil assertion."""
    original = strip_declaration(idp.sign_xml(response_xml(spec, assertion_xml(spec))))
    outer = response_xml(spec.but(response_id="_outer"), evil)
    return outer.replace("<samlp:Status>", f"<samlp:Extensions>{original}</samlp:Extensions><samlp:Status>")


def _signed_response_in_extensions_alone(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    """An empty unsigned response around the original signed one: its one assertion is not the response's."""
    original = strip_declaration(idp.sign_xml(response_xml(spec, assertion_xml(spec))))
    outer = response_xml(spec.but(response_id="_outer"), "")
    return outer.replace("<samlp:Status>", f"<samlp:Extensions>{original}</samlp:Extensions><samlp:Status>")


def _reference_to_the_evil_id(spec: Spec, signed: str, evil: str, idp: TestIdp) -> str:
    """The evil assertion takes the signed one's ID, the signed one another and moves aside."""
    assertion_id = spec.assertion_id
    renamed = signed.replace(f'ID="{assertion_id}"', 'ID="_moved"', 1)
    stolen = evil.replace('ID="_evil"', f'ID="{assertion_id}"')
    return response_xml(spec, stolen).replace(
        "<samlp:Status>", f"<samlp:Extensions>{renamed}</samlp:Extensions><samlp:Status>"
    )


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (_beside, "must contain 1 assertion"),
        (_beside_after, "must contain 1 assertion"),
        (_inside, "must contain 1 assertion"),
        (_signed_in_extensions, "must contain 1 assertion"),
        (_signed_in_signature_object, "must contain 1 assertion"),
        (_signed_response_in_extensions, "must contain 1 assertion"),
        (_signed_response_in_extensions_alone, "response refused"),
        (_reference_to_the_evil_id, "must contain 1 assertion"),
    ],
)
def test_signature_wrapping_is_refused(api, saml_idp, connection, build, reason):
    refused(_wrapped(api, saml_idp, connection, build), connection, reason)
    assert not Account.objects.filter(email="mallory@acme.test").exists()


def test_two_signed_assertions_are_refused(api, saml_idp, connection):
    sent = start(api, connection_id=connection["id"])
    spec = saml_idp.spec(connection, sent.request_id)
    second = spec.but(assertion_id="_second", name_id="mallory@acme.test")
    assertions = strip_declaration(saml_idp.signed_assertion(spec)) + strip_declaration(
        saml_idp.signed_assertion(second)
    )
    refused(post_acs(api, connection, encode(response_xml(spec, assertions)), sent.relay_state), connection,
            "must contain 1 assertion")  # fmt: skip


# What the XML may hold


@pytest.mark.parametrize(
    ("prologue", "name_id", "reason"),
    [
        ('<!DOCTYPE samlp:Response [<!ENTITY who "alice@acme.test">]>', "&who;", "holds a DTD or entity"),
        ("<!DOCTYPE samlp:Response>", "alice@acme.test", "holds a DTD or entity"),
        ('<!doctype samlp:Response SYSTEM "http://127.0.0.1:9/x.dtd">', "alice@acme.test", "holds a DTD"),
        ('<?xml version="1.0" encoding="UTF-7"?>', "alice@acme.test", "the document is not utf-8"),
    ],
)
def test_a_dtd_or_entity_declaration_is_refused_before_parsing(api, saml_idp, connection, prologue, name_id,
                                                                reason):  # fmt: skip
    sent = start(api, connection_id=connection["id"])
    spec = saml_idp.spec(connection, sent.request_id, name_id_xml=name_id)
    signed = strip_declaration(saml_idp.signed_assertion(spec)) if "&" not in name_id else assertion_xml(spec)
    xml = prologue + response_xml(spec, signed)
    refused(post_acs(api, connection, encode(xml), sent.relay_state), connection, reason)


def test_a_response_in_utf16_is_refused(api, saml_idp, connection):
    sent = start(api, connection_id=connection["id"])
    spec = saml_idp.spec(connection, sent.request_id)
    xml = response_xml(spec, strip_declaration(saml_idp.signed_assertion(spec)))
    document = base64.b64encode(xml.encode("utf-16")).decode()
    refused(post_acs(api, connection, document, sent.relay_state), connection, "the document is not utf-8")


@pytest.mark.parametrize(
    ("form", "reason"),
    [
        ({"SAMLResponse": "not base64!"}, "SAMLResponse is not base64"),
        ({"SAMLResponse": ""}, "no SAMLResponse"),
        ({}, "no SAMLResponse"),
        ({"SAMLResponse": encode("<samlp:Response")}, "response refused"),
    ],
)
def test_a_malformed_post_is_refused(api, saml_idp, connection, form, reason):
    sent = start(api, connection_id=connection["id"])
    refused(post_acs(api, connection, form.get("SAMLResponse"), sent.relay_state), connection, reason)


# The request a response answers: sent by this service, for this connection, not yet answered


def test_an_unsolicited_response_is_refused(api, saml_idp, connection):
    spec = saml_idp.spec(connection, None)  # IdP-initiated: no request, no RelayState
    refused(post_acs(api, connection, saml_idp.response(spec), None), connection, "no RelayState")
    start(api, connection_id=connection["id"])
    refused(post_acs(api, connection, saml_idp.response(spec), "a-state-never-sent"), connection,
            "RelayState refused: unknown state")  # fmt: skip


def test_a_request_is_answered_once(api, saml_idp, connection):
    sent = start(api, connection_id=connection["id"])
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id))
    accepted(post_acs(api, connection, response, sent.relay_state))
    refused(
        post_acs(api, connection, response, sent.relay_state), connection, "state expired or already used"
    )


def test_a_request_older_than_ten_minutes_is_not_answered(api, saml_idp, connection):
    sent = start(api, connection_id=connection["id"])
    OAuthState.objects.update(expires_at=OAuthState.objects.get().created_at + dt.timedelta(seconds=-1))
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id))
    refused(
        post_acs(api, connection, response, sent.relay_state), connection, "state expired or already used"
    )


def test_a_response_to_another_connections_request_is_refused(api, admin, saml_idp, connection):
    other = connect_saml(admin, saml_idp, name="Acme SAML 2", verified=(), domains=["acme.org"])
    sent = start(api, connection_id=other["id"])  # the request went out for the other connection
    response = saml_idp.response(saml_idp.spec(connection, sent.request_id))
    refused(post_acs(api, connection, response, sent.relay_state), connection,
            "RelayState names a request of another connection")  # fmt: skip


def test_the_relay_state_must_come_back_with_its_own_request(api, saml_idp, connection):
    first = start(api, connection_id=connection["id"])
    second = start(api, connection_id=connection["id"])
    response = saml_idp.response(saml_idp.spec(connection, first.request_id))
    refused(post_acs(api, connection, response, second.relay_state), connection,
            "does not match the ID of the AuthNRequest")  # fmt: skip


def test_a_replayed_assertion_is_refused_even_under_a_new_request(api, saml_idp, connection):
    """The Response is unsigned and its assertion carries no InResponseTo of its own: whoever holds a used
    response can put the signed assertion in a new Response answering a request of their own. Only the
    assertion id says it was used."""
    sent = start(api, connection_id=connection["id"])
    spec = saml_idp.spec(connection, sent.request_id, scd_in_response_to=None)
    signed = strip_declaration(saml_idp.signed_assertion(spec))
    accepted(post_acs(api, connection, encode(response_xml(spec, signed)), sent.relay_state))
    assert SamlAssertion.objects.count() == 1
    again = start(api, connection_id=connection["id"])
    replay = response_xml(spec.but(request_id=again.request_id, response_id="_r2"), signed)
    refused(
        post_acs(api, connection, encode(replay), again.relay_state), connection, "assertion already used"
    )


def test_an_assertion_valid_until_the_end_of_time_is_remembered_until_then(api, saml_idp, connection):
    far = (dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC) - dt.datetime.now(dt.UTC)).total_seconds()
    accepted(login(api, saml_idp, connection, scd_not_on_or_after=far - 1, conditions_not_on_or_after=None))
    assert SamlAssertion.objects.get().expires_at.year == 9999
