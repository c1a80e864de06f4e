//! How each server of the table starts: on a loopback port of its own, its
//! files in the run's temporary folder, and no timeout set, so that what the
//! doctor measures is the server's own defaults.

use std::path::Path;

use anyhow::{Context, Result, bail};
use lab_kit::nginx::{find, nginx_config};

use super::{Server, strings};
use crate::services::NODE_SERVER;

/// The application gunicorn (`app:app`, WSGI) and uvicorn (`app:asgi`,
/// ASGI) serve: `/`, `/big` and `POST /upload`.
const APP: &str = include_str!("../../wild/app.py");

/// Where distributions keep Apache httpd's modules: Debian and Ubuntu,
/// Fedora and RHEL (64 and 32 bit), Alpine.
const APACHE_MODULES: [&str; 4] = [
    "/usr/lib/apache2/modules",
    "/usr/lib64/httpd/modules",
    "/usr/lib/httpd/modules",
    "/usr/lib/apache2",
];

/// The command that starts `server` on `port`, its files in `dir`:
/// `program` is where its program is (for the hardened service, the lab's
/// binary, whose `serve hardened` it is).
pub(super) fn command(
    server: &Server,
    program: String,
    port: u16,
    dir: &Path,
) -> Result<Vec<String>> {
    let shown = |path: &Path| path.display().to_string();
    let www = shown(&dir.join("www"));
    let listen = format!("127.0.0.1:{port}");
    Ok(match server.name {
        "hardened" => strings([&program, "serve", "hardened", "--port", &port.to_string()]),
        "nginx" => {
            let block = format!("server {{\n  listen {listen};\n  root {www};\n}}\n");
            let conf = write(dir, "nginx.conf", &nginx_config(dir, &block))?;
            strings([&program, "-c", &conf, "-p", &shown(dir)])
        }
        "python" => strings([
            &program,
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
            &www,
        ]),
        "haproxy" => {
            let text = format!(
                "defaults\n  mode http\nfrontend doctor\n  bind {listen}\n  \
                 http-request return status 200 content-type text/plain string \"ok\"\n"
            );
            let conf = write(dir, "haproxy.cfg", &text)?;
            strings([&program, "-f", &conf, "-db"])
        }
        // `-X`: one process, no children (see `apache_config`).
        "apache" => {
            let conf = write(dir, "httpd.conf", &apache_config(dir, &listen)?)?;
            strings([&program, "-f", &conf, "-X"])
        }
        "caddy" => {
            // Caddy keeps its state under $HOME and the XDG folders: here,
            // in the run's folder, which goes when the run ends.
            let env = find("env").context("env is not installed")?;
            let home = shown(dir);
            strings([
                &shown(&env),
                &format!("HOME={home}"),
                &format!("XDG_DATA_HOME={home}/data"),
                &format!("XDG_CONFIG_HOME={home}/config"),
                &program,
                "file-server",
                "--listen",
                &listen,
                "--root",
                &www,
            ])
        }
        "gunicorn" => {
            write(dir, "app.py", APP)?;
            strings([
                &program,
                "--bind",
                &listen,
                "--chdir",
                &shown(dir),
                "app:app",
            ])
        }
        "uvicorn" => {
            write(dir, "app.py", APP)?;
            let port = port.to_string();
            let app_dir = shown(dir);
            strings([
                &program,
                "--host",
                "127.0.0.1",
                "--port",
                &port,
                "--app-dir",
                &app_dir,
                "app:asgi",
            ])
        }
        // Java's simple file server (JDK 18 and later).
        "java" => strings([
            &program,
            "-b",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-d",
            &www,
        ]),
        "node" => strings([&program, NODE_SERVER, &port.to_string()]),
        other => bail!("no command to start {other}"),
    })
}

/// A minimal httpd.conf: the event MPM, a document root, no timeout set
/// (so `Timeout`, `KeepAliveTimeout` and the rest are the compiled-in
/// defaults; mod_reqtimeout, which Debian's own configuration enables, is
/// not loaded). Apache runs it with `-X`, one process: with `-DFOREGROUND`
/// its workers are the master's children, and a lab killed outright
/// (SIGKILL, which no cleanup sees) left them running as orphans; the
/// timeouts are the same compiled-in defaults either way. Started as root
/// it still outlives such a kill: switching to `User` clears the
/// parent-death signal (prctl(2)), as for any server that drops privileges.
fn apache_config(dir: &Path, listen: &str) -> Result<String> {
    let modules = APACHE_MODULES
        .iter()
        .map(Path::new)
        .find(|modules| modules.join("mod_mpm_event.so").is_file())
        .with_context(|| {
            format!(
                "Apache's modules (mod_mpm_event.so) are in none of {}",
                APACHE_MODULES.join(", ")
            )
        })?
        .display();
    let dir = dir.display();
    Ok(format!(
        "ServerRoot \"{dir}\"\nServerName localhost\nListen {listen}\n\
         LoadModule mpm_event_module {modules}/mod_mpm_event.so\n\
         LoadModule authz_core_module {modules}/mod_authz_core.so\n\
         LoadModule dir_module {modules}/mod_dir.so\n\
         # Started as root, its children run as nobody; otherwise ignored.\n\
         User #65534\nGroup #65534\n\
         PidFile {dir}/httpd.pid\nErrorLog {dir}/apache-error.log\n\
         DocumentRoot \"{dir}/www\"\n"
    ))
}

/// Writes `text` to `dir/name` and returns its path.
fn write(dir: &Path, name: &str, text: &str) -> Result<String> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path.display().to_string())
}
