//! The server under test, as a real child process (`lab-shutdown-drain
//! __server ...`) that the lab stops with a real SIGTERM: how it reacts is
//! its [`ShutdownStyle`]. The app it serves is in [`crate::app`].

use std::{
    future::IntoFuture,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use axum::Router;
use lab_kit::{
    flags::Flags,
    net::{AbortOnDrop, bind_loopback},
};
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
    sync::{oneshot, watch},
    time::Instant,
};

use crate::{
    app::{ShutdownAppState, app, close_db, new_state},
    events::EventLog,
};

lab_kit::series! {
    /// How the server reacts to SIGTERM.
    pub enum ShutdownStyle in "probe" {
        /// No handler: SIGTERM's default action ends the process on the spot.
        ExitAtOnce => "exit-at-once",
        /// `axum::serve(..).with_graceful_shutdown(sigterm)` and nothing else.
        GracefulOnly => "graceful-only",
        /// Readiness first, a wait, stop accepting, drain, tell streams to end,
        /// close the database, exit 0; a hard deadline exits 1.
        Full => "full",
        /// Catches SIGTERM and does nothing: a test fixture for the probe.
        IgnoreSigterm => "ignore-sigterm",
    }
}

impl ShutdownStyle {
    pub fn parse(text: &str) -> Result<ShutdownStyle> {
        let Some(style) = ShutdownStyle::named(text) else {
            let names: Vec<&str> = ShutdownStyle::ALL.map(ShutdownStyle::name).to_vec();
            bail!("unknown shutdown style {text:?} ({})", names.join(", "));
        };
        Ok(style)
    }
}

/// The server's knobs, all passed on its command line by the lab.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub style: ShutdownStyle,
    /// After SIGTERM, how long to keep serving with readiness at 503 so the
    /// balancer notices (what a preStop `sleep` does in Kubernetes).
    pub drain_wait: Duration,
    /// From SIGTERM to a forced `exit(1)`; below the orchestrator's grace.
    pub hard_deadline: Duration,
    /// How long `/slow` works unless `?ms=` says otherwise.
    pub slow: Duration,
    /// The full sequence's two signals at SIGTERM, both on unless a flag
    /// turns one off (the lab's idle-close race compares them): readiness
    /// 503, and `Connection: close` on every response while draining.
    pub drain_readiness: bool,
    pub drain_connection_close: bool,
    /// The interval between events on `/events`.
    pub stream_tick: Duration,
    pub db: PathBuf,
    /// 0 lets the kernel pick.
    pub port: u16,
    /// Where to write the bound port (written whole: temp file, rename).
    pub port_file: Option<PathBuf>,
    pub events: Option<PathBuf>,
}

/// Runs the server until its shutdown style decides to exit; returns the exit code.
pub async fn serve(config: ServerConfig) -> Result<i32> {
    let events = EventLog::open(config.events.as_deref())?;
    let (goaway_sender, goaway) = watch::channel(false);
    let state = new_state(&config.db, config.slow, config.stream_tick, goaway)?;
    // Register the handler before announcing the port: a SIGTERM that comes
    // right after the lab learns the port must find it installed.
    let sigterm = match config.style {
        ShutdownStyle::ExitAtOnce => None,
        _ => Some(signal(SignalKind::terminate()).context("installing the SIGTERM handler")?),
    };
    // Not the kit's `bind_loopback`: under the probe the port is fixed
    // (`--port`), as a reader's own server's would be; deploys pass 0.
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, config.port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{}", config.port))?;
    let port = listener
        .local_addr()
        .context("reading the bound port")?
        .port();
    events.log_value("listening", f64::from(port));
    // As this process sees itself: 1 when it is PID 1 of a PID namespace.
    // Logged before the port file announces the port: a server with no
    // SIGTERM handler dies the moment the signal that follows arrives, and
    // written after, its pid was missing from one fresh-clone CI run's log.
    events.log_value("pid", f64::from(std::process::id()));
    if let Some(port_file) = &config.port_file {
        let temporary = port_file.with_extension("tmp");
        std::fs::write(&temporary, port.to_string()).context("writing the port file")?;
        std::fs::rename(&temporary, port_file).context("renaming the port file")?;
    }
    eprintln!(
        "server: {} listening on 127.0.0.1:{port}",
        config.style.name()
    );
    // `/report?ms=N` is not part of the app to copy: it holds its worker
    // thread for N ms without yielding, as an inline report (a CPU-bound
    // loop, a synchronous query) does, so the lab can send SIGTERM while a
    // runtime is blocked (see the chapter, "A blocked runtime at SIGTERM").
    let app = app(Arc::clone(&state)).route("/report", axum::routing::get(inline_report));
    match (config.style, sigterm) {
        (ShutdownStyle::ExitAtOnce, _) | (_, None) => {
            // ANCHOR: exit_at_once
            // No SIGTERM handler at all: the kernel's default action ends the
            // process the moment the signal arrives. Sockets close mid-response.
            axum::serve(listener, app).await.context("serving")?;
            // ANCHOR_END: exit_at_once
            Ok(0)
        }
        (ShutdownStyle::IgnoreSigterm, Some(mut sigterm)) => {
            let server = tokio::spawn(axum::serve(listener, app).into_future());
            while sigterm.recv().await.is_some() {
                events.log("sigterm_ignored");
            }
            server.await.context("the server task failed")??;
            Ok(0)
        }
        (ShutdownStyle::GracefulOnly, Some(mut sigterm)) => {
            // ANCHOR: graceful_only
            let logged = events.clone();
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    sigterm.recv().await;
                    logged.log("sigterm");
                    logged.log("stop_accepting");
                })
                .await
                .context("serving")?;
            // Reached only when every connection has closed: a stream that
            // never ends keeps the process here until SIGKILL.
            // ANCHOR_END: graceful_only
            events.log("drained");
            close_db(&state, &events)?;
            Ok(0)
        }
        (ShutdownStyle::Full, Some(sigterm)) => {
            full_sequence(
                listener,
                app,
                &state,
                &config,
                sigterm,
                goaway_sender,
                &events,
            )
            .await
        }
    }
}

// ANCHOR: full_sequence
/// The whole shutdown sequence, in order, with a hard deadline.
async fn full_sequence(
    listener: TcpListener,
    app: Router,
    state: &ShutdownAppState,
    config: &ServerConfig,
    mut sigterm: tokio::signal::unix::Signal,
    goaway: watch::Sender<bool>,
    events: &EventLog,
) -> Result<i32> {
    let (stop_accepting, stop_accepting_signal) = oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_accepting_signal.await;
            })
            .into_future(),
    );

    sigterm.recv().await;
    let deadline = Instant::now() + config.hard_deadline;
    events.log("sigterm");

    // 1. Readiness first: the balancer's next poll sees 503 and stops routing
    //    here. Responses from now on carry `Connection: close`. (Both are on
    //    unless the lab's idle-close race turns one off.)
    if config.drain_readiness {
        state.ready.store(false, Ordering::SeqCst);
    }
    if config.drain_connection_close {
        state.draining.store(true, Ordering::SeqCst);
    }
    events.log("not_ready");

    // 2. Keep serving while the balancer notices: requests it already routed
    //    here, and those it routes before its next poll, still succeed.
    tokio::time::sleep(config.drain_wait).await;

    // 3. Stop accepting; hyper closes idle keep-alive connections at once and
    //    lets in-flight requests finish with `Connection: close`.
    let _ = stop_accepting.send(());
    events.log("stop_accepting");

    // 4. Tell streams to end (they send `goaway`; clients leave).
    let _ = goaway.send(true);
    events.log("streams_told");

    // 5. Wait for every connection to close, but never past the deadline.
    match tokio::time::timeout_at(deadline, server).await {
        Ok(joined) => joined
            .context("the server task panicked")?
            .context("serving")?,
        Err(_) => {
            events.log("deadline");
            // Exit non-zero so the orchestrator and the logs say it was forced.
            return Ok(1);
        }
    }
    events.log("drained");

    // 6. Only now close the database: no request is left that could use it.
    close_db(state, events)?;
    Ok(0)
}
// ANCHOR_END: full_sequence

// ANCHOR: inline_report
/// Holds this worker thread for `?ms=` (at most 60 s) without an `.await`.
async fn inline_report(uri: axum::http::Uri) -> &'static str {
    let millis = uri
        .query()
        .and_then(|query| query.strip_prefix("ms="))
        .and_then(|value| value.parse().ok())
        .unwrap_or(0u64)
        .min(60_000);
    std::thread::sleep(Duration::from_millis(millis));
    "report\n"
}
// ANCHOR_END: inline_report

/// Serves the same app in this process, never signalled: the healthy peer
/// behind the balancer, until the returned guard is dropped.
pub async fn spawn_peer(db: &Path, stream_tick: Duration) -> Result<(SocketAddr, AbortOnDrop)> {
    let (goaway_sender, goaway) = watch::channel(false);
    let config = ServerConfig {
        style: ShutdownStyle::Full,
        drain_wait: Duration::ZERO,
        hard_deadline: Duration::ZERO,
        slow: Duration::from_millis(100),
        drain_readiness: true,
        drain_connection_close: true,
        stream_tick,
        db: db.to_path_buf(),
        port: 0,
        port_file: None,
        events: None,
    };
    let state = new_state(&config.db, config.slow, config.stream_tick, goaway)?;
    let listener = bind_loopback().await.context("binding the peer")?;
    let addr = listener
        .local_addr()
        .context("reading the peer's address")?;
    let task = AbortOnDrop::spawn(async move {
        // The peer never tells its streams to end: keep the sender alive.
        let _keep_goaway_open = goaway_sender;
        let _ = axum::serve(listener, app(state)).await;
    });
    Ok((addr, task))
}

/// `lab-shutdown-drain __server --style S --db PATH [--port P]
/// [--port-file PATH] [--events PATH] [--drain-wait-ms N] [--deadline-ms N]
/// [--slow-ms N] [--tick-ms N] [--drain-readiness yes|no]
/// [--drain-connection-close yes|no]`: the child process. Exits with the code the
/// style chose (or by the signal, for `exit-at-once`).
pub fn server_main(args: &[String]) -> Result<i32> {
    let config = parse_server_args(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let events = EventLog::open(config.events.as_deref())?;
    let code = runtime.block_on(serve(config))?;
    events.log_value("exit", f64::from(code));
    // `process::exit` in the caller does not wait for tasks still running
    // (a stream the deadline gave up on): that is the point of a deadline.
    Ok(code)
}

fn parse_server_args(args: &[String]) -> Result<ServerConfig> {
    let mut config = ServerConfig {
        style: ShutdownStyle::Full,
        drain_wait: Duration::from_millis(400),
        hard_deadline: Duration::from_millis(1000),
        slow: Duration::from_millis(800),
        drain_readiness: true,
        drain_connection_close: true,
        stream_tick: Duration::from_millis(50),
        db: PathBuf::new(),
        port: 0,
        port_file: None,
        events: None,
    };
    let mut flags = Flags::new(args).for_what("server");
    while let Some(flag) = flags.next_flag()? {
        match flag.name {
            "--style" => config.style = ShutdownStyle::parse(flag.value)?,
            "--db" => config.db = PathBuf::from(flag.value),
            "--port" => config.port = flag.parse("a port")?,
            "--port-file" => config.port_file = Some(PathBuf::from(flag.value)),
            "--events" => config.events = Some(PathBuf::from(flag.value)),
            "--drain-wait-ms" => config.drain_wait = flag.millis()?,
            "--deadline-ms" => config.hard_deadline = flag.millis()?,
            "--slow-ms" => config.slow = flag.millis()?,
            "--tick-ms" => config.stream_tick = flag.millis()?,
            "--drain-readiness" => config.drain_readiness = yes_or_no(flag.value)?,
            "--drain-connection-close" => {
                config.drain_connection_close = yes_or_no(flag.value)?;
            }
            _ => return Err(flag.unknown()),
        }
    }
    if config.db.as_os_str().is_empty() {
        bail!("--db PATH is required");
    }
    Ok(config)
}

fn yes_or_no(text: &str) -> Result<bool> {
    match text {
        "yes" => Ok(true),
        "no" => Ok(false),
        other => bail!("expected yes or no, not {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_its_command_line() {
        let args: Vec<String> = [
            "--style",
            "graceful-only",
            "--db",
            "/tmp/x.db",
            "--deadline-ms",
            "250",
        ]
        .map(String::from)
        .to_vec();
        let config = parse_server_args(&args).expect("valid");
        assert_eq!(config.style, ShutdownStyle::GracefulOnly);
        assert_eq!(config.hard_deadline, Duration::from_millis(250));
        assert!(parse_server_args(&["--style".into()]).is_err());
        assert!(parse_server_args(&["--style".into(), "full".into()]).is_err());
        assert!(parse_server_args(&["--bogus".into(), "1".into()]).is_err());
    }
}
