"""What a secured mini cluster needs besides Hadoop: a KDC with principals and a
keytab, and a CA with a server certificate for HTTPS.

**Kerberos.** Hadoop's own MiniKdc (``org.apache.hadoop:hadoop-minikdc``, Apache
Kerby inside) runs as one more JVM from the same Maven Central jars, through its
standalone ``main``: it binds a free TCP port on 127.0.0.1, creates every principal
with a random key and writes them all to one keytab. The harness then writes its
own ``krb5.conf`` for both the JVMs (``-Djava.security.krb5.conf``) and MIT
Kerberos in Python (``$KRB5_CONFIG``):

- ``kdc = 127.0.0.1:<port>`` (MiniKdc's own file says ``localhost``, which may be
  tried as ::1 first) over TCP only (``udp_preference_limit = 1``);
- ``dns_canonicalize_hostname = false`` and ``rdns = false``: a client asking for
  ``HTTP@127.0.0.1`` gets a ticket for ``HTTP/127.0.0.1@REALM`` rather than for
  whatever the reverse lookup of 127.0.0.1 says on this machine (``localhost``);
  the keytab holds ``HTTP/localhost`` too and the daemons accept every ``HTTP/*``
  principal of the keytab, so a client with the default canonicalisation works too.

Daemon principals name the host explicitly (``rm/127.0.0.1@REALM``) instead of
``_HOST``: Hadoop replaces ``_HOST`` with the machine's canonical host name in some
code paths and with the bind address in others, which differ on a test machine.

**TLS.** A throw-away CA and a server certificate for ``127.0.0.1`` and
``localhost`` (Python ``cryptography``), the key and chain in a PKCS#12 keystore
that Hadoop's ``ssl-server.xml`` names. Clients trust the CA's PEM file.
"""

from __future__ import annotations

import datetime
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.layout import HOST

REALM = "YARN-ADAPT.TEST"
CLIENT_USER = "yarn-adapt"
KDC_MAIN = "org.apache.hadoop.minikdc.MiniKdc"
KDC_READY_LINE = "Standalone MiniKdc Running"
KDC_START_TIMEOUT_S = 60.0

# MiniKdc's properties (MiniKdc.createConf names them); org.name + org.domain make
# the realm.
KDC_PROPERTIES = f"""\
org.name={REALM.split(".")[0]}
org.domain={REALM.split(".", 1)[1]}
kdc.bind.address={HOST}
kdc.port=0
instance=DefaultKrbServer
max.ticket.lifetime=86400000
max.renewable.lifetime=604800000
transport=TCP
debug=false
"""


@dataclass(frozen=True)
class Principals:
    """Every principal of the secured cluster, each with its realm."""

    client: str = f"{CLIENT_USER}@{REALM}"
    resourcemanager: str = f"rm/{HOST}@{REALM}"
    nodemanager: str = f"nm/{HOST}@{REALM}"
    historyserver: str = f"jhs/{HOST}@{REALM}"
    http: str = f"HTTP/{HOST}@{REALM}"
    http_localhost: str = f"HTTP/localhost@{REALM}"

    def names_without_realm(self) -> list[str]:
        """What MiniKdc's main takes: ``primary[/instance]``."""
        every = (self.client, self.resourcemanager, self.nodemanager, self.historyserver,
                 self.http, self.http_localhost)  # fmt: skip
        return [name.rsplit("@", 1)[0] for name in every]


@dataclass(frozen=True)
class KerberosRealm:
    """A running KDC's realm as the cluster and its clients use it."""

    krb5_conf: Path
    keytab: Path
    kdc_port: int
    principals: Principals = Principals()

    @property
    def realm(self) -> str:
        return REALM


@dataclass(frozen=True)
class TlsMaterial:
    """The CA clients trust and the keystore the daemons serve HTTPS with."""

    ca_cert: Path
    keystore: Path
    keystore_password: str

    @property
    def keystore_type(self) -> str:
        return "pkcs12"


# --------------------------------------------------------------------------- Kerberos


def kdc_command(java: Path, flags: list[str], classpath: str, work_dir: Path) -> list[str]:
    """``java ... MiniKdc WORKDIR PROPERTIES KEYTAB PRINCIPALS...``."""
    properties = work_dir / "kdc.properties"
    properties.write_text(KDC_PROPERTIES)
    return [str(java), *flags, "-cp", classpath, KDC_MAIN, str(work_dir), str(properties),
            str(work_dir / "cluster.keytab"), *Principals().names_without_realm()]  # fmt: skip


def await_kdc(work_dir: Path, log_path: Path, alive: object) -> KerberosRealm:
    """Wait for MiniKdc to say it runs; write the harness's krb5.conf beside it.

    ``alive`` is a zero-argument callable telling whether the KDC process lives.
    """
    deadline = time.monotonic() + KDC_START_TIMEOUT_S
    keytab = work_dir / "cluster.keytab"
    while time.monotonic() < deadline:
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
        if KDC_READY_LINE in log_text and keytab.is_file():
            port = _kdc_port(work_dir / "krb5.conf")
            krb5_conf = work_dir / "krb5-harness.conf"
            krb5_conf.write_text(krb5_conf_text(port))
            return KerberosRealm(krb5_conf=krb5_conf, keytab=keytab, kdc_port=port)
        if callable(alive) and not alive():
            raise MiniClusterError(f"MiniKdc exited during start (log: {log_path})")
        time.sleep(0.1)
    raise MiniClusterError(
        f"MiniKdc did not start within {KDC_START_TIMEOUT_S:.0f} s (log: {log_path})"
    )


def _kdc_port(minikdc_conf: Path) -> int:
    found = re.search(r"kdc_tcp_port\s*=\s*(\d+)", minikdc_conf.read_text())
    if found is None:
        raise MiniClusterError(f"{minikdc_conf}: MiniKdc wrote no kdc_tcp_port")
    return int(found.group(1))


def krb5_conf_text(port: int) -> str:
    return f"""\
[libdefaults]
    default_realm = {REALM}
    udp_preference_limit = 1
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    ticket_lifetime = 24h
    forwardable = true

[realms]
    {REALM} = {{
        kdc = {HOST}:{port}
    }}
"""


# --------------------------------------------------------------------------- TLS


def make_tls_material(directory: Path) -> TlsMaterial:
    """A new CA, a server certificate for 127.0.0.1/localhost signed by it, and a
    PKCS#12 keystore with the server's key and chain."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "yarn-adapt test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
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
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(IPv4Address(HOST)), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    password = secrets.token_urlsafe(18)
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(20_000)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(password.encode())
    )
    keystore_bytes = pkcs12.serialize_key_and_certificates(
        b"server", server_key, server_cert, [ca_cert], encryption
    )
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    keystore = directory / "server.p12"
    keystore.write_bytes(keystore_bytes)
    keystore.chmod(0o600)
    return TlsMaterial(ca_cert=ca_path, keystore=keystore, keystore_password=password)


def ssl_server_properties(tls: TlsMaterial) -> Mapping[str, str]:
    """``ssl-server.xml``: the keystore every HTTPS daemon serves from."""
    return {
        "ssl.server.keystore.location": str(tls.keystore),
        "ssl.server.keystore.type": tls.keystore_type,
        "ssl.server.keystore.password": tls.keystore_password,
        "ssl.server.keystore.keypassword": tls.keystore_password,
    }
