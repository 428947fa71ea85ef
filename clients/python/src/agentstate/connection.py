"""How a client reaches a node: address, TLS and the bearer token."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

import grpc
import grpc.aio

Metadata = Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class TLS:
    """TLS settings for the gRPC connection.

    Attributes:
        root_certificates: PEM CA bundle that signed the node's certificate;
            None verifies against the system's roots.
        certificate_chain: PEM client certificate, for a node that asks for
            one (mutual TLS); with ``private_key``.
        private_key: PEM private key of ``certificate_chain``.
        server_name: the name to verify in the node's certificate, when it
            differs from the host of the target.
    """

    root_certificates: Optional[bytes] = None
    certificate_chain: Optional[bytes] = None
    private_key: Optional[bytes] = None
    server_name: Optional[str] = None

    @classmethod
    def from_files(
        cls,
        ca: Union[str, Path, None] = None,
        cert: Union[str, Path, None] = None,
        key: Union[str, Path, None] = None,
        server_name: Optional[str] = None,
    ) -> "TLS":
        """TLS settings read from PEM files (each optional)."""

        def read(p: Union[str, Path, None]) -> Optional[bytes]:
            return Path(p).read_bytes() if p is not None else None

        return cls(read(ca), read(cert), read(key), server_name)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


TLSArg = Union[TLS, bool, bytes, None]


def tls_settings(tls: TLSArg) -> Optional[TLS]:
    """Normalizes the ``tls`` argument: None/False plaintext, True system roots, bytes a CA bundle."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return TLS()
    if isinstance(tls, bytes):
        return TLS(root_certificates=tls)
    if isinstance(tls, TLS):
        return tls
    raise TypeError(f"tls must be a TLS, bool, PEM bytes or None, not {type(tls).__name__}")


def auth_metadata(token: Optional[str]) -> Metadata:
    """The metadata every call carries: the node checks "authorization: Bearer <token>".

    Sent as plain call metadata rather than grpc call credentials, which gRPC
    refuses on a plaintext channel, where a node on loopback may still want
    a token.
    """
    if token is None:
        return ()
    token = token.strip()
    if not token:
        raise ValueError("token is empty")
    return (("authorization", f"Bearer {token}"),)


def channel_options(tls: Optional[TLS], extra: Any = ()) -> List[Tuple[str, Any]]:
    opts: List[Tuple[str, Any]] = list(extra)
    if tls is not None and tls.server_name:
        opts.append(("grpc.ssl_target_name_override", tls.server_name))
    return opts


def open_channel(target: str, tls: Optional[TLS], options: Any = ()) -> grpc.Channel:
    opts = channel_options(tls, options)
    if tls is None:
        return grpc.insecure_channel(target, options=opts)
    return grpc.secure_channel(target, tls.credentials(), options=opts)


def open_aio_channel(target: str, tls: Optional[TLS], options: Any = ()) -> grpc.aio.Channel:
    opts = channel_options(tls, options)
    if tls is None:
        return grpc.aio.insecure_channel(target, options=opts)
    return grpc.aio.secure_channel(target, tls.credentials(), options=opts)
