//! The server of the file-descriptor part, as a process of its own: this lab's
//! binary re-executed with the hidden subcommand `__fd-server`. It lowers its
//! own soft `RLIMIT_NOFILE` before it binds, prints its port on stdout, and
//! serves until the lab kills it.
//!
//! A process of its own because the limit is per process: lowered in the
//! lab's process it would starve the lab's own clients, and a connection
//! the lab opens would count against the server it measures.

use std::{net::Ipv4Addr, process::ExitCode, time::Duration};

use anyhow::{Context, Result, bail};
use lab_kit::flags::Flags;

use crate::servers::{Hardening, ServerSetup, app};

/// The hidden subcommand that turns the lab binary into the server.
pub const SUBCOMMAND: &str = "__fd-server";

lab_kit::series! {
    /// Which server the descriptor part fills with slow clients.
    pub enum FdServer in "descriptors" {
        /// `axum::serve(tokio::net::TcpListener, app)`: axum's own accept
        /// loop, with what it does on an accept error.
        AxumServe => "axum-serve",
        /// The chapter's hardened server: hyper with a timer, the kit's
        /// accept loop, tower-http's body and handler timeouts.
        Hardened => "hardened",
    }
}

/// What the server process runs, from its command line.
#[derive(Debug, Clone, PartialEq)]
pub struct FdServerArgs {
    pub server: FdServer,
    /// The soft limit on open files it sets itself.
    pub open_files: u64,
    /// The hardened server's timeouts (ignored by `axum::serve`).
    pub hardening: Hardening,
}

impl FdServerArgs {
    pub fn to_args(&self) -> Vec<String> {
        let millis = |duration: Duration| duration.as_millis().to_string();
        vec![
            SUBCOMMAND.into(),
            "--server".into(),
            self.server.name().into(),
            "--open-files".into(),
            self.open_files.to_string(),
            "--header-read-ms".into(),
            millis(self.hardening.header_read_timeout),
            "--body-ms".into(),
            millis(self.hardening.request_body_timeout),
            "--deadline-ms".into(),
            millis(self.hardening.handler_deadline),
        ]
    }

    /// Parses the arguments after the subcommand.
    pub fn parse(args: &[String]) -> Result<FdServerArgs> {
        let mut server = None;
        let mut open_files = 64;
        let mut hardening = Hardening {
            header_read_timeout: Duration::from_secs(90),
            request_body_timeout: Duration::from_secs(10),
            handler_deadline: Duration::from_secs(15),
        };
        let mut flags = Flags::new(args).for_what("fd server");
        while let Some(flag) = flags.next_flag()? {
            match flag.name {
                "--server" => {
                    server = Some(FdServer::named(flag.value).with_context(|| {
                        format!("--server {:?} is not axum-serve or hardened", flag.value)
                    })?)
                }
                "--open-files" => open_files = flag.parse("a number of files")?,
                "--header-read-ms" => hardening.header_read_timeout = flag.millis()?,
                "--body-ms" => hardening.request_body_timeout = flag.millis()?,
                "--deadline-ms" => hardening.handler_deadline = flag.millis()?,
                _ => return Err(flag.unknown()),
            }
        }
        if !(16..=65_536).contains(&open_files) {
            bail!("--open-files must be between 16 and 65536, got {open_files}");
        }
        Ok(FdServerArgs {
            server: server.context("--server is required")?,
            open_files,
            hardening,
        })
    }
}

/// Lowers this process's soft limit on open files to `soft` (never above
/// the hard limit, which stays as it was).
pub fn lower_open_files_limit(soft: u64) -> Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a pointer to ours.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error()).context("reading RLIMIT_NOFILE");
    }
    limit.rlim_cur = soft.min(limit.rlim_max);
    // SAFETY: setrlimit reads one rlimit through a pointer to ours.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(std::io::Error::last_os_error()).context("lowering RLIMIT_NOFILE");
    }
    Ok(())
}

/// The port, on a line of its own: the lab reads it, then connects.
fn announce(port: u16) -> Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{port}").context("printing the port")?;
    stdout.flush().context("printing the port")
}

/// The subcommand's `main`: one line and exit 2 on a bad argument.
pub fn fd_server_main(args: &[String]) -> ExitCode {
    let args = args.to_vec();
    lab_kit::cli::run_subcommand("fd server", async move {
        let args = FdServerArgs::parse(&args)?;
        lower_open_files_limit(args.open_files)?;
        match args.server {
            FdServer::AxumServe => {
                // tokio's listener, not the kit's counting one: the subject
                // is what axum's own accept loop does when accept fails.
                let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .await
                    .context("binding 127.0.0.1:0")?;
                announce(listener.local_addr().context("the bound address")?.port())?;
                axum::serve(listener, app()).await.context("axum::serve")?;
            }
            FdServer::Hardened => {
                let server = ServerSetup::Hardened(args.hardening).spawn().await?;
                announce(server.addr().port())?;
                std::future::pending::<()>().await;
            }
        }
        Ok(())
    })
}
