//! Real headless Chromium, driven through chromedriver's WebDriver HTTP API
//! with a few dozen lines of std networking (no browser-automation crate, no
//! downloaded browser): the browser checks of `cargo xtask test`.

use std::{
    env,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
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
        become_subreaper()?;
        // Its own group (Chromium joins it); if the xtask dies, so does the driver.
        lab_kit::process::own_group_killed_with_parent(&mut command);
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
            // The book is served from 127.0.0.1 by address: every host name
            // resolves to nothing, so the browser's own services (autofill,
            // updates, ...) cannot send a packet off the machine.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
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

    /// Opens `url` and returns once that page, and not the one before it,
    /// has loaded completely: the browser shows `url`, the document was
    /// parsed to its end and its load event ran, the server answered 200,
    /// and all `expected_bytes` of the page arrived. Fails with one line
    /// naming the page and what was missing.
    ///
    /// chromedriver's own wait (the "normal" page-load strategy) ends when
    /// the frame stops loading, and it answers success in two cases where the
    /// page is not there: the navigation was aborted (Page.navigate reports
    /// net::ERR_ABORTED, the old document stays), or the document's response
    /// broke off after the page was shown (the frame stops loading, the page
    /// stays half-parsed with `readyState` "loading", and a script run in it
    /// sees a DOM without its content). So this does not take chromedriver's
    /// word for it.
    pub fn open(&self, url: &str, expected_bytes: u64) -> Result<()> {
        // A mark on the document being left: the new document has none, so a
        // state read from the old one is never mistaken for the new one's.
        // It cannot be set on an error page, which the URL check catches.
        let _ = self.eval("window.__xtaskLeftBehind = true; return true;");
        self.call(
            "POST",
            &format!("/session/{}/url", self.session),
            &json!({"url": url}),
        )?;
        let deadline = Instant::now() + PAGE_LOAD_WAIT;
        loop {
            let state = PageState::read(self)?;
            match state.verdict(url, expected_bytes) {
                Verdict::Loaded => return Ok(()),
                Verdict::Failed(reason) => bail!("{url}: {reason} ({state})"),
                Verdict::Loading if Instant::now() >= deadline => bail!(
                    "{url}: the page did not finish loading within {} s ({state})",
                    PAGE_LOAD_WAIT.as_secs()
                ),
                // Still parsing or loading: wait for it, not for a fixed time.
                Verdict::Loading => thread::sleep(Duration::from_millis(50)),
            }
        }
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

/// How long `open` waits for a page chromedriver says has loaded to be
/// complete. A page of the book loads in well under a second on a quiet
/// machine; this bound only turns a page that never completes into an error.
const PAGE_LOAD_WAIT: Duration = Duration::from_secs(30);

/// A page's loading state as its document and its navigation timing tell it.
struct PageState {
    url: String,
    left_behind: bool,
    ready_state: String,
    load_event_ended: bool,
    response_ended: bool,
    status: u64,
    bytes: u64,
}

enum Verdict {
    Loaded,
    Loading,
    Failed(&'static str),
}

impl PageState {
    const SCRIPT: &str = r#"
        const navigation = performance.getEntriesByType('navigation')[0];
        return {
          url: location.href,
          left_behind: window.__xtaskLeftBehind === true,
          ready_state: document.readyState,
          load_event_ended: !!navigation && navigation.loadEventEnd > 0,
          response_ended: !!navigation && navigation.responseEnd > 0,
          status: navigation ? navigation.responseStatus : 0,
          bytes: navigation ? navigation.decodedBodySize : 0,
        };
    "#;

    fn read(browser: &Browser) -> Result<PageState> {
        let value = browser.eval(Self::SCRIPT)?;
        Ok(PageState {
            url: value["url"].as_str().unwrap_or_default().to_string(),
            left_behind: value["left_behind"] == Value::Bool(true),
            ready_state: value["ready_state"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            load_event_ended: value["load_event_ended"] == Value::Bool(true),
            response_ended: value["response_ended"] == Value::Bool(true),
            status: value["status"].as_u64().unwrap_or(0),
            bytes: value["bytes"].as_u64().unwrap_or(0),
        })
    }

    fn verdict(&self, url: &str, expected_bytes: u64) -> Verdict {
        if self.left_behind {
            // The navigation has not replaced the previous document yet.
            return Verdict::Loading;
        }
        if self.url != url {
            return Verdict::Failed("the browser shows another page");
        }
        if self.response_ended && self.status != 200 {
            return Verdict::Failed("the server did not answer 200");
        }
        if self.response_ended && self.bytes != expected_bytes {
            return Verdict::Failed("the page's response broke off");
        }
        if self.ready_state == "complete" && self.load_event_ended && self.response_ended {
            Verdict::Loaded
        } else {
            Verdict::Loading
        }
    }
}

impl std::fmt::Display for PageState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "shown: {}, readyState {}, load event {}, status {}, {} bytes",
            self.url,
            self.ready_state,
            if self.load_event_ended {
                "done"
            } else {
                "not done"
            },
            self.status,
            self.bytes
        )
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

/// Chromium starts its crash handler with a double fork in a session of its
/// own, outside chromedriver's process group, so killing the group does not
/// reach it. As a subreaper, the xtask becomes the parent of every process
/// the browser orphans (that handler, and the killed group's processes once
/// chromedriver is gone) and can end and reap them itself.
fn become_subreaper() -> Result<()> {
    // SAFETY: prctl(2) with an integer argument; it changes only this process.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } != 0 {
        bail!(
            "making the xtask a subreaper: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The xtask's children that are Chromium processes (`chromium`,
/// `chrome_crashpad_handler`), from every thread's list of children.
fn chromium_children() -> Vec<libc::pid_t> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return found;
    };
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
        {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if name.starts_with("chrom") {
                found.push(pid);
            }
        }
    }
    found
}

/// Ends what is left of the browser after its group was killed: every
/// Chromium process the xtask inherited is killed and reaped, and the wait
/// lasts until no process of the group is left either (bounded, so a process
/// stuck in the kernel cannot hang the xtask).
fn end_leftovers(group: libc::pid_t) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = chromium_children();
        for &pid in &children {
            // SAFETY: kill(2) and a non-blocking waitpid(2) on the xtask's own
            // child; one still dying is reaped on a later turn.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
        // SAFETY: signal 0 only asks whether a process of the group exists.
        let group_alive = unsafe { libc::kill(-group, 0) } == 0;
        if (children.is_empty() && !group_alive) || Instant::now() >= deadline {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), &json!({}));
        }
        kill_group(&self.driver);
        let _ = self.driver.wait();
        end_leftovers(self.driver.id() as libc::pid_t);
        crate::reaper::unregister(self.driver.id() as libc::pid_t);
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
