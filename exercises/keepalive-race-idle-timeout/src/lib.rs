//! # Exercise: an idle timeout that loses the race with the balancer
//!
//! This service runs behind a load balancer that keeps idle connections to
//! it open for `balancer_idle` (60 s on an AWS ALB) and reuses them for the
//! next request. The team set the service's idle timeout to match.
//!
//! Verify: `cargo xtask exercise verify keepalive-race-idle-timeout`.

use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::TokioTimer;

/// The HTTP/1 settings of the service's connections.
pub fn http1_settings(balancer_idle: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new());
    // TODO: "the same as the balancer" is not enough. hyper's
    // `header_read_timeout` is the idle timeout between requests: which side
    // must close an idle connection first, and by how much?
    builder.header_read_timeout(balancer_idle);
    builder
}
