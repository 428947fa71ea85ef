"""TLS and the bearer token against a real node serving both."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import unittest
from pathlib import Path
from typing import Optional

from agentstate import TLS, AsyncClient, Client, NO_RETRY, errors, new_ulid
from tests.certs import write_server_cert
from tests.node import Node

TOKEN = "s3cret-token-for-tests"
node: Optional[Node] = None
certdir: Optional[Path] = None
ca_pem = b""
other_ca_pem = b""


def setUpModule() -> None:
    global node, certdir, ca_pem, other_ca_pem
    certdir = Path(tempfile.mkdtemp(prefix="agentstate-py-tls-"))
    cert, key, ca_pem, other_ca_pem = write_server_cert(certdir)
    node = Node(token=TOKEN, tls_cert=cert, tls_key=key)


def tearDownModule() -> None:
    if node is not None:
        node.stop()
    if certdir is not None:
        shutil.rmtree(certdir, ignore_errors=True)


class TLSAuthTest(unittest.TestCase):
    def addr(self) -> str:
        assert node is not None
        return node.grpc_addr

    def test_right_token_over_tls_works_for_calls_and_the_batched_stream(self) -> None:
        with Client(self.addr(), token=TOKEN, tls=ca_pem) as c:
            sid = c.sessions.create("secure").session.session_id
            r = c.sessions.append(sid, [("user", "over TLS")])
            self.assertEqual(r.messages[0].sequence, 0)
            self.assertEqual(c.sessions.get(sid).message_count, 1)

    def test_server_name_override(self) -> None:
        # The certificate names localhost and 127.0.0.1; verifying it as
        # "localhost" while dialing the IP must work.
        with Client(self.addr(), token=TOKEN, tls=TLS(root_certificates=ca_pem, server_name="localhost")) as c:
            c.sessions.create("named")

    def test_wrong_or_missing_token_is_unauthenticated(self) -> None:
        for token in ("wrong", None):
            with self.subTest(token=token), Client(self.addr(), token=token, tls=ca_pem) as c:
                with self.assertRaises(errors.Unauthenticated):
                    c.sessions.get(new_ulid())
                # The batched stream is refused as a whole; the refusal reaches the append.
                with self.assertRaises(errors.Unauthenticated):
                    c.sessions.append(new_ulid(), [("user", "x")])
                with self.assertRaises(errors.Unauthenticated):
                    c.audit.verify()

    def test_wrong_token_async(self) -> None:
        async def run() -> None:
            async with AsyncClient(self.addr(), token="wrong", tls=ca_pem) as c:
                with self.assertRaises(errors.Unauthenticated):
                    await c.sessions.append(new_ulid(), [("user", "x")])
                with self.assertRaises(errors.Unauthenticated):
                    await c.sessions.get(new_ulid())

        asyncio.run(run())

    def test_untrusted_certificate_or_plaintext_is_unavailable(self) -> None:
        for tls in (other_ca_pem, None):
            with self.subTest(tls="plaintext" if tls is None else "other CA"):
                with Client(self.addr(), token=TOKEN, tls=tls, retry=NO_RETRY, timeout=10) as c:
                    with self.assertRaises(errors.Unavailable):
                        c.sessions.get(new_ulid())


if __name__ == "__main__":
    unittest.main()
