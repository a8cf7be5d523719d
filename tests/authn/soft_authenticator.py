"""A software WebAuthn authenticator for the unit tests (docs/testing.md): an ES256 key, "none"
attestation, authenticator data with the UP, UV, BE and BS flags and a signature counter, and the
browser's half (clientDataJSON with its type, challenge and origin; `PublicKeyCredential.toJSON()`).
Every knob a test turns (origin, RP id, user verification, counter, a spoiled signature) is an argument,
so each refusal is one changed input against a passkey that otherwise signs in."""

import base64
import hashlib
import json
import os
import struct

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SoftAuthenticator:
    """One discoverable credential: `create` makes it from creation options, `get` signs request
    options with it."""

    def __init__(self, origin: str = "http://127.0.0.1:8000", *, backed_up: bool = True):
        self.origin = origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(16)
        self.sign_count = 0
        self.user_handle: str | None = None
        self.backed_up = backed_up

    @property
    def id(self) -> str:
        return b64url(self.credential_id)

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps(
            {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
        )

    def _flags(self, *, uv: bool, extra: int = 0) -> int:
        flags = UP | extra | (UV if uv else 0)
        return flags | ((BE | BS) if self.backed_up else 0)

    def _client_data(self, kind: str, challenge: str, origin: str | None) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": origin or self.origin, "crossOrigin": False}
        return json.dumps(data).encode()

    def create(
        self, options: dict, *, origin: str | None = None, rp_id: str | None = None, uv: bool = True
    ) -> dict:
        """`navigator.credentials.create(options)` then `toJSON()`."""
        self.user_handle = options["user"]["id"]
        client_data = self._client_data("webauthn.create", options["challenge"], origin)
        rp_hash = hashlib.sha256((rp_id or options["rp"]["id"]).encode()).digest()
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id
        auth_data = (
            rp_hash
            + bytes([self._flags(uv=uv, extra=AT)])
            + struct.pack(">I", self.sign_count)
            + attested
            + self._cose_key()
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def get(
        self,
        options: dict,
        *,
        origin: str | None = None,
        rp_id: str | None = None,
        uv: bool = True,
        sign_count: int | None = None,
        bad_signature: bool = False,
        credential_id: bytes | None = None,
        user_handle: str | None = None,
    ) -> dict:
        """`navigator.credentials.get(options)` then `toJSON()`. The counter goes up by one unless
        `sign_count` says what to present."""
        if sign_count is None:
            self.sign_count += 1
            sign_count = self.sign_count
        client_data = self._client_data("webauthn.get", options["challenge"], origin)
        rp_hash = hashlib.sha256((rp_id or options["rpId"]).encode()).digest()
        auth_data = rp_hash + bytes([self._flags(uv=uv)]) + struct.pack(">I", sign_count)
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        if bad_signature:
            signature = self.key.sign(signed + b"x", ec.ECDSA(hashes.SHA256()))
        raw_id = b64url(credential_id) if credential_id is not None else self.id
        return {
            "id": raw_id,
            "rawId": raw_id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": user_handle if user_handle is not None else self.user_handle,
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }
