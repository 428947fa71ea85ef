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
        "principals": [{"name": "team-app", "grants": [{"namespace": "team", "role": "writer"}]},
                       {"name": "other-app", "grants": [{"namespace": "other", "role": "writer"}]}],
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

    def test_a_plan_is_in_its_namespace(self) -> None:
        # One plan id, two tenants: two plans, and the other's is missing.
        with Client(self.addr(), token=jwt("team-app"), retry=NO_RETRY) as team, \
                Client(self.addr(), token=jwt("other-app"), retry=NO_RETRY) as other:
            mine = team.plans.record_error("deploy", phase="execute", error_type="timeout", namespace="team")
            theirs = other.plans.record_error("deploy", phase="execute", error_type="timeout", namespace="other")
            self.assertEqual((mine.record.sequence, mine.record.namespace), (0, "team"))
            self.assertEqual((theirs.record.sequence, theirs.record.namespace), (0, "other"))
            team.plans.set_policy("deploy", 5, namespace="team")
            team.plans.record_success("deploy", phase="execute", namespace="team")
            team.plans.merge_error_details("deploy", {"note": 1}, namespace="team")
            self.assertEqual(team.plans.error_details("deploy", namespace="team").max_retries, 5)
            self.assertEqual(len(team.plans.history("deploy", namespace="team").records), 1)
            with self.assertRaises(errors.NotFound):
                team.plans.history("deploy", namespace="other")
            with self.assertRaises(errors.NotFound):
                team.plans.set_policy("deploy", 1, namespace="other")
            with self.assertRaises(errors.NotFound):
                team.plans.error_details("deploy")  # the default namespace is not team-app's
            self.assertEqual(other.plans.error_details("deploy", namespace="other").max_retries, 3)

    def test_an_expired_or_foreign_jwt_is_unauthenticated(self) -> None:
        for token in (jwt("team-app", exp_in=-60), jwt("team-app", iss="https://other.example"), jwt("nobody")):
            with self.subTest(token=token[-12:]), Client(self.addr(), token=token, retry=NO_RETRY) as c:
                with self.assertRaises(errors.Unauthenticated):
                    c.sessions.list()


if __name__ == "__main__":
    unittest.main()
