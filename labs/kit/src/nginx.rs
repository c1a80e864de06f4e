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

/// The first version number (`1.22.1`, `v20.20.2` read as `20.20.2`) in a
/// program's banner: `nginx version: nginx/1.22.1`, `node --version`,
/// slowhttptest's usage line.
pub fn version_in(banner: &str) -> Option<String> {
    banner
        .split(|c: char| c.is_whitespace() || c == '/' || c == ',')
        .map(|word| word.strip_prefix('v').unwrap_or(word))
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

/// nginx running in a temporary directory. Dropping it kills nginx and
/// removes the directory.
pub struct Nginx {
    /// The version `nginx -v` reported.
    pub version: String,
    // Declared before the directory: nginx stops before its files go.
    _process: ChildGuard,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx with `http_block` and waits (at most 2 s) until every
    /// address in `listening` accepts a connection. Fails with one line
    /// where nginx is not installed.
    pub async fn start(http_block: &str, listening: &[SocketAddr]) -> Result<Nginx> {
        let program = find("nginx").context("nginx not installed")?;
        let dir = tempfile::tempdir().context("creating a temporary directory for nginx")?;
        let config = dir.path().join("nginx.conf");
        std::fs::write(&config, nginx_config(dir.path(), http_block))
            .context("writing nginx.conf")?;
        let prefix = dir.path().display().to_string();
        let config_arg = config.display().to_string();
        let process =
            ChildGuard::spawn(&program, &["-c", &config_arg, "-p", &prefix], Stdio::null())?;
        for addr in listening {
            let mut listens = false;
            for _ in 0..200 {
                if tokio::net::TcpStream::connect(addr).await.is_ok() {
                    listens = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if !listens {
                bail!("nginx did not listen on {addr} within 2 s");
            }
        }
        Ok(Nginx {
            version: version_of("nginx", &["-v"]).await,
            _process: process,
            dir,
        })
    }

    /// The temporary directory nginx runs in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
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
        assert_eq!(version_in("no number here, 12 or v.1"), None);
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
