"""A throwaway CA, a server certificate for 127.0.0.1 and localhost, and a client
certificate, written as PEM files into a directory the test owns."""
import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject, key, issuer, issuer_key, *, ca=False, san=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path, *items):
    with open(path, "wb") as f:
        for item in items:
            if isinstance(item, x509.Certificate):
                f.write(item.public_bytes(serialization.Encoding.PEM))
            else:
                f.write(item.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(path)


def make_certs(directory) -> dict:
    """Paths: ca (its certificate), server (key and certificate in one file, as Kafka's PEM
    keystore), server_cert, server_key, client_cert, client_key; and rogue_cert/rogue_key,
    a client certificate from another CA."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("shoal test CA", ca_key, "shoal test CA", ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert("localhost", server_key, "shoal test CA", ca_key,
                   san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("client", client_key, "shoal test CA", ca_key)
    rogue_ca_key = ec.generate_private_key(ec.SECP256R1())
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue = _cert("rogue", rogue_key, "rogue CA", rogue_ca_key)
    return {"ca": _write(directory / "ca.pem", ca), "server": _write(directory / "server.pem", server_key, server),
            "server_cert": _write(directory / "server-cert.pem", server),
            "server_key": _write(directory / "server-key.pem", server_key),
            "client_cert": _write(directory / "client.pem", client), "client_key": _write(directory / "client-key.pem", client_key),
            "rogue_cert": _write(directory / "rogue.pem", rogue), "rogue_key": _write(directory / "rogue-key.pem", rogue_key)}
