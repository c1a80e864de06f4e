//! The sentence the doctor chapter rests on: hyper 1.x has a header read
//! timeout but no write timeout. The server-timeouts lab's hardened server
//! (a header read timeout, tower-http's body timeout and handler deadline)
//! still holds a client that sends requests and never reads the answers;
//! the doctor's hardened service, with its `WriteTimeout`, does not. And
//! how the check tells a server's FIN from its reset.

use std::time::Duration;

use lab_doctor::{Grade, checks::Patient, checks::slow_read::slow_read};
use lab_server_timeouts::servers::{Hardening, ServerSetup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyper_with_every_read_timeout_still_holds_a_client_that_never_reads() {
    let second = Duration::from_secs(1);
    let server = ServerSetup::Hardened(Hardening {
        header_read_timeout: second,
        request_body_timeout: second,
        handler_deadline: second,
    })
    .spawn()
    .await
    .unwrap();
    let addr = server.addr();
    let mut options = lab_doctor::options::parse(&[addr.to_string()]).unwrap();
    // Three times every timeout the server has.
    options.window = Duration::from_secs(3);
    let patient = Patient::plain(addr, options);
    let finding = slow_read(&patient).await.unwrap();
    assert_eq!(finding.grade, Grade::Fail, "{finding:?}");
    assert_eq!(finding.measured, "still open at 3.00 s");
}

/// A server that never reads: after `after`, it half-closes (a FIN) or
/// drops the connection with the requests unread (Linux sends a reset).
async fn never_reads(fin: bool, after: Duration) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        tokio::time::sleep(after).await;
        if fin {
            use tokio::io::AsyncWriteExt;
            stream.shutdown().await.unwrap();
            // Held open (half-closed) until the test ends.
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    addr
}

/// The slow-read check tells the two endings apart by its own socket's state
/// in `TCP_INFO`: `CLOSE_WAIT` after the server's FIN, whatever it left
/// unread; `CLOSE` after a reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_read_tells_a_fin_from_a_reset() {
    for (fin, said) in [(true, "closed after"), (false, "reset after")] {
        let addr = never_reads(fin, Duration::from_secs(1)).await;
        let mut options = lab_doctor::options::parse(&[addr.to_string()]).unwrap();
        options.window = Duration::from_secs(5);
        let patient = Patient::plain(addr, options);
        let finding = tokio::time::timeout(Duration::from_secs(20), slow_read(&patient))
            .await
            .expect("the check ends within its window")
            .unwrap();
        assert_eq!(finding.grade, Grade::Pass, "{finding:?}");
        assert!(finding.measured.starts_with(said), "fin {fin}: {finding:?}");
    }
}
