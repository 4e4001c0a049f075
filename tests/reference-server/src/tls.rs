//! TLS for the reference server: a private CA made at start, and a certificate for
//! 127.0.0.1 it signs; ALPN offers HTTP/2 and HTTP/1.1.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

/// The acceptor, and the CA certificate (DER) a client must trust.
pub(crate) struct Tls {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) ca: Vec<u8>,
}

pub(crate) fn tls() -> Tls {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "mcp-reference-server CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("a CA key"))
        .expect("a CA certificate");
    let key = KeyPair::generate().expect("a key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("certificate params");
    let cert = params.signed_by(&key, &ca).expect("a certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("default versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("a server config");
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Tls {
        acceptor: TlsAcceptor::from(Arc::new(server)),
        ca: ca.der().to_vec(),
    }
}
