//! Programs the labs compare with but do not depend on (nginx, Node,
//! slowhttptest): where they are, which version, and nginx started in a
//! temporary directory on loopback, in the foreground, as a guarded child.
//!
//! A lab that finds a program missing skips that part with one line; these
//! helpers never install or configure anything outside the temporary
//! directory. The doctor's comparison with slowhttptest and the
//! server-timeouts lab's proxy in front of `axum::serve` both start nginx
//! here.

use std::{
    io::Read,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};

use crate::child::ChildGuard;

/// The path of `program` on PATH (or nginx's usual /usr/sbin), if any.
pub fn find(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&paths)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// The first version number (`1.22.1`, `v20.20.2` read as `20.20.2`,
/// `2.6.12-1+deb12u4` as `2.6.12`) in a program's banner: `nginx version:
/// nginx/1.22.1`, `node --version`, slowhttptest's usage line, HAProxy's,
/// Apache's, gunicorn's `(version 20.1.0)`.
pub fn version_in(banner: &str) -> Option<String> {
    banner
        .split(|c: char| c.is_whitespace() || "/,()".contains(c))
        .map(|word| word.strip_prefix('v').unwrap_or(word))
        .map(|word| word.split(['-', '+']).next().unwrap_or(word))
        .find(|word| {
            let parts: Vec<&str> = word.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// The version `program args` prints (on either stream), read within 5 s;
/// `"unknown"` where it is absent, fails or prints none. A lab records it
/// beside what it measured, so a page says which Node or nginx behaved so.
pub async fn version_of(program: &str, args: &[&str]) -> String {
    let Some(path) = find(program) else {
        return "unknown".into();
    };
    let mut command = Command::new(path);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let Ok(mut child) = ChildGuard::spawn_command(command) else {
        return "unknown".into();
    };
    let (Some(mut stdout), Some(mut stderr)) = (child.take_stdout(), child.take_stderr()) else {
        return "unknown".into();
    };
    let reading = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = stderr.read_to_string(&mut text);
        text
    });
    if !matches!(child.wait_for(Duration::from_secs(5)).await, Ok(Some(_))) {
        return "unknown".into();
    }
    let banner = reading.join().unwrap_or_default();
    version_in(&banner).unwrap_or_else(|| "unknown".into())
}

/// A whole nginx configuration: one process in the foreground (so the
/// guard's group kill stops it), every file it writes inside `dir`, and
/// `http_block` (settings and `server` blocks) inside `http { }`.
pub fn nginx_config(dir: &Path, http_block: &str) -> String {
    let dir = dir.display();
    format!(
        "daemon off;\nmaster_process off;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {dir};\n  proxy_temp_path {dir};\n  \
         fastcgi_temp_path {dir};\n  uwsgi_temp_path {dir};\n  scgi_temp_path {dir};\n\
         {http_block}\n}}\n"
    )
}

/// How many times [`Nginx::start`] tries fresh ports.
const ATTEMPTS: usize = 3;

/// nginx running in a temporary directory. Dropping it kills nginx and
/// removes the directory.
pub struct Nginx {
    /// The version `nginx -v` reported.
    pub version: String,
    addrs: Vec<SocketAddr>,
    // Declared before the directory: nginx stops before its files go.
    _process: ChildGuard,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx on `ports` loopback ports of its own, the servers of its
    /// `http` block written by `http_block` from their addresses, and waits
    /// (at most 2 s an attempt) until nginx itself listens on each. A port
    /// picked free can be taken before nginx binds it (other labs and tests
    /// bind ports at the same time, and `listen` cannot ask for port 0);
    /// a connection to it would then reach that other process, not nginx.
    /// So each listener must be a socket nginx holds
    /// ([`procnet::listens_in`](crate::procnet::listens_in)); when one is
    /// not, or nginx exits, it starts again on other ports, up to three
    /// times. Fails with one line where nginx is not installed, or with the
    /// end of nginx's error log.
    pub async fn start(
        ports: usize,
        http_block: impl Fn(&[SocketAddr]) -> String,
    ) -> Result<Nginx> {
        let program = find("nginx").context("nginx not installed")?;
        let mut failed = String::new();
        for _ in 0..ATTEMPTS {
            let addrs = (0..ports)
                .map(|_| {
                    let port = crate::net::free_loopback_port()?;
                    Ok(SocketAddr::from(([127, 0, 0, 1], port)))
                })
                .collect::<Result<Vec<_>>>()?;
            let dir = tempfile::tempdir().context("creating a temporary directory for nginx")?;
            let config = dir.path().join("nginx.conf");
            std::fs::write(&config, nginx_config(dir.path(), &http_block(&addrs)))
                .context("writing nginx.conf")?;
            let prefix = dir.path().display().to_string();
            let config_arg = config.display().to_string();
            let mut process =
                ChildGuard::spawn(&program, &["-c", &config_arg, "-p", &prefix], Stdio::null())?;
            match not_listening(&mut process, &addrs).await? {
                None => {
                    return Ok(Nginx {
                        version: version_of("nginx", &["-v"]).await,
                        addrs,
                        _process: process,
                        dir,
                    });
                }
                Some(why) => {
                    drop(process);
                    failed = format!("{why}; its error log ends: {}", log_tail(dir.path()));
                }
            }
        }
        bail!("nginx did not start on ports of its own in {ATTEMPTS} attempts: {failed}")
    }

    /// The addresses nginx listens on, one per port asked for, in order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The temporary directory nginx runs in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last lines of nginx's error log, on one line: what a lab adds to
    /// the error of a request through nginx that failed.
    pub fn error_log_tail(&self) -> String {
        log_tail(self.dir.path())
    }
}

/// None once nginx (`process`) holds a listening socket on every address;
/// otherwise why not, after at most 2 s.
async fn not_listening(process: &mut ChildGuard, addrs: &[SocketAddr]) -> Result<Option<String>> {
    for _ in 0..200 {
        if let Some(ended) = process.try_ended()? {
            return Ok(Some(format!("nginx exited ({})", ended.describe())));
        }
        let mut all = true;
        for addr in addrs {
            all &= crate::procnet::listens_in(process.pid(), addr.port())?;
        }
        if all {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let names: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    Ok(Some(format!(
        "nginx did not listen on all of {} within 2 s (another process may hold one)",
        names.join(", ")
    )))
}

/// The last lines of nginx's error log in `dir`, on one line.
fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        "(empty)".into()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_version_from_each_banner() {
        assert_eq!(
            version_in("nginx version: nginx/1.22.1\n").as_deref(),
            Some("1.22.1")
        );
        assert_eq!(version_in("v20.20.2\n").as_deref(), Some("20.20.2"));
        assert_eq!(
            version_in("slowhttptest, a tool to test for slow HTTP DoS vulnerabilities - version 1.8.2\nUsage: slowhttptest [options ...]").as_deref(),
            Some("1.8.2")
        );
        assert_eq!(
            version_in("HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/")
                .as_deref(),
            Some("2.6.12")
        );
        assert_eq!(
            version_in("gunicorn (version 20.1.0)\n").as_deref(),
            Some("20.1.0")
        );
        assert_eq!(
            version_in(
                "Server version: Apache/2.4.71 (Debian)\nServer built:   2026-11-12T08:58:41"
            )
            .as_deref(),
            Some("2.4.71")
        );
        assert_eq!(version_in("no number here, 12 or v.1"), None);
    }

    #[tokio::test]
    async fn nginx_listens_on_ports_it_holds_itself() {
        if find("nginx").is_none() {
            eprintln!("skipped: nginx not installed");
            return;
        }
        let nginx = Nginx::start(2, |addrs| {
            addrs
                .iter()
                .map(|addr| format!("  server {{ listen {addr}; return 204; }}\n"))
                .collect()
        })
        .await
        .expect("nginx starts");
        assert_eq!(nginx.addrs().len(), 2);
        assert_ne!(nginx.addrs()[0], nginx.addrs()[1]);
        for addr in nginx.addrs() {
            tokio::net::TcpStream::connect(addr)
                .await
                .expect("nginx answers");
        }
    }

    #[test]
    fn the_configuration_keeps_every_file_in_its_directory() {
        let config = nginx_config(Path::new("/tmp/x"), "  server { listen 127.0.0.1:1; }");
        assert!(config.contains("daemon off;"));
        assert!(config.contains("pid /tmp/x/nginx.pid;"));
        assert!(config.contains("client_body_temp_path /tmp/x;"));
        assert!(config.contains("server { listen 127.0.0.1:1; }\n}"));
    }
}
