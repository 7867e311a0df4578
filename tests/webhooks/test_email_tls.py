"""Email over STARTTLS: a real ``aiosmtpd`` server that requires it, a certificate signed
by a test CA, and ``smtplib`` verifying it. Nothing is ever sent in the clear."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from aais_langgraph.ledger import DELIVERY
from aais_langgraph.webhooks import MailSettings, WebhookSubscription

from .mailbox import Mailbox
from .test_email import ask, drain, site


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _authority(
    common: str, now: datetime.datetime
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA named ``common``: its key and certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key, (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a server certificate it signed for 127.0.0.1, and another CA (files: ca,
    cert, key, other_ca)."""
    root = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, ca = _authority("aais test CA", now)
    _, other = _authority("another CA", now)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = {
        "ca": root / "ca.pem",
        "other_ca": root / "other_ca.pem",
        "cert": root / "cert.pem",
        "key": root / "key.pem",
    }
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files["other_ca"].write_bytes(other.public_bytes(serialization.Encoding.PEM))
    files["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def tls_subscription(port: int, **mail: object) -> WebhookSubscription:
    settings = MailSettings(
        to=("oncall@example.com",),
        sender="approvals@example.com",
        host="127.0.0.1",
        port=port,
        **mail,  # type: ignore[arg-type]
    )
    return WebhookSubscription(
        name="mail",
        url=f"smtp://127.0.0.1:{port}",
        format="email",
        mail=settings,
        as_groups=frozenset({"sre"}),
        notices=frozenset({"approval.requested"}),
        max_attempts=2,
    )


def test_the_mail_goes_over_starttls_to_a_server_whose_certificate_verifies(
    certificates: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The system's trust store, as an operator extends it for an internal CA.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates["ca"]))
    tls = (str(certificates["cert"]), str(certificates["key"]))
    with Mailbox(login=("mailer", "pw-123"), tls=tls) as mailbox:
        authority, worker = site(
            [tls_subscription(mailbox.port, username="mailer", password="pw-123")]
        )
        ask(authority, "apr_tls")
        drain(worker)
        assert len(mailbox.messages) == 1
        assert mailbox.over_tls == [True]
        assert mailbox.logins == ["mailer"]  # the server takes AUTH only over TLS
    (done,) = authority.ledger.list_work(DELIVERY, states=("done",))
    assert done.request_id == "apr_tls"


def test_a_certificate_that_does_not_verify_sends_nothing_and_ends_dead(
    certificates: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A trust store that holds another CA only.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates["other_ca"]))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    tls = (str(certificates["cert"]), str(certificates["key"]))
    with Mailbox(login=("mailer", "pw-123"), tls=tls) as mailbox:
        authority, worker = site(
            [tls_subscription(mailbox.port, username="mailer", password="pw-123")]
        )
        ask(authority, "apr_untrusted")
        drain(worker)
        assert mailbox.messages == [] and mailbox.logins == []
    (dead,) = authority.ledger.list_work(DELIVERY, states=("dead",))
    assert dead.attempts == 2
    assert dead.last_error == "SSLCertVerificationError"


def test_a_server_without_starttls_is_never_sent_the_mail_in_the_clear() -> None:
    with Mailbox() as mailbox:  # offers no STARTTLS
        authority, worker = site([tls_subscription(mailbox.port)])
        ask(authority, "apr_clear")
        drain(worker)
        assert mailbox.messages == []
    (dead,) = authority.ledger.list_work(DELIVERY, states=("dead",))
    assert dead.last_error == "SMTPNotSupportedError"
