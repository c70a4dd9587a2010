"""The secured cluster's pieces that need no JVM: names, krb5.conf, the CA and the
keystore (the Kerberized cluster itself runs in tests/service/test_secured_live.py)."""

from __future__ import annotations

import ssl
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from yarn_adapt.minicluster import MiniClusterSpec
from yarn_adapt.minicluster.security import (
    REALM,
    Principals,
    krb5_conf_text,
    make_tls_material,
    ssl_server_properties,
)


def test_a_secured_spec_says_so_in_its_label() -> None:
    spec = MiniClusterSpec(scheduler="capacity", conf_store="memory", kerberos=True, https=True)
    assert spec.label == "capacity-memory-kerberos-https"
    assert MiniClusterSpec(scheduler="fair", https=True).label == "fair-https"


def test_krb5_conf_points_at_the_kdc_and_never_canonicalises() -> None:
    text = krb5_conf_text(12345)
    assert "kdc = 127.0.0.1:12345" in text and f"default_realm = {REALM}" in text
    assert "rdns = false" in text and "dns_canonicalize_hostname = false" in text
    assert "udp_preference_limit = 1" in text  # MiniKdc listens on TCP only


def test_daemon_principals_name_the_host_and_http_covers_both_names() -> None:
    names = Principals().names_without_realm()
    assert "rm/127.0.0.1" in names and "nm/127.0.0.1" in names and "jhs/127.0.0.1" in names
    assert {"HTTP/127.0.0.1", "HTTP/localhost"} <= set(names)
    assert not any("_HOST" in name for name in names)


def test_the_server_certificate_is_for_loopback_and_signed_by_the_ca(tmp_path: Path) -> None:
    tls = make_tls_material(tmp_path)
    ca = x509.load_pem_x509_certificate(tls.ca_cert.read_bytes())
    key, cert, chain = pkcs12.load_key_and_certificates(
        tls.keystore.read_bytes(), tls.keystore_password.encode()
    )
    assert key is not None and cert is not None and chain == [ca]
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert IPv4Address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    cert.verify_directly_issued_by(ca)
    assert tls.keystore.stat().st_mode & 0o777 == 0o600
    ssl.create_default_context(cafile=str(tls.ca_cert))  # a CA file Python accepts
    properties = ssl_server_properties(tls)
    assert properties["ssl.server.keystore.type"] == "pkcs12"
    assert properties["ssl.server.keystore.location"] == str(tls.keystore)
