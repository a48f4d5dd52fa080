"""Certificates for HTTPS interception: a local certificate authority and leaf certificates.

To read and record an HTTPS exchange the proxy must, after a CONNECT, finish the TLS handshake
with the browser itself, presenting a certificate for the requested host that the browser
trusts.  It does so with a CA created once per cache (``<cache>/certificates/``), which the user
imports into the browser once (:func:`install_help`), and with short-lived leaf certificates it
signs on demand.

Everything secret stays in that directory with owner-only permissions.  An existing CA is
never replaced: the user may have told browsers to trust it, so a broken one is an error to
fix by hand, not something to paper over.  All leaves share one key pair (generating an EC key
per host would only cost time) and are cached in memory and on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import fcntl
import hashlib
import ipaddress
import json
import os
import shlex
import socket
import ssl
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..url.hosts import host_ip as _ip
from ..url.hosts import host_matches
from ..url.hosts import normalize_host as _normalize_host

__all__ = [
    "CertificateAuthority",
    "CertificateError",
    "host_matches",
    "install_help",
    "should_intercept",
    "self_signed_certificate",
    "local_server_help",
]

CA_KEY_FILE = "ca.key.pem"
CA_CERT_FILE = "ca.cert.pem"
LEAF_KEY_FILE = "leaf.key.pem"
LEAVES_DIR = "leaves"
LOCK_FILE = ".lock"

CA_VALIDITY = datetime.timedelta(days=3650)
# Browsers reject server certificates valid for more than 398 days (counted from notBefore to
# notAfter); notBefore is backdated a day for clocks that run slow, so 397 days in all.
LEAF_VALIDITY = datetime.timedelta(days=397)
BACKDATE = datetime.timedelta(days=1)
RENEW_BEFORE = datetime.timedelta(days=30)
MEMORY_CACHE_SIZE = 1000
#: what a server certificate's key may do: sign the TLS handshake, nothing else
SERVER_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=False,
    crl_sign=False,
    encipher_only=False,
    decipher_only=False,
)
CN_MAX = 64  # ub-common-name (RFC 5280)

_CAKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class CertificateError(ValueError):
    """The certificate directory holds something unusable (the message names the file)."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _spki(public: PublicKeyTypes) -> bytes:
    """A public key's DER SubjectPublicKeyInfo, to compare keys of any type."""
    return public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _key_pem(key: _CAKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` so readers (other processes too) see the old file or the new one.  The
    temporary file is created 0600 by mkstemp, so a key is never readable by others, not
    even for a moment."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
            os.fchmod(file.fileno(), mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _make_private_dir(directory: Path) -> None:
    """Create ``directory`` 0700 (whatever the umask); an existing one is left as it is."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        if not directory.is_dir():
            raise CertificateError(f"{directory}: exists and is not a directory") from None
        return
    os.chmod(directory, 0o700)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive flock on the directory's lock file.  flock locks belong to the open
    file, so this excludes other threads of this process as well as other processes."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CertificateError(f"{path}: cannot be read: {exc.strerror or exc}") from exc


def _load_ca_key(path: Path) -> _CAKey:
    data = _read(path)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError as exc:
        raise CertificateError(
            f"{path}: the private key is encrypted; wwwproxy needs it without a passphrase"
        ) from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise CertificateError(f"{path}: not a readable PEM private key ({exc})") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertificateError(
            f"{path}: a {type(key).__name__} key; only EC and RSA CA keys are supported"
        )
    return key


def _load_ca_cert(path: Path) -> x509.Certificate:
    data = _read(path)
    try:
        cert = x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise CertificateError(f"{path}: not a readable PEM certificate ({exc})") from exc
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    except ValueError as exc:
        raise CertificateError(f"{path}: unreadable certificate extensions ({exc})") from exc
    if constraints is None or not constraints.ca:
        raise CertificateError(f"{path}: not a CA certificate (no basicConstraints CA:TRUE)")
    if cert.not_valid_after_utc <= _now():
        raise CertificateError(
            f"{path}: the CA certificate expired on {cert.not_valid_after_utc:%Y-%m-%d}; "
            f"move {path.parent} aside to create a new CA (and trust that one instead)"
        )
    return cert


def _new_ca(key: _CAKey) -> x509.Certificate:
    hostname = socket.gethostname() or "localhost"
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, f"wwwproxy CA on {hostname}"[:CN_MAX]),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "wwwproxy"),
        ]
    )
    now = _now()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now - BACKDATE + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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


class CertificateAuthority:
    """The local CA of one certificate directory, and the leaf certificates it signs.

    Build it with :meth:`load_or_create`.  Methods are thread-safe; several processes may
    share the directory."""

    def __init__(
        self,
        directory: Path,
        key: _CAKey,
        cert: x509.Certificate,
        leaf_key: ec.EllipticCurvePrivateKey,
    ) -> None:
        self._directory = directory
        self._key = key
        self._cert = cert
        self._cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        self._leaf_key = leaf_key
        self._leaf_spki = _spki(leaf_key.public_key())
        try:
            ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
            self._aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
        except x509.ExtensionNotFound:
            self._aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key())
        # host -> (context, notAfter of its leaf), least recently used first.
        self._contexts: OrderedDict[str, tuple[ssl.SSLContext, datetime.datetime]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._create_lock = threading.Lock()

    @classmethod
    def load_or_create(cls, directory: Path) -> CertificateAuthority:
        """Load the CA in ``directory``, or create one there if it holds none.

        Raises CertificateError if the directory holds half a CA, an unreadable file or a key
        that does not belong to the certificate: the user may trust that CA, so it is never
        overwritten.  Creation runs under a file lock, so concurrent callers (threads or
        processes) end up with the same CA."""
        directory = Path(directory)
        _make_private_dir(directory)
        key_path, cert_path = directory / CA_KEY_FILE, directory / CA_CERT_FILE
        with _locked(directory):
            have_key, have_cert = key_path.exists(), cert_path.exists()
            if have_key and have_cert:
                key = _load_ca_key(key_path)
                cert = _load_ca_cert(cert_path)
                if _spki(key.public_key()) != _spki(cert.public_key()):
                    raise CertificateError(
                        f"{key_path}: this private key does not belong to the certificate "
                        f"{cert_path}; restore the matching pair, or move both aside to "
                        f"create a new CA"
                    )
            elif have_key or have_cert:
                present, missing = (key_path, cert_path) if have_key else (cert_path, key_path)
                raise CertificateError(
                    f"{missing}: missing, while {present} exists; restore it, or move "
                    f"{present} aside to create a new CA"
                )
            else:
                key = ec.generate_private_key(ec.SECP256R1())
                cert = _new_ca(key)
                _write_atomic(key_path, _key_pem(key), 0o600)
                _write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
            leaf_key = cls._load_or_create_leaf_key(directory / LEAF_KEY_FILE)
        return cls(directory, key, cert, leaf_key)

    @staticmethod
    def _load_or_create_leaf_key(path: Path) -> ec.EllipticCurvePrivateKey:
        """The key every leaf shares.  Unlike the CA key it is ours alone (nobody trusts it
        by name), so an unreadable one is simply replaced; the disk leaves made with the old
        one then fail their check and are signed again."""
        with contextlib.suppress(OSError, ValueError, TypeError, UnsupportedAlgorithm):
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            if isinstance(key, ec.EllipticCurvePrivateKey):
                return key
        key = ec.generate_private_key(ec.SECP256R1())
        _write_atomic(path, _key_pem(key), 0o600)
        return key

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate, PEM: what browsers import."""
        return self._cert_pem

    @property
    def cert_der(self) -> bytes:
        """The CA certificate, DER: for tools that want a binary .crt/.cer."""
        return self._cert.public_bytes(serialization.Encoding.DER)

    @property
    def cert_path(self) -> Path:
        """Where the CA certificate is, to show the user or pass as a client's cafile."""
        return self._directory / CA_CERT_FILE

    @property
    def subject(self) -> str:
        """The CA's name (RFC 4514), as browsers list it among the authorities."""
        return self._cert.subject.rfc4514_string()

    @property
    def fingerprint_sha256(self) -> str:
        """SHA-256 of the certificate as colon-separated upper-case hex, the form browsers
        show, so a user can check the CA they imported is this one."""
        return self._cert.fingerprint(hashes.SHA256()).hex(":").upper()

    def leaf_context(self, host: str) -> ssl.SSLContext:
        """A server-side TLS context presenting a certificate for ``host`` (a DNS name in
        A-label form, or an IPv4/IPv6 literal, brackets allowed), chained to this CA.

        Contexts are cached in memory, certificates also on disk; either is renewed when it
        comes within 30 days of expiry.  Raises CertificateError for an unusable host."""
        host = self._check_host(host)
        cached = self._cached(host)
        if cached is not None:
            return cached
        with self._create_lock:
            cached = self._cached(host)  # another thread may have just made it
            if cached is not None:
                return cached
            context, not_after = self._make_context(host)
        with self._cache_lock:
            self._contexts[host] = (context, not_after)
            self._contexts.move_to_end(host)
            while len(self._contexts) > MEMORY_CACHE_SIZE:
                self._contexts.popitem(last=False)
        return context

    async def leaf_context_async(self, host: str) -> ssl.SSLContext:
        """:meth:`leaf_context` without blocking the event loop: a cached context is
        returned at once, a new one (a signature and file I/O, a few ms) is made in a
        thread."""
        cached = self._cached(self._check_host(host))
        if cached is not None:
            return cached
        return await asyncio.to_thread(self.leaf_context, host)

    @staticmethod
    def _check_host(host: str) -> str:
        normalized = _normalize_host(host)
        if not normalized:
            raise CertificateError(f"no host name in {host!r}")
        if _ip(normalized) is None and (
            not normalized.isascii() or any(c.isspace() or c in "/\\[]@" for c in normalized)
        ):
            raise CertificateError(
                f"{host!r}: not a host name in A-label form (IDNA) nor an IP address"
            )
        return normalized

    def _cached(self, host: str) -> ssl.SSLContext | None:
        with self._cache_lock:
            entry = self._contexts.get(host)
            if entry is None:
                return None
            context, not_after = entry
            if not_after - _now() < RENEW_BEFORE:
                del self._contexts[host]
                return None
            self._contexts.move_to_end(host)
            return context

    def _leaf_path(self, host: str) -> Path:
        # A hash, not the name: no host list in a directory listing, no awkward characters.
        digest = hashlib.sha256(host.encode("utf-8")).hexdigest()[:32]
        return self._directory / LEAVES_DIR / f"{digest}.pem"

    def _make_context(self, host: str) -> tuple[ssl.SSLContext, datetime.datetime]:
        path = self._leaf_path(host)
        not_after = self._usable_disk_leaf(path, host)
        if not_after is None:
            leaf = self._sign_leaf(host)
            not_after = leaf.not_valid_after_utc
            _make_private_dir(path.parent)
            _write_atomic(
                path, leaf.public_bytes(serialization.Encoding.PEM) + self._cert_pem, 0o644
            )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # Only HTTP/1.1: the proxy's side of the intercepted connection speaks nothing else.
        context.set_alpn_protocols(["http/1.1"])
        context.load_cert_chain(path, self._directory / LEAF_KEY_FILE)
        return context, not_after

    def _usable_disk_leaf(self, path: Path, host: str) -> datetime.datetime | None:
        """notAfter of the leaf cached at ``path`` if it can be served as it is: for this
        host, with the shared key, signed by this CA, not near expiry, followed by this CA's
        certificate.  Anything else (missing, garbled, from an older CA) means sign anew."""
        try:
            certs = x509.load_pem_x509_certificates(path.read_bytes())
        except (OSError, ValueError):
            return None
        if len(certs) != 2 or certs[1] != self._cert:
            return None
        leaf = certs[0]
        try:
            leaf.verify_directly_issued_by(self._cert)
            san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
            return None
        if _spki(leaf.public_key()) != self._leaf_spki:
            return None
        if list(san) != [self._san_entry(host)]:
            return None
        now = _now()
        if leaf.not_valid_before_utc > now or leaf.not_valid_after_utc - now < RENEW_BEFORE:
            return None
        return leaf.not_valid_after_utc

    @staticmethod
    def _san_entry(host: str) -> x509.GeneralName:
        address = _ip(host)
        if address is None:
            return x509.DNSName(host)
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            address = ipaddress.IPv6Address(address.packed)  # a zone is not part of an address
        return x509.IPAddress(address)

    def _sign_leaf(self, host: str) -> x509.Certificate:
        return _server_certificate(
            self._san_entry(host),
            "wwwproxy",
            self._leaf_key.public_key(),
            self._cert.subject,
            self._aki,
            self._key,
        )


def _server_certificate(
    san: x509.GeneralName,
    organization: str,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name | None,
    authority: x509.AuthorityKeyIdentifier,
    signer: _CAKey,
) -> x509.Certificate:
    """A server certificate for the one host of ``san``, valid from a day ago for
    LEAF_VALIDITY, signed by ``signer`` as ``issuer`` (None: itself)."""
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, str(san.value)[:CN_MAX]),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
        ]
    )
    now = _now()
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer or subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now - BACKDATE + LEAF_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(SERVER_KEY_USAGE, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([san]), critical=False)
        .add_extension(authority, critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .sign(signer, hashes.SHA256())
    )


def self_signed_certificate(host: str) -> tuple[bytes, bytes]:
    """A self-signed certificate for a local HTTPS test server at ``host`` (a name or an IP
    address) and its private key, both PEM (``wwwproxy ca --test-cert``).  It is a server
    certificate (not a CA): naming it in ``upstream_ca`` (or ``curl --cacert``) trusts this
    one server and nothing else.  CertificateError for a host that is neither."""
    host = CertificateAuthority._check_host(host)  # noqa: SLF001 - this module's own rule
    san = CertificateAuthority._san_entry(host)  # noqa: SLF001
    key = ec.generate_private_key(ec.SECP256R1())
    authority = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
        x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    )
    cert = _server_certificate(san, "wwwproxy test server", key.public_key(), None, authority, key)
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def local_server_help(host: str, cert_path: Path, key_path: Path, port: int = 8443) -> str:
    """How to serve HTTPS with a :func:`self_signed_certificate` and have wwwproxy trust and record
    it: a Python one-liner serving the working directory, and the configuration lines."""
    bind = f"[{host}]" if ":" in host else host
    server = (
        "import http.server as h, ssl; "
        f"s = h.ThreadingHTTPServer(({json.dumps(host)}, {port}), h.SimpleHTTPRequestHandler); "
        "c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); "
        f"c.load_cert_chain({json.dumps(str(cert_path))}, {json.dumps(str(key_path))}); "
        "s.socket = c.wrap_socket(s.socket, server_side=True); s.serve_forever()"
    )
    cert, key = shlex.quote(str(cert_path)), shlex.quote(str(key_path))
    return f"""\
wrote {cert_path} (the certificate) and {key_path} (its private key)

An HTTPS test server with it, serving the working directory on https://{bind}:{port}/:
  python3 -c {shlex.quote(server)}
or:
  openssl s_server -accept {port} -cert {cert} -key {key} -WWW

For wwwproxy to trust it, and record it, add to its configuration (then: wwwproxy reload):
  upstream_ca: {cert_path}
  https_intercept: [{json.dumps(host)}]
  connect_ports: [443, {port}]
(only one upstream_ca file: to trust several, put their certificates in one file)"""


def should_intercept(host: str, intercept: Sequence[str], bypass: Sequence[str]) -> bool:
    """Whether to decrypt a CONNECT to ``host``: it matches a pattern in ``intercept`` and
    none in ``bypass`` (bypass wins, so a site that pins its certificate or must not be read
    can be excluded from a ``*``).  An empty ``intercept`` intercepts nothing."""
    if any(host_matches(pattern, host) for pattern in bypass):
        return False
    return any(host_matches(pattern, host) for pattern in intercept)


def install_help(cert_path: Path) -> str:
    """How to make browsers and tools trust the CA at ``cert_path``: without that step every
    intercepted HTTPS site shows a certificate error."""
    cert = shlex.quote(str(cert_path))
    return f"""\
Trusting the wwwproxy certificate authority
===========================================

To record HTTPS pages, wwwproxy presents certificates signed by its own certificate
authority (CA). Browsers and tools accept them only after you tell them to trust the CA
certificate:

    {cert_path}

Only the certificate is imported; the private key (ca.key.pem beside it) must stay private:
anyone holding it can impersonate any web site to every browser that trusts this CA.

Firefox (it keeps its own list of authorities)
  Settings -> Privacy & Security -> Certificates -> View Certificates -> Authorities ->
  Import..., choose the file above, tick "Trust this CA to identify websites", OK.
  Or from a shell, with Firefox closed (Debian package libnss3-tools):
    certutil -A -n wwwproxy -t "C,," -i {cert} -d sql:$HOME/.mozilla/firefox/<profile>
  where <profile> is the profile directory, such as abcd1234.default-release.

Chromium and Google Chrome on Linux (they use the NSS database in ~/.pki/nssdb)
  sudo apt install libnss3-tools
  mkdir -p ~/.pki/nssdb
  test -e ~/.pki/nssdb/cert9.db || certutil -N -d sql:$HOME/.pki/nssdb --empty-password
  certutil -d sql:$HOME/.pki/nssdb -A -t "C,," -n wwwproxy -i {cert}
  (the second line creates the database on an account where Chromium has never run)
  then restart the browser. Or: Settings -> Privacy and security -> Security ->
  Manage certificates, and import the file as a trusted authority.

curl
  curl --cacert {cert} -x http://127.0.0.1:8080 https://example.com/
  or set CURL_CA_BUNDLE (or SSL_CERT_FILE) to the file. Either replaces the usual
  authorities, which is fine while every HTTPS request goes through the proxy.

Python requests
  export REQUESTS_CA_BUNDLE={cert}
  (again instead of the usual authorities; to keep both, install the CA in the system
  store below and point REQUESTS_CA_BUNDLE at /etc/ssl/certs/ca-certificates.crt).

Debian system store (OpenSSL, GnuTLS, curl, wget, Python's ssl module...)
  sudo cp {cert} /usr/local/share/ca-certificates/wwwproxy.crt && sudo update-ca-certificates
  To undo: sudo rm /usr/local/share/ca-certificates/wwwproxy.crt &&
  sudo update-ca-certificates --fresh
"""
