//! TLS targets: servers on loopback with certificates made here (rcgen, an
//! authority and a server certificate signed by it), at the workspace's
//! pinned rustls. The doctor probes one over TLS, and every handshake that
//! cannot work (plain HTTP on either side, an untrusted or expired
//! certificate, a server that speaks only HTTP/2) is one line and exit 2.
//! nginx over TLS is in `nginx_tls.rs`.

use std::{convert::Infallible, sync::Arc, time::Duration};

use hyper::{Response, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, date_time_ymd};
use tokio::net::TcpListener;
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
    },
};

use crate::doctor::{args, doctor};

/// An authority and a certificate for `localhost` and 127.0.0.1 signed by
/// it, in memory and as PEM (for `--ca`, and for nginx).
pub(crate) struct Pki {
    ca_pem: String,
    pub(crate) cert: CertificateDer<'static>,
    pub(crate) key: Vec<u8>,
}

impl Pki {
    /// An authority for `localhost` that serves as its own certificate, as
    /// `openssl req -x509` makes one by default.
    fn authority_as_server() -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Pki {
            ca_pem: pem("CERTIFICATE", cert.der()),
            cert: cert.der().clone(),
            key: key.serialize_der(),
        }
    }

    pub(crate) fn new(expired: bool) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let mut params = CertificateParams::new(names).unwrap();
        if expired {
            params.not_before = date_time_ymd(2020, 1, 1);
            params.not_after = date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &issuer).unwrap();
        Pki {
            ca_pem: pem("CERTIFICATE", ca_cert.der()),
            cert: cert.der().clone(),
            key: key.serialize_der(),
        }
    }

    fn server_config(&self, alpn: &[&[u8]]) -> Arc<ServerConfig> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()));
        let mut config = ServerConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![self.cert.clone()], key)
        .unwrap();
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        Arc::new(config)
    }

    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The authority's PEM in a file of `dir`, for `--ca`.
    pub(crate) fn ca_file(&self, dir: &tempfile::TempDir) -> String {
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, &self.ca_pem).unwrap();
        path.display().to_string()
    }
}

/// PEM: base64 of `der` in lines of 64, between the label's lines.
pub(crate) fn pem(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut encoded = String::new();
    for chunk in der.chunks(3) {
        let bits = chunk.iter().enumerate().fold(0u32, |bits, (i, byte)| {
            bits | u32::from(*byte) << (16 - 8 * i)
        });
        for i in 0..4 {
            encoded.push(if i <= chunk.len() {
                ALPHABET[(bits >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(64)
        .map(|line| std::str::from_utf8(line).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// A TLS server on a loopback port, in a thread of its own that ends with
/// the test binary, offering `alpn`; it answers every HTTP/1.1 request with
/// 200 and keeps the connection (hyper's defaults: no idle timeout).
fn tls_server(config: Arc<ServerConfig>) -> u16 {
    let acceptor = TlsAcceptor::from(config);
    serve(move |stream| {
        let acceptor = acceptor.clone();
        async move {
            if let Ok(tls) = acceptor.accept(stream).await {
                answer_ok(TokioIo::new(tls)).await;
            }
        }
    })
}

/// A plain HTTP/1.1 server, answering 200 (and 400 to what is not HTTP).
fn plain_server() -> u16 {
    serve(|stream| answer_ok(TokioIo::new(stream)))
}

async fn answer_ok<I>(io: I)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let ok = service_fn(|_| async { Ok::<_, Infallible>(Response::new("ok".to_string())) });
    let _ = http1::Builder::new().serve_connection(io, ok).await;
}

fn serve<F, Fut>(on_connection: F) -> u16
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            loop {
                if let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(on_connection(stream));
                }
            }
        });
    });
    port
}

/// The doctor run on `words` fails to probe: exit 2, one line that starts
/// "could not probe" and contains `says`, within `bound`.
pub(crate) fn one_line(words: &[&str], says: &str, bound: Duration) -> String {
    let ran = doctor(&args(words), bound + Duration::from_secs(5));
    assert_eq!(ran.code, 2, "{words:?}: {}", ran.stderr);
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{words:?}: {}", ran.stderr);
    assert!(
        lines[0].starts_with("error: doctor: could not probe: ") && lines[0].contains(says),
        "{words:?}: {}",
        lines[0]
    );
    assert!(ran.took < bound, "{words:?}: {:?}", ran.took);
    lines[0].to_string()
}

#[test]
fn a_tls_port_spoken_to_in_plain_http_is_one_line_and_exit_2() {
    let port = tls_server(Pki::new(false).server_config(&[b"http/1.1"]));
    let target = format!("127.0.0.1:{port}");
    let bound = Duration::from_secs(10);
    let line = one_line(&[&target, "idle-keepalive"], "speaks TLS", bound);
    assert!(
        line.contains(&format!("{target} speaks TLS: give https://")),
        "{line}"
    );
}

#[test]
fn plain_http_spoken_to_as_tls_is_one_line_and_exit_2() {
    let target = format!("https://127.0.0.1:{}", plain_server());
    one_line(
        &[&target, "--insecure"],
        "does not speak TLS",
        Duration::from_secs(10),
    );
}

#[test]
fn an_untrusted_expired_or_authority_certificate_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bound = Duration::from_secs(10);
    let pki = Pki::new(false);
    let target = format!("https://localhost:{}", tls_server(pki.server_config(&[])));
    // Signed by an authority the doctor is not told of.
    let line = one_line(
        &[&target],
        "not signed by an authority the doctor trusts",
        bound,
    );
    assert!(line.contains("--ca FILE"), "{line}");
    let other = Pki::new(false).ca_file(&dir);
    one_line(
        &[&target, "--ca", &other],
        "not signed by an authority",
        bound,
    );
    // Signed by the authority given, but expired.
    let expired = Pki::new(true);
    let ca = expired.ca_file(&dir);
    let target = format!(
        "https://localhost:{}",
        tls_server(expired.server_config(&[]))
    );
    one_line(&[&target, "--ca", &ca], "certificate has expired", bound);
    // An authority's own certificate, served: refused even when trusted.
    let itself = Pki::authority_as_server();
    let ca = itself.ca_file(&dir);
    let target = format!(
        "https://localhost:{}",
        tls_server(itself.server_config(&[]))
    );
    one_line(
        &[&target, "--ca", &ca],
        "certificate is an authority's",
        bound,
    );
}

#[test]
fn an_http2_only_server_asked_for_http1_is_one_line_and_exit_2() {
    let port = tls_server(Pki::new(false).server_config(&[b"h2"]));
    let target = format!("https://127.0.0.1:{port}");
    let bound = Duration::from_secs(10);
    let line = one_line(&[&target, "--insecure"], "if it speaks only HTTP/2", bound);
    assert!(
        line.contains("refused the ALPN protocol the doctor offered"),
        "{line}"
    );
}

/// With the authority given, the doctor probes over TLS: every check runs
/// (the server answers every path at once, so the slow, heavy and load
/// checks find nothing to judge), and none fails for want of TLS.
#[test]
fn over_tls_every_check_runs() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(false);
    let ca = pki.ca_file(&dir);
    let port = tls_server(pki.server_config(&[b"h2", b"http/1.1"]));
    let target = format!("https://localhost:{port}");
    let words = [
        &target,
        "--ca",
        &ca,
        "--window",
        "1s",
        "--slow-path",
        "/",
        "--heavy-path",
        "/",
        "--load-path",
        "/",
        "--max-in-flight",
        "16",
        "--json",
    ];
    let ran = doctor(&args(&words), Duration::from_secs(40));
    let report: serde_json::Value = serde_json::from_str(&ran.stdout).expect(&ran.stderr);
    let transport = report["transport"].as_str().unwrap();
    assert!(
        transport.starts_with("TLS 1.3, ALPN http/1.1, certificate checked against"),
        "{transport}"
    );
    let findings = report["findings"].as_array().unwrap();
    let grade = |check: &str| {
        let finding = findings
            .iter()
            .find(|finding| finding["check"] == check)
            .unwrap();
        assert_ne!(finding["measured"], "could not finish", "{finding}");
        finding["grade"].as_str().unwrap().to_string()
    };
    // hyper keeps an idle connection for ever: still open at the window.
    assert_eq!(grade("idle-keepalive"), "warn");
    // The canary kept its pace; "/" is not slow, and 16 callers do not
    // overload it, so those say why they judged nothing.
    assert_eq!(grade("blocked-runtime"), "pass");
    for check in ["handler-deadline", "overload", "retry-after", "shutdown"] {
        assert_eq!(grade(check), "skip", "{check}");
    }
}
