//! Part 5 in quick mode: behind a bulkhead of 5, a client whose timeout drops
//! the request (reqwest, over HTTP/1.1 and HTTP/2) keeps the provider's
//! concurrency near the bulkhead; a client that races a timer against a
//! spawned request, or a provider that spawns its work, lets the hung
//! requests pile up at the provider.

use lab_cancellation::{Config, provider::run_provider};
use lab_kit::{Lab, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_request_keeps_the_provider_within_the_bulkhead() {
    let config = Config::for_mode(Mode::Quick);
    let views = run_provider(&config).await.expect("the clients run");
    let label = format!("{views:#?}");
    let bulkhead = config.provider_bulkhead as u64;
    let [http1, http2, abandoned, provider_spawns] = views.as_slice() else {
        panic!("four clients: {label}");
    };
    for view in [http1, http2, abandoned, provider_spawns] {
        // Every client met hung calls and timed them out.
        assert!(view.timeouts >= 3, "{label}");
    }
    // The permit goes back the moment the client drops its request; the
    // provider's handler goes when hyper reads the close or the reset, a
    // moment later, so the next call may overlap it: at most one extra call
    // per permit, on a busy machine.
    assert!(http1.peak_at_provider <= bulkhead * 2, "{label}");
    assert!(http2.peak_at_provider <= bulkhead * 2, "{label}");
    assert!(abandoned.peak_at_provider >= bulkhead * 4, "{label}");
    // The same reqwest client against a provider that spawns its work: the
    // client stopped, the provider did not.
    assert!(provider_spawns.peak_at_provider >= bulkhead * 4, "{label}");
    // HTTP/1.1 pays a new connection for every timed-out call; HTTP/2 keeps one.
    assert!(http1.connections_accepted > http1.timeouts, "{label}");
    assert!(http2.connections_accepted <= 2, "{label}");
}
