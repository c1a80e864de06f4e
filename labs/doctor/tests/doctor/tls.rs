//! A port that speaks TLS (a rustls server, at the workspace's pinned
//! version), given to a doctor that speaks HTTP/1.1 over plain TCP: one line
//! that says so, and exit 2, within the first request's bound.

use std::{sync::Arc, time::Duration};

use tokio::{io::AsyncReadExt, net::TcpListener};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer},
    },
};

use crate::doctor::{args, doctor};

/// A rustls server on a loopback port, in a thread of its own that ends
/// with the test binary: it takes every connection through the handshake.
fn rustls_port() -> u16 {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let config = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![made.cert.der().clone()], key)
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
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
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(mut tls) = acceptor.accept(stream).await {
                        let mut sink = Vec::new();
                        let _ = tls.read_to_end(&mut sink).await;
                    }
                });
            }
        });
    });
    port
}

#[test]
fn a_tls_port_is_named_as_one_in_one_line_and_exit_2() {
    let target = format!("127.0.0.1:{}", rustls_port());
    let ran = doctor(&args(&[&target, "idle-keepalive"]), Duration::from_secs(15));
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", ran.stderr);
    assert!(
        lines[0].starts_with(&format!(
            "error: doctor: could not probe: {target} speaks TLS"
        )),
        "{}",
        lines[0]
    );
    assert!(ran.took < Duration::from_secs(10), "{:?}", ran.took);

    let ran = doctor(
        &args(&[&format!("https://{target}")]),
        Duration::from_secs(5),
    );
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert!(ran.stderr.contains("not TLS"), "{}", ran.stderr);
}
