//! TLS targets: `https://HOST:PORT`, or `--tls` with a command. The doctor's
//! client side of TLS is rustls with the `ring` provider (as the conn-reuse
//! lab's), offering TLS 1.2 and 1.3 and ALPN `http/1.1` only: its checks
//! speak HTTP/1.1. The server's certificate is checked against `--ca FILE`,
//! or the system's bundle of authorities, or not at all with `--insecure`;
//! SNI and the name checked are the target's host name.
//!
//! A handshake that fails is one line that names why: a certificate that is
//! untrusted, expired or for another name; a port that answers in plain
//! HTTP; a server that speaks only HTTP/2.

use std::{
    io,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{Context, Result, bail};
use lab_kit::conn::{Conn, Connector, tls_error};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
    SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::CryptoProvider,
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};

/// How the doctor trusts the server's certificate.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Trust {
    /// The system's authorities (`SSL_CERT_FILE`, or the distribution's bundle).
    #[default]
    System,
    /// `--ca FILE`: the authorities in this PEM file.
    Ca(PathBuf),
    /// `--insecure`: any certificate (a self-signed one on a test port).
    Insecure,
}

/// Where distributions keep the bundle of trusted authorities.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The authorities in a PEM file; a file with none is a mistake.
fn roots_from(path: &Path) -> Result<RootCertStore> {
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.with_context(|| format!("{} is not PEM", path.display()))?;
        roots
            .add(cert)
            .with_context(|| format!("a certificate in {} does not parse", path.display()))?;
    }
    if roots.is_empty() {
        bail!("{} holds no PEM certificate", path.display());
    }
    Ok(roots)
}

/// The connector for a TLS target named `host` (SNI, and the name the
/// certificate must carry), trusting as `trust` says, offering `alpn`
/// (`http/1.1` for the HTTP/1.1 checks, `h2` for the HTTP/2 ones).
pub fn connector(host: &str, trust: &Trust, alpn: &[u8]) -> Result<Connector> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("choosing TLS versions")?;
    let mut config = match trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
            .with_no_client_auth(),
        Trust::Ca(path) => builder
            .with_root_certificates(roots_from(path).context("--ca")?)
            .with_no_client_auth(),
        Trust::System => {
            let from_env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
            let bundle = from_env
                .into_iter()
                .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
                .find(|path| path.is_file())
                .context(
                    "no bundle of trusted authorities on this system (SSL_CERT_FILE, \
                     /etc/ssl/certs/ca-certificates.crt, ...): give --ca FILE, or --insecure",
                )?;
            builder
                .with_root_certificates(roots_from(&bundle)?)
                .with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    let server_name = ServerName::try_from(host.to_string())
        .with_context(|| format!("{host:?} is not a host name or an IP address"))?;
    Ok(Connector::Tls {
        config: Arc::new(config),
        server_name,
    })
}

/// What the report says of a TLS session: "TLS 1.3, ALPN http/1.1,
/// certificate not checked (--insecure)".
pub fn describe(conn: &Conn, trust: &Trust) -> Option<String> {
    let session = conn.tls()?;
    let version = match session.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLS 1.3".to_string(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLS 1.2".to_string(),
        Some(other) => format!("{other:?}"),
        None => "TLS".to_string(),
    };
    let alpn = match session.alpn_protocol() {
        Some(protocol) => format!("ALPN {}", String::from_utf8_lossy(protocol)),
        None => "no ALPN".to_string(),
    };
    let certificate = match trust {
        Trust::Insecure => "certificate not checked (--insecure)".to_string(),
        Trust::Ca(path) => format!("certificate checked against {}", path.display()),
        Trust::System => "certificate checked against the system's authorities".to_string(),
    };
    Some(format!("{version}, {alpn}, {certificate}"))
}

/// One line for a connection to a TLS target that failed: the TLS reason
/// where there is one.
pub fn connect_failure(error: &io::Error, addr: SocketAddr, host: &str) -> String {
    let Some(failure) = tls_error(error) else {
        return match error.kind() {
            io::ErrorKind::ConnectionRefused => {
                format!("nothing listens on {addr} (connection refused)")
            }
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => format!(
                "{addr} ended the connection during the TLS handshake (a port that speaks plain \
                 HTTP may do that: give http://{host}/ or HOST:PORT)"
            ),
            _ => format!("cannot connect to {addr} over TLS: {error}"),
        };
    };
    match failure {
        rustls::Error::InvalidCertificate(certificate) => match certificate {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                "{host}'s certificate is not signed by an authority the doctor trusts (a \
                 self-signed certificate?): give --ca FILE with the one that signed it, or \
                 --insecure to skip the check"
            ),
            // A self-signed certificate made as an authority (what `openssl
            // req -x509` makes) is refused as a server's own, trusted or not.
            CertificateError::Other(other) if other.to_string().contains("CaUsedAsEndEntity") => {
                format!(
                    "{host}'s certificate is an authority's (CA:TRUE, as `openssl req -x509` \
                     makes by default), which rustls refuses as a server's own even with --ca: \
                     sign a server certificate with it, or --insecure to skip the check"
                )
            }
            CertificateError::Other(other) => format!(
                "{host}'s certificate was refused ({other}; a self-signed certificate?): give \
                 --ca FILE with the authority that signed it, or --insecure to skip the check"
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => format!(
                "{host}'s certificate has expired ({certificate}): renew it, or --insecure to \
                 probe anyway"
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "{host}'s certificate is not for the name {host} ({certificate}): give the \
                     name it is for (https://NAME:PORT, NAME resolving to loopback), or \
                     --insecure"
                )
            }
            other => format!(
                "{host}'s certificate was refused ({other}): give --ca FILE with the authority \
                 that signed it, or --insecure to skip the check"
            ),
        },
        rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol) => format!(
            "{addr} refused the ALPN protocol the doctor offered (http/1.1 for its HTTP/1.1 \
             checks, h2 for its HTTP/2 ones): if it speaks only HTTP/2, name the h2- checks \
             alone ({})",
            crate::Check::HTTP2.map(crate::Check::name).join(" ")
        ),
        rustls::Error::InvalidMessage(_) => format!(
            "{addr} does not speak TLS: its answer to the TLS handshake is not a TLS record (a \
             plain-HTTP port? give http://{host}/ or HOST:PORT)"
        ),
        other => format!("the TLS handshake with {addr} failed: {other}"),
    }
}

/// `--insecure`: every certificate is accepted; signatures are still
/// checked, so the handshake is a real one.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
