"""A JWT as the bearer credential, against a real node whose --auth-file trusts a JWKS."""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
import time
import unittest
from pathlib import Path
from typing import Optional

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from agentstate import Client, NO_RETRY, errors
from tests.node import Node

ISSUER, AUDIENCE = "https://idp.example.org", "agentstate"
node: Optional[Node] = None
confdir: Optional[Path] = None
key = ed25519.Ed25519PrivateKey.generate()


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt(sub: str, exp_in: float = 3600, iss: str = ISSUER) -> str:
    """An EdDSA JWT signed by the test issuer's key."""
    header = b64url(json.dumps({"alg": "EdDSA", "kid": "k1", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"iss": iss, "aud": AUDIENCE, "sub": sub, "exp": int(time.time() + exp_in)}).encode())
    sig = key.sign(f"{header}.{payload}".encode())
    return f"{header}.{payload}.{b64url(sig)}"


def setUpModule() -> None:
    global node, confdir
    confdir = Path(tempfile.mkdtemp(prefix="agentstate-py-jwt-"))
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    jwks = {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA", "x": b64url(raw)}]}
    (confdir / "jwks.json").write_text(json.dumps(jwks))
    (confdir / "identities.json").write_text(json.dumps({
        "principals": [{"name": "team-app", "grants": [{"namespace": "team", "role": "writer"}]}],
        "jwt": {"jwks_file": "jwks.json", "issuer": ISSUER, "audience": AUDIENCE},
    }))
    node = Node(args=["--auth-file", str(confdir / "identities.json")])


def tearDownModule() -> None:
    if node is not None:
        node.stop()
    if confdir is not None:
        shutil.rmtree(confdir, ignore_errors=True)


class JWTTest(unittest.TestCase):
    def addr(self) -> str:
        assert node is not None
        return node.grpc_addr

    def test_a_jwt_is_the_principal_it_names(self) -> None:
        with Client(self.addr(), token=jwt("team-app"), retry=NO_RETRY) as c:
            sid = c.sessions.create("py", namespace="team").session.session_id
            self.assertEqual(c.sessions.append(sid, [("user", "by JWT")]).messages[0].sequence, 0)
            with self.assertRaises(errors.PermissionDenied):
                c.sessions.create("py", namespace="elsewhere")

    def test_an_expired_or_foreign_jwt_is_unauthenticated(self) -> None:
        for token in (jwt("team-app", exp_in=-60), jwt("team-app", iss="https://other.example"), jwt("nobody")):
            with self.subTest(token=token[-12:]), Client(self.addr(), token=token, retry=NO_RETRY) as c:
                with self.assertRaises(errors.Unauthenticated):
                    c.sessions.list()


if __name__ == "__main__":
    unittest.main()
