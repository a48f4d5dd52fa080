"""The local CA and its leaf certificates: real files in tmp_path, real TLS over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import ipaddress
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from wwwproxy.proxy.certs import (
    CertificateAuthority,
    CertificateError,
    host_matches,
    install_help,
    local_server_help,
    self_signed_certificate,
    should_intercept,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "https-certificates.md"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leaf_file(directory: Path, host: str) -> Path:
    return directory / "leaves" / f"{hashlib.sha256(host.encode()).hexdigest()[:32]}.pem"


def leaf_chain(directory: Path, host: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(leaf_file(directory, host).read_bytes())


def ca_cert(ca: CertificateAuthority) -> x509.Certificate:
    return x509.load_pem_x509_certificate(ca.cert_pem)


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "certificates"


@pytest.fixture
def ca(ca_dir: Path) -> CertificateAuthority:
    return CertificateAuthority.load_or_create(ca_dir)


# --- the CA on disk ---------------------------------------------------------------------------


def test_create_then_load_gives_the_same_ca(ca_dir: Path) -> None:
    first = CertificateAuthority.load_or_create(ca_dir)
    again = CertificateAuthority.load_or_create(ca_dir)
    assert again.fingerprint_sha256 == first.fingerprint_sha256
    assert again.cert_pem == first.cert_pem == (ca_dir / "ca.cert.pem").read_bytes()
    assert first.cert_path == ca_dir / "ca.cert.pem"
    assert first.cert_der == ca_cert(first).public_bytes(serialization.Encoding.DER)
    expected = hashlib.sha256(first.cert_der).hexdigest().upper()
    assert first.fingerprint_sha256.replace(":", "") == expected
    assert len(first.fingerprint_sha256.split(":")) == 32


def test_file_and_directory_permissions(ca: CertificateAuthority, ca_dir: Path) -> None:
    assert mode(ca_dir) == 0o700
    assert mode(ca_dir / "ca.key.pem") == 0o600
    assert mode(ca_dir / "leaf.key.pem") == 0o600
    assert mode(ca_dir / "ca.cert.pem") & 0o022 == 0
    ca.leaf_context("example.com")
    assert mode(ca_dir / "leaves") == 0o700
    assert not [p for p in ca_dir.rglob("*") if p.name.endswith(".tmp")]


def test_corrupted_key_is_an_error_and_left_untouched(ca: CertificateAuthority, ca_dir: Path):
    key = ca_dir / "ca.key.pem"
    key.write_bytes(b"-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n")
    before = key.read_bytes(), key.stat().st_mtime_ns
    with pytest.raises(CertificateError, match="ca.key.pem") as caught:
        CertificateAuthority.load_or_create(ca_dir)
    assert str(key) in str(caught.value)
    assert (key.read_bytes(), key.stat().st_mtime_ns) == before


def test_corrupted_certificate_is_an_error(ca: CertificateAuthority, ca_dir: Path) -> None:
    cert = ca_dir / "ca.cert.pem"
    cert.write_bytes(b"garbage")
    with pytest.raises(CertificateError, match="ca.cert.pem"):
        CertificateAuthority.load_or_create(ca_dir)
    assert cert.read_bytes() == b"garbage"


def test_mismatched_pair_is_an_error(tmp_path: Path, ca_dir: Path) -> None:
    CertificateAuthority.load_or_create(ca_dir)
    other = tmp_path / "other"
    CertificateAuthority.load_or_create(other)
    foreign = (other / "ca.key.pem").read_bytes()
    (ca_dir / "ca.key.pem").write_bytes(foreign)
    with pytest.raises(CertificateError, match="does not belong"):
        CertificateAuthority.load_or_create(ca_dir)
    assert (ca_dir / "ca.key.pem").read_bytes() == foreign


@pytest.mark.parametrize("missing", ["ca.key.pem", "ca.cert.pem"])
def test_half_a_ca_is_an_error_not_replaced(ca_dir: Path, missing: str) -> None:
    CertificateAuthority.load_or_create(ca_dir)
    (ca_dir / missing).unlink()
    kept = next(name for name in ("ca.key.pem", "ca.cert.pem") if name != missing)
    before = (ca_dir / kept).read_bytes()
    with pytest.raises(CertificateError, match=missing):
        CertificateAuthority.load_or_create(ca_dir)
    assert not (ca_dir / missing).exists()
    assert (ca_dir / kept).read_bytes() == before


def test_ca_certificate_extensions(ca: CertificateAuthority) -> None:
    cert = ca_cert(ca)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.key_cert_sign and usage.value.crl_sign
    cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "wwwproxy"
    common_name = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert str(common_name).startswith("wwwproxy CA on ")
    assert ca.subject == cert.subject.rfc4514_string()
    now = datetime.datetime.now(datetime.UTC)
    assert cert.not_valid_before_utc < now - datetime.timedelta(hours=23)
    assert cert.not_valid_after_utc > now + datetime.timedelta(days=9 * 365)
    cert.verify_directly_issued_by(cert)


def test_concurrent_creation_gives_one_ca(ca_dir: Path) -> None:
    barrier = threading.Barrier(4)
    results: list[str] = []

    def create() -> None:
        barrier.wait()
        results.append(CertificateAuthority.load_or_create(ca_dir).fingerprint_sha256)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 4
    assert len(set(results)) == 1
    assert CertificateAuthority.load_or_create(ca_dir).fingerprint_sha256 == results[0]


# --- leaf certificates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "name", "san"),
    [
        ("example.com", "example.com", x509.DNSName("example.com")),
        ("WWW.Example.COM.", "www.example.com", x509.DNSName("www.example.com")),
        ("xn--bcher-kva.example", "xn--bcher-kva.example", x509.DNSName("xn--bcher-kva.example")),
        ("127.0.0.1", "127.0.0.1", x509.IPAddress(ipaddress.ip_address("127.0.0.1"))),
        ("::1", "::1", x509.IPAddress(ipaddress.ip_address("::1"))),
        ("[::1]", "::1", x509.IPAddress(ipaddress.ip_address("::1"))),
    ],
)
def test_leaf_certificate(
    ca: CertificateAuthority, ca_dir: Path, host: str, name: str, san: x509.GeneralName
) -> None:
    assert isinstance(ca.leaf_context(host), ssl.SSLContext)
    leaf, chain_ca = leaf_chain(ca_dir, name)
    assert chain_ca == ca_cert(ca)
    leaf.verify_directly_issued_by(ca_cert(ca))
    assert list(leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value) == [san]
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc < datetime.timedelta(days=398)
    now = datetime.datetime.now(datetime.UTC)
    assert leaf.not_valid_before_utc < now < leaf.not_valid_after_utc
    constraints = leaf.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and not constraints.value.ca
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ski = ca_cert(ca).extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ski.digest


def test_long_host_name_truncates_the_common_name(ca: CertificateAuthority, ca_dir: Path):
    host = ".".join(["a" * 60, "b" * 60, "example"])
    ca.leaf_context(host)
    leaf = leaf_chain(ca_dir, host)[0]
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == host[:64]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert list(san) == [x509.DNSName(host)]


def test_all_leaves_share_one_key(ca: CertificateAuthority, ca_dir: Path) -> None:
    ca.leaf_context("example.com")
    ca.leaf_context("example.org")
    ca.leaf_context("127.0.0.1")
    spki = {
        leaf_chain(ca_dir, host)[0]
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        for host in ("example.com", "example.org", "127.0.0.1")
    }
    assert len(spki) == 1


def test_no_host_name_in_file_names(ca: CertificateAuthority, ca_dir: Path) -> None:
    ca.leaf_context("secret-site.example")
    assert not [p for p in ca_dir.rglob("*") if "secret" in p.name]


@pytest.mark.parametrize("host", ["", "[]", "bücher.example", "a b.example", "a/b"])
def test_unusable_host_is_an_error(ca: CertificateAuthority, host: str) -> None:
    with pytest.raises(CertificateError):
        ca.leaf_context(host)


def test_memory_cache_returns_the_same_context(ca: CertificateAuthority) -> None:
    context = ca.leaf_context("example.com")
    assert ca.leaf_context("example.com") is context
    assert ca.leaf_context("EXAMPLE.com.") is context
    assert ca.leaf_context("example.org") is not context


def test_disk_cache_is_reused_by_a_new_instance(ca: CertificateAuthority, ca_dir: Path) -> None:
    ca.leaf_context("example.com")
    path = leaf_file(ca_dir, "example.com")
    before = path.read_bytes(), path.stat().st_mtime_ns
    fresh = CertificateAuthority.load_or_create(ca_dir)
    fresh.leaf_context("example.com")
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_disk_leaf_from_another_ca_is_replaced(tmp_path: Path, ca_dir: Path) -> None:
    other_dir = tmp_path / "other"
    CertificateAuthority.load_or_create(other_dir).leaf_context("example.com")
    ca = CertificateAuthority.load_or_create(ca_dir)
    path = leaf_file(ca_dir, "example.com")
    path.parent.mkdir(mode=0o700)
    foreign = leaf_file(other_dir, "example.com").read_bytes()
    path.write_bytes(foreign)
    ca.leaf_context("example.com")
    assert path.read_bytes() != foreign
    leaf_chain(ca_dir, "example.com")[0].verify_directly_issued_by(ca_cert(ca))


def test_disk_leaf_near_expiry_is_replaced(ca: CertificateAuthority, ca_dir: Path) -> None:
    # A leaf signed by this very CA with this very key, but with 10 days left.
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key.pem").read_bytes(), None)
    leaf_key = serialization.load_pem_private_key((ca_dir / "leaf.key.pem").read_bytes(), None)
    now = datetime.datetime.now(datetime.UTC)
    short = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "example.com")]))
        .issuer_name(ca_cert(ca).subject)
        .public_key(leaf_key.public_key())  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=300))
        .not_valid_after(now + datetime.timedelta(days=10))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("example.com")]), False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    path = leaf_file(ca_dir, "example.com")
    path.parent.mkdir(mode=0o700)
    stale = short.public_bytes(serialization.Encoding.PEM) + ca.cert_pem
    path.write_bytes(stale)
    ca.leaf_context("example.com")
    assert path.read_bytes() != stale
    leaf = leaf_chain(ca_dir, "example.com")[0]
    assert leaf.not_valid_after_utc > now + datetime.timedelta(days=300)


async def test_leaf_context_async(ca: CertificateAuthority) -> None:
    context = await ca.leaf_context_async("example.com")
    assert await ca.leaf_context_async("example.com") is context
    assert ca.leaf_context("example.com") is context


# --- real TLS handshakes ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def tls_server(context: ssl.SSLContext):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            writer.write(await reader.readexactly(5))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_handshake_with_a_client_trusting_the_ca(ca: CertificateAuthority) -> None:
    async with tls_server(ca.leaf_context("localhost")) as port:
        client = ssl.create_default_context(cafile=ca.cert_path)
        client.set_alpn_protocols(["h2", "http/1.1"])
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost"),
            10,
        )
        try:
            assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "http/1.1"
            assert writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
            writer.write(b"hello")
            assert await asyncio.wait_for(reader.readexactly(5), 10) == b"hello"
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()


async def test_handshake_with_an_ip_address(ca: CertificateAuthority) -> None:
    async with tls_server(ca.leaf_context("127.0.0.1")) as port:
        client = ssl.create_default_context(cafile=ca.cert_path)
        _, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="127.0.0.1"),
            10,
        )
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


async def test_handshake_fails_without_trusting_the_ca(ca: CertificateAuthority) -> None:
    async with tls_server(ca.leaf_context("localhost")) as port:
        client = ssl.create_default_context()
        with pytest.raises(ssl.SSLCertVerificationError):
            await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost"),
                10,
            )


async def test_handshake_fails_for_another_host_name(ca: CertificateAuthority) -> None:
    async with tls_server(ca.leaf_context("example.com")) as port:
        client = ssl.create_default_context(cafile=ca.cert_path)
        with pytest.raises(ssl.SSLCertVerificationError):
            await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost"),
                10,
            )


# --- a local test server's certificate (wwwproxy ca --test-cert) ------------------------------


@pytest.mark.parametrize(
    ("host", "san", "name"),
    [
        ("localhost", x509.DNSName("localhost"), "localhost"),
        ("Test.Example", x509.DNSName("test.example"), "test.example"),
        ("127.0.0.1", x509.IPAddress(ipaddress.ip_address("127.0.0.1")), "127.0.0.1"),
        ("[::1]", x509.IPAddress(ipaddress.ip_address("::1")), "::1"),
    ],
)
def test_self_signed_certificate_names_its_one_host(host: str, san: object, name: str) -> None:
    cert_pem, key_pem = self_signed_certificate(host)
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.subject == cert.issuer  # its own issuer: upstream_ca trusts it alone
    cert.verify_directly_issued_by(cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value == (
        x509.SubjectAlternativeName([san])  # type: ignore[list-item]
    )
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    key = serialization.load_pem_private_key(key_pem, None)
    assert key.public_key() == cert.public_key()


@pytest.mark.parametrize("host", ["", "bad host", "a/b"])
def test_self_signed_certificate_for_no_host_is_an_error(host: str) -> None:
    with pytest.raises(CertificateError):
        self_signed_certificate(host)


@pytest.mark.parametrize("strict", [False, True])
async def test_a_client_trusting_the_test_certificate_verifies_it(
    tmp_path: Path, strict: bool
) -> None:
    """As upstream_ca (the proxy's tls_context loads it so), for a name and an address; also
    under OpenSSL's strict checks (Python 3.13's default)."""
    for host in ("localhost", "127.0.0.1"):
        cert_pem, key_pem = self_signed_certificate(host)
        (tmp_path / "cert.pem").write_bytes(cert_pem)
        (tmp_path / "key.pem").write_bytes(key_pem)
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
        async with tls_server(server) as port:
            client = ssl.create_default_context(cafile=tmp_path / "cert.pem")
            if strict:
                client.verify_flags |= ssl.VERIFY_X509_STRICT
            _, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=host), 10
            )
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
            other = ssl.create_default_context(cafile=tmp_path / "cert.pem")
            with pytest.raises(ssl.SSLCertVerificationError):  # for its host only
                await asyncio.wait_for(
                    asyncio.open_connection(
                        "127.0.0.1", port, ssl=other, server_hostname="elsewhere.example"
                    ),
                    10,
                )


def test_local_server_help_names_the_files_and_the_configuration(tmp_path: Path) -> None:
    text = local_server_help("::1", tmp_path / "c.pem", tmp_path / "k.pem", 9443)
    assert "https://[::1]:9443/" in text
    assert f"openssl s_server -accept 9443 -cert {tmp_path}/c.pem -key {tmp_path}/k.pem" in text
    assert f"upstream_ca: {tmp_path}/c.pem" in text
    assert 'https_intercept: ["::1"]' in text and "connect_ports: [443, 9443]" in text


# --- which hosts to intercept -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "host", "expected"),
    [
        ("*", "example.com", True),
        ("*", "127.0.0.1", True),
        ("*", "[::1]", True),
        ("example.com", "example.com", True),
        ("example.com", "EXAMPLE.COM", True),
        ("Example.Com", "example.com", True),
        ("example.com", "example.com.", True),
        ("example.com.", "example.com", True),
        ("example.com", "www.example.com", False),
        ("example.com", "example.org", False),
        ("example.com", "notexample.com", False),
        ("*.example.com", "www.example.com", True),
        ("*.example.com", "a.b.c.example.com", True),
        ("*.example.com", "WWW.EXAMPLE.COM.", True),
        ("*.example.com", "example.com", False),
        ("*.example.com", "notexample.com", False),
        ("*.example.com", "www.example.com.evil.org", False),
        ("*.example.com", "example.org", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "127.0.0.2", False),
        ("*.0.0.1", "127.0.0.1", False),
        ("::1", "[::1]", True),
        ("[::1]", "::1", True),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("::1", "::2", False),
        ("127.0.0.1", "localhost", False),
        ("", "example.com", False),
        ("example.com", "", False),
    ],
)
def test_host_matches(pattern: str, host: str, expected: bool) -> None:
    assert host_matches(pattern, host) is expected


@pytest.mark.parametrize(
    ("host", "intercept", "bypass", "expected"),
    [
        ("example.com", [], [], False),
        ("example.com", [], ["*"], False),
        ("example.com", ["*"], [], True),
        ("example.com", ["*"], ["example.com"], False),
        ("www.example.com", ["*"], ["*.example.com"], False),
        ("example.com", ["*"], ["*.example.com"], True),
        ("bank.example", ["*.example"], ["bank.example"], False),
        ("news.example", ["*.example"], ["bank.example"], True),
        ("example.org", ["example.com", "example.org"], [], True),
        ("example.net", ["example.com", "example.org"], [], False),
        ("[::1]", ["::1"], [], True),
        ("127.0.0.1", ["*"], ["127.0.0.1"], False),
    ],
)
def test_should_intercept(host: str, intercept: list[str], bypass: list[str], expected: bool):
    assert should_intercept(host, intercept, bypass) is expected


# --- instructions -----------------------------------------------------------------------------


def test_install_help_names_the_file_and_every_client(tmp_path: Path) -> None:
    path = tmp_path / "my cache" / "certificates" / "ca.cert.pem"
    text = install_help(path)
    assert str(path) in text
    assert f"-i '{path}'" in text  # quoted for the shell: the path has a space
    for needle in [
        "Trust this CA to identify websites",
        '-t "C,,"',
        "sql:$HOME/.mozilla/firefox/",
        "sql:$HOME/.pki/nssdb",
        "certutil -N -d sql:$HOME/.pki/nssdb --empty-password",  # a fresh account has no database
        "libnss3-tools",
        "--cacert",
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "/usr/local/share/ca-certificates/wwwproxy.crt",
        "update-ca-certificates",
    ]:
        assert needle in text, needle


def test_docs_page_gives_the_same_commands() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    text = install_help(Path("cache/certificates/ca.cert.pem"))
    commands = [
        line.strip()
        for line in text.splitlines()
        if line.strip().startswith(("certutil ", "curl ", "sudo ", "export ", "mkdir ", "test -e "))
    ]
    assert len(commands) >= 8
    for command in commands:
        assert command in docs, command
