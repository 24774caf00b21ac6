"""A throw-away certificate authority and a server certificate for 127.0.0.1 (TLS tests)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_tls_files(folder: Path) -> TlsFiles:
    """Write ca.pem, server.pem and server.key (valid for 127.0.0.1 and localhost) into folder."""
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(minutes=5), now + dt.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("voxqueue test CA")
    ca_cert = (
        x509.CertificateBuilder(
            subject_name=ca_name,
            issuer_name=ca_name,
            public_key=ca_key.public_key(),
            serial_number=x509.random_serial_number(),
            not_valid_before=start,
            not_valid_after=end,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder(
            subject_name=_name("127.0.0.1"),
            issuer_name=ca_name,
            public_key=key.public_key(),
            serial_number=x509.random_serial_number(),
            not_valid_before=start,
            not_valid_after=end,
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(ca=folder / "ca.pem", cert=folder / "server.pem", key=folder / "server.key")
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(_pem_key(key))
    files.key.chmod(0o600)
    return files
