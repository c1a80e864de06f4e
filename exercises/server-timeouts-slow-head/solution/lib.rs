//! The solution: each connection is served by hyper's HTTP/1 builder with a
//! timer, so its `header_read_timeout` runs (without a timer hyper skips it,
//! which is what `axum::serve` does): a half-sent head is closed after
//! `head_timeout`.

use std::{io, time::Duration};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::net::TcpListener;

/// Serves `app` on `listener` until the listener fails.
pub async fn serve(listener: TcpListener, app: Router, head_timeout: Duration) -> io::Result<()> {
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new());
    builder.header_read_timeout(head_timeout);
    loop {
        let (stream, _peer) = listener.accept().await?;
        let service = TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        // A timed-out head ends the connection with an error: routine.
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
}
