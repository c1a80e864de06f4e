//! Real headless Chromium, driven through chromedriver's WebDriver HTTP API
//! with a few dozen lines of std networking (no browser-automation crate, no
//! downloaded browser): the browser checks of `cargo xtask test`.

use std::{
    env,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

/// Where Chromium and chromedriver are, or one line saying how to get them.
pub fn locate() -> Result<(PathBuf, PathBuf)> {
    let find = |variable: &str, names: &[&str]| -> Option<PathBuf> {
        if let Some(path) = env::var_os(variable) {
            return Some(PathBuf::from(path));
        }
        let path_list = env::var_os("PATH")?;
        env::split_paths(&path_list)
            .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
            .find(|candidate| candidate.is_file())
    };
    let chrome = find("CHROME", &["chromium", "chromium-browser", "google-chrome"]);
    let driver = find("CHROMEDRIVER", &["chromedriver"]);
    match (chrome, driver) {
        (Some(chrome), Some(driver)) => Ok((chrome, driver)),
        _ => bail!(
            "the browser checks need Chromium and chromedriver: on Debian or Ubuntu run \
             `sudo apt-get install chromium chromium-driver` (.ci/run does this), or set CHROME and CHROMEDRIVER"
        ),
    }
}

/// A chromedriver process and one browser session; both end when dropped.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    profile: PathBuf,
}

impl Browser {
    pub fn start() -> Result<Browser> {
        let (chrome, driver_path) = locate()?;
        let mut command = Command::new(&driver_path);
        command
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command.process_group(0);
        // SAFETY: prctl is async-signal-safe; if the xtask dies, so does the driver.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut driver = command
            .spawn()
            .with_context(|| format!("starting {}", driver_path.display()))?;
        // Chromium starts in chromedriver's process group, so killing the
        // group ends both, on drop or when the xtask is stopped by a signal.
        crate::reaper::register(driver.id() as libc::pid_t);
        let stdout = driver
            .stdout
            .take()
            .context("chromedriver's stdout is piped")?;
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    let _ = sender.send(rest.trim_end_matches('.').parse::<u16>().ok());
                }
            }
        });
        let port = match receiver.recv_timeout(Duration::from_secs(15)) {
            Ok(Some(port)) => port,
            _ => {
                kill_group(&driver);
                let _ = driver.wait();
                bail!("chromedriver did not report its port within 15 s");
            }
        };
        let profile = profiles_dir().join(format!("{}-{port}", std::process::id()));
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            profile,
        };
        let arguments = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-first-run",
            "--window-size=1200,900",
        ];
        let mut arguments: Vec<String> = arguments.iter().map(ToString::to_string).collect();
        arguments.push(format!("--user-data-dir={}", browser.profile.display()));
        let created = browser.call(
            "POST",
            "/session",
            &json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": chrome, "args": arguments},
                "goog:loggingPrefs": {"browser": "ALL"},
                "timeouts": {"script": 30000, "pageLoad": 30000}
            }}}),
        )?;
        browser.session = created["sessionId"]
            .as_str()
            .context("chromedriver returned no session id")?
            .to_string();
        Ok(browser)
    }

    /// Opens a page and waits for its load event.
    pub fn goto(&self, url: &str) -> Result<()> {
        self.call(
            "POST",
            &format!("/session/{}/url", self.session),
            &json!({"url": url}),
        )?;
        Ok(())
    }

    /// Runs a script in the page (`return ...;`) and returns its value.
    pub fn eval(&self, script: &str) -> Result<Value> {
        self.call(
            "POST",
            &format!("/session/{}/execute/sync", self.session),
            &json!({"script": script, "args": []}),
        )
    }

    /// Runs an async script: its last argument is the callback to call with the result.
    pub fn eval_async(&self, script: &str) -> Result<Value> {
        self.call(
            "POST",
            &format!("/session/{}/execute/async", self.session),
            &json!({"script": script, "args": []}),
        )
    }

    /// Console messages at level SEVERE (errors) since the last call.
    pub fn console_errors(&self) -> Result<Vec<String>> {
        let entries = self.call(
            "POST",
            &format!("/session/{}/se/log", self.session),
            &json!({"type": "browser"}),
        )?;
        Ok(entries
            .as_array()
            .map(|list| {
                list.iter()
                    .filter(|entry| entry["level"] == "SEVERE")
                    .map(|entry| entry["message"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// One WebDriver command: JSON in, the response's `value` out.
    fn call(&self, method: &str, path: &str, body: &Value) -> Result<Value> {
        let payload = body.to_string();
        let mut stream =
            TcpStream::connect(("127.0.0.1", self.port)).context("connecting to chromedriver")?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
            self.port,
            payload.len()
        )?;
        // chromedriver may keep the connection open whatever we ask, so the
        // body is read by its length rather than to the end of the stream.
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader
                .read_line(&mut line)
                .context("reading chromedriver's answer")?
                == 0
                || line == "\r\n"
            {
                break;
            }
            head.push_str(&line);
        }
        let lower = head.to_ascii_lowercase();
        let body = if let Some(length) = lower
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse::<usize>().ok())
        {
            let mut bytes = vec![0; length];
            reader
                .read_exact(&mut bytes)
                .context("reading chromedriver's answer")?;
            String::from_utf8_lossy(&bytes).into_owned()
        } else if lower.contains("transfer-encoding: chunked") {
            let mut rest = String::new();
            reader
                .read_to_string(&mut rest)
                .context("reading chromedriver's answer")?;
            dechunk(&rest)?
        } else {
            let mut rest = String::new();
            reader
                .read_to_string(&mut rest)
                .context("reading chromedriver's answer")?;
            rest
        };
        let parsed: Value = serde_json::from_str(&body)
            .map_err(|error| anyhow!("chromedriver answered {body:?}: {error}"))?;
        let value = parsed.get("value").cloned().unwrap_or(Value::Null);
        if let Some(error) = value.get("error").and_then(Value::as_str) {
            let message = value["message"].as_str().unwrap_or_default();
            let first_line = message.lines().next().unwrap_or_default();
            bail!("WebDriver {method} {path}: {error}: {first_line}");
        }
        Ok(value)
    }
}

/// Chromium's throwaway profiles live under target/, not /tmp, and a profile
/// left by an xtask that was killed is removed the next time one starts.
fn profiles_dir() -> PathBuf {
    let dir = crate::project::Project::locate()
        .root
        .join("target/browser-profiles");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let owner: Option<libc::pid_t> =
                name.split('-').next().and_then(|pid| pid.parse().ok());
            // SAFETY: signal 0 only asks whether the process exists.
            let alive = owner.is_some_and(|pid| unsafe { libc::kill(pid, 0) == 0 });
            if !alive {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    dir
}

fn dechunk(body: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size_line, after) = rest.split_once("\r\n").context("bad chunk")?;
        let size = usize::from_str_radix(size_line.trim(), 16).context("bad chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(after.get(..size).context("short chunk")?);
        rest = after.get(size + 2..).context("short chunk")?;
    }
}

fn kill_group(child: &Child) {
    // SAFETY: kill(2) on our own child's process group.
    unsafe {
        libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), &json!({}));
        }
        kill_group(&self.driver);
        let _ = self.driver.wait();
        crate::reaper::unregister(self.driver.id() as libc::pid_t);
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
