//! The sentence the doctor chapter rests on: hyper 1.x has a header read
//! timeout but no write timeout. The server-timeouts lab's hardened server
//! (a header read timeout, tower-http's body timeout and handler deadline)
//! still holds a client that sends requests and never reads the answers;
//! the doctor's hardened service, with its `WriteTimeout`, does not.

use std::time::Duration;

use lab_doctor::{Grade, checks::Probe, checks::slow_read::slow_read};
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
    let probe_of = Probe {
        addr,
        host: addr.to_string(),
        options,
    };
    let finding = slow_read(&probe_of).await.unwrap();
    assert_eq!(finding.grade, Grade::Fail, "{finding:?}");
    assert_eq!(finding.measured, "still open at 3.00 s");
}
