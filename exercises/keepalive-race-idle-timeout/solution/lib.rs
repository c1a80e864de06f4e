//! The solution: the backend keeps an idle connection open longer than the
//! balancer does, by more than a round trip, so the balancer (the side that
//! sends requests) is always the one that closes it.

use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::TokioTimer;

/// The HTTP/1 settings of the service's connections.
pub fn http1_settings(balancer_idle: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new());
    // 5 s longer than the balancer: 65 s behind an ALB's 60 s.
    builder.header_read_timeout(balancer_idle + Duration::from_secs(5));
    builder
}
