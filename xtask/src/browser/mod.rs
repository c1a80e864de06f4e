//! Real headless Chromium, driven through chromedriver's WebDriver HTTP API
//! (a handful of JSON commands over a small blocking HTTP client; no
//! browser-automation crate, no downloaded browser): the browser checks of
//! `cargo xtask test`. `checks` holds those checks: what they assert about
//! the built book.

pub mod checks;
mod page;
mod processes;

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use ureq::{Agent, Body, http::Response};

use page::{PAGE_LOAD_WAIT, PageState, Verdict};
pub use processes::locate;
use processes::{become_subreaper, end_leftovers, kill_group, profiles_dir};

/// The longest one WebDriver command may take, connection to last byte. The
/// slowest commands wait on the browser's own 30 s script and page-load
/// timeouts (set when the session starts), so a command still unanswered
/// past this means chromedriver hung: an error, never a hung xtask.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// chromedriver listens on 127.0.0.1; a connection takes far less than this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A chromedriver process and one browser session; both end when dropped.
pub struct Browser {
    driver: Child,
    /// `http://127.0.0.1:<port>`, chromedriver's address.
    base: String,
    agent: Agent,
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
            base: format!("http://127.0.0.1:{port}"),
            agent: webdriver_agent(COMMAND_TIMEOUT),
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
        let created = browser.post(
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
        self.post(
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
        self.post(
            &format!("/session/{}/execute/sync", self.session),
            &json!({"script": script, "args": []}),
        )
    }

    /// Runs an async script: its last argument is the callback to call with the result.
    pub fn eval_async(&self, script: &str) -> Result<Value> {
        self.post(
            &format!("/session/{}/execute/async", self.session),
            &json!({"script": script, "args": []}),
        )
    }

    /// One Chrome DevTools Protocol command through chromedriver (for what
    /// WebDriver has no command for, such as emulating print media).
    pub fn cdp(&self, command: &str, params: Value) -> Result<Value> {
        self.post(
            &format!("/session/{}/goog/cdp/execute", self.session),
            &json!({"cmd": command, "params": params}),
        )
    }

    /// Console messages at level SEVERE (errors) since the last call.
    pub fn console_errors(&self) -> Result<Vec<String>> {
        let entries = self.post(
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

    /// One WebDriver command with a JSON body; the answer's `value`.
    fn post(&self, path: &str, body: &Value) -> Result<Value> {
        let answer = self
            .agent
            .post(format!("{}{path}", self.base))
            .content_type("application/json")
            .send(body.to_string());
        webdriver_value("POST", path, answer)
    }

    fn delete(&self, path: &str) -> Result<Value> {
        let answer = self.agent.delete(format!("{}{path}", self.base)).call();
        webdriver_value("DELETE", path, answer)
    }
}

/// The HTTP client for chromedriver: every command bounded in time, a new
/// connection for each (no idle connection for chromedriver to drop under a
/// later command), never through a proxy (chromedriver is on 127.0.0.1,
/// whatever `http_proxy` says), and WebDriver's error statuses read as
/// answers, since their JSON body says what went wrong.
fn webdriver_agent(command_timeout: Duration) -> Agent {
    Agent::config_builder()
        .timeout_global(Some(command_timeout))
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .proxy(None)
        .max_idle_connections(0)
        .http_status_as_error(false)
        .build()
        .new_agent()
}

/// A WebDriver answer's `value`, or one line: the command, and the error
/// WebDriver or the connection reported.
fn webdriver_value(
    method: &str,
    path: &str,
    answer: Result<Response<Body>, ureq::Error>,
) -> Result<Value> {
    let text = answer
        .and_then(|mut response| response.body_mut().read_to_string())
        .map_err(|error| anyhow!("WebDriver {method} {path}: {error}"))?;
    let parsed: Value = serde_json::from_str(&text).map_err(|error| {
        anyhow!("WebDriver {method} {path}: chromedriver answered {text:?}: {error}")
    })?;
    let value = parsed.get("value").cloned().unwrap_or(Value::Null);
    if let Some(error) = value.get("error").and_then(Value::as_str) {
        let message = value["message"].as_str().unwrap_or_default();
        let first_line = message.lines().next().unwrap_or_default();
        bail!("WebDriver {method} {path}: {error}: {first_line}");
    }
    Ok(value)
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.delete(&format!("/session/{}", self.session));
        }
        kill_group(&self.driver);
        let _ = self.driver.wait();
        end_leftovers(self.driver.id() as libc::pid_t);
        crate::reaper::unregister(self.driver.id() as libc::pid_t);
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read, Write},
        net::TcpListener,
    };

    use super::*;

    /// A stand-in for chromedriver on 127.0.0.1 that reads one request and
    /// then sends `answer`, or, with `None`, never answers until the test
    /// ends (dropping the returned sender lets it go).
    fn fake_driver(answer: Option<String>) -> (String, mpsc::Sender<()>) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let (done, until_done) = mpsc::channel::<()>();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("one connection");
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            if let Some(answer) = answer {
                let _ = stream.write_all(answer.as_bytes());
            }
            let _ = until_done.recv_timeout(Duration::from_secs(30));
        });
        (base, done)
    }

    fn post(base: &str, timeout: Duration) -> Result<Value> {
        let answer = webdriver_agent(timeout)
            .post(format!("{base}/session/1/url"))
            .content_type("application/json")
            .send(json!({"url": "x"}).to_string());
        webdriver_value("POST", "/session/1/url", answer)
    }

    #[test]
    fn a_hung_driver_is_an_error_within_the_timeout() {
        let (base, _done) = fake_driver(None);
        let started = Instant::now();
        let error = post(&base, Duration::from_millis(300)).expect_err("no answer");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        let message = format!("{error:#}");
        assert!(
            message.starts_with("WebDriver POST /session/1/url: ") && !message.contains('\n'),
            "{message}"
        );
    }

    #[test]
    fn a_webdriver_error_is_one_line_and_a_value_is_read() {
        let error_body = r#"{"value":{"error":"no such window","message":"target window already closed\nfrom unknown error"}}"#;
        let answer = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{error_body}",
            error_body.len()
        );
        let (base, _done) = fake_driver(Some(answer));
        let message = format!("{:#}", post(&base, COMMAND_TIMEOUT).expect_err("an error"));
        assert_eq!(
            message,
            "WebDriver POST /session/1/url: no such window: target window already closed"
        );
        // A chunked answer, as chromedriver may send: its value.
        let (base, _done) = fake_driver(Some(String::from(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
             6\r\n{\"valu\r\n9\r\ne\": [1,2]\r\n1\r\n}\r\n0\r\n\r\n",
        )));
        assert_eq!(
            post(&base, COMMAND_TIMEOUT).expect("a value"),
            json!([1, 2])
        );
    }
}
