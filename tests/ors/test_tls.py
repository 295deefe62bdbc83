"""TLS targets take the same path as plain ones: a real ORS server over TLS on loopback (uvicorn with a
self-signed certificate made here), reached as `HTTPS://127.0.0.1:PORT` (the scheme in capitals on
purpose), verified against the default CA store, which `SSL_CERT_FILE` points at the certificate."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import time
import uuid

import anyio
import pytest

from ormix.ors import ORSClient, TransportError
from ormix.ors._http import HTTPClient, HTTPFailure, ssl_context
from ormix.server import ServeOptions, serve_in_process

x509 = pytest.importorskip(
    "cryptography.x509", reason="the `cryptography` package makes the test certificate"
)


def _self_signed(tmp) -> tuple[str, str]:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ormix test server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
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
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    cert, key = _self_signed(tmp_path_factory.mktemp("tls"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SSL_CERT_FILE", cert)  # the readiness probe verifies the server too
        with serve_in_process(
            ["local:echo", "local:faulty"], ServeOptions(ssl_certfile=cert, ssl_keyfile=key)
        ) as srv:
            assert srv.url.startswith("https://")
            yield srv, cert


def _upper(url: str) -> str:
    return "HTTPS://" + url.split("://", 1)[1]


def test_https_in_capitals_serves_stateless_calls_discovery_and_sessions(tls_server, monkeypatch):
    srv, cert = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    url = _upper(srv.url)
    ep = ORSClient(url).endpoint  # discovery: a blocking GET /list_environments over TLS
    assert ep.env_name == "echo" and ep.session_url == srv.url  # the scheme written lower-case
    key = f"tls-{uuid.uuid4()}"

    async def main():
        async with ORSClient(url, env_name="echo", ping_interval_s=0.1) as c:
            assert await c.health() == {"status": "ok"}
            assert await c.num_tasks("train") == 16
            assert [t.name for t in await c.tools()] == ["echo", "submit"]
            assert len(await c.get_tasks("train", range(8), concurrency=4)) == 8
            async with c.session(split="train", index=0) as s:
                assert "'apple'" in await s.prompt_text()
                assert (await s.call("echo", {"text": "apple"})).reward == 1.0
                with anyio.fail_after(5):
                    while s.timings.pings < 1:  # keepalive pings go over TLS too
                        await anyio.sleep(0.02)
                assert (await s.call("submit", {"text": "apple"})).finished
        async with ORSClient(url, env_name="faulty", ping_interval_s=None) as c:
            async with c.session(split="test", index=0) as s:
                assert (await s.call("count", {"key": key})).text == "1"
                assert (await s.call("read_count", {"key": key})).text == "1"
        async with ORSClient(url, ping_interval_s=None) as c:  # env discovered on first use, over TLS
            assert await c.num_tasks("test") == 4

    anyio.run(main)


def test_a_certificate_outside_the_ca_store_fails_fast_and_is_not_retried(tls_server, monkeypatch):
    srv, _ = tls_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    if ssl_context().cert_store_stats().get("x509_ca", 0) == 0 and not os.path.isdir("/etc/ssl/certs"):
        pytest.skip("no default CA store on this machine")

    async def main():
        async with ORSClient(_upper(srv.url), env_name="echo", retries=3) as c:
            t = time.perf_counter()
            with pytest.raises(TransportError, match="certificate") as ei:
                await c.health()
            assert time.perf_counter() - t < 2.0
            assert "after 1 attempt:" in str(ei.value)  # not retried: it cannot get better
            cause = ei.value.__cause__
            assert isinstance(cause, HTTPFailure) and cause.kind == "certificate" and not cause.retryable
            assert "SSL_CERT_FILE" in str(ei.value)

    anyio.run(main)


def test_ssl_context_follows_ssl_cert_file(tls_server, monkeypatch):
    _, cert = tls_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = ssl_context()
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    custom = ssl_context()
    assert custom is not default and custom is ssl_context()  # one per value, cached
    assert custom.verify_mode == ssl.CERT_REQUIRED and custom.check_hostname
    assert any("ormix test server" in str(c.get("subject")) for c in custom.get_ca_certs())


def test_plain_http_client_reaches_tls_server_by_scheme_alone(tls_server, monkeypatch):
    # One HTTPClient serves both: TLS is chosen per request by the URL's scheme.
    srv, cert = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", cert)

    async def main():
        async with HTTPClient() as http:
            r = await http.request("GET", _upper(srv.url) + "/health")
            assert r.status_code == 200 and r.json() == {"status": "ok"}

    anyio.run(main)
