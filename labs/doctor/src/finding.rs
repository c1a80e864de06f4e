//! What a check concludes: a grade, the number it measured, one sentence of
//! why, and the page of the book that explains it.

use serde::Serialize;

lab_kit::series! {
    /// The checks, in the order the report lists them.
    pub enum Check {
        /// When the server closes an idle keep-alive connection, against the
        /// idle timeout of the balancer in front of it.
        IdleKeepAlive => "idle-keepalive",
        /// Half a request head, then nothing (slowloris).
        SlowHead => "slow-head",
        /// A whole head announcing a body, three bytes of it, then nothing.
        SlowBody => "slow-body",
        /// Requests sent, their answers never read (slow read).
        SlowRead => "slow-read",
        /// A slow path: does the server ever cut it, and with what status.
        HandlerDeadline => "handler-deadline",
        /// A burst on a heavy path while a canary path is timed.
        BlockedRuntime => "blocked-runtime",
        /// A bounded ramp of concurrency: shed, or queue until timeouts.
        Overload => "overload",
        /// The `Retry-After` of the 429s and 503s it sent.
        RetryAfter => "retry-after",
        /// SIGTERM under traffic (needs the command that starts the server).
        Shutdown => "shutdown",
        /// HTTP/2: an idle connection and a PING on it.
        H2Idle => "h2-idle",
        /// HTTP/2: a header block that never ends.
        H2SlowHead => "h2-slow-head",
        /// HTTP/2: a stream whose body stops after 3 of 100 bytes.
        H2SlowBody => "h2-slow-body",
        /// HTTP/2: the stream limit, and a stream past it.
        H2Streams => "h2-streams",
        /// HTTP/2: a client that leaves resets its stream.
        H2Cancel => "h2-cancel",
        /// HTTP/2: SIGTERM with streams in flight (needs the command).
        H2Goaway => "h2-goaway",
    }
}

impl Check {
    /// The HTTP/1.1 checks: the default against a plain-TCP target.
    pub const HTTP1: [Check; 9] = [
        Check::IdleKeepAlive,
        Check::SlowHead,
        Check::SlowBody,
        Check::SlowRead,
        Check::HandlerDeadline,
        Check::BlockedRuntime,
        Check::Overload,
        Check::RetryAfter,
        Check::Shutdown,
    ];

    /// The HTTP/2 checks: added to the default over TLS (ALPN) or with
    /// `--h2c`.
    pub const HTTP2: [Check; 6] = [
        Check::H2Idle,
        Check::H2SlowHead,
        Check::H2SlowBody,
        Check::H2Streams,
        Check::H2Cancel,
        Check::H2Goaway,
    ];

    pub fn is_http2(self) -> bool {
        Check::HTTP2.contains(&self)
    }

    /// The chapter and section that explain what this check looks for.
    pub fn chapter(self) -> &'static str {
        match self {
            Check::IdleKeepAlive => "keepalive-race.html#the-fix",
            Check::SlowHead | Check::SlowBody | Check::HandlerDeadline => {
                "server-timeouts.html#the-fix"
            }
            Check::SlowRead => "doctor.html#slow-read-the-timeout-hyper-does-not-have",
            Check::BlockedRuntime => "blocking-lag.html#the-fix",
            Check::Overload => "overload.html#2-load-shedding",
            Check::RetryAfter => "backoff-jitter.html#the-fix",
            Check::Shutdown => "shutdown-drain.html#the-fix",
            Check::H2Idle
            | Check::H2SlowHead
            | Check::H2SlowBody
            | Check::H2Streams
            | Check::H2Cancel
            | Check::H2Goaway => "doctor.html#the-http2-checks",
        }
    }

    /// Every check's name, for the usage text and an unknown name's error.
    pub fn names() -> String {
        Check::ALL.map(Check::name).join(", ")
    }
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Grade {
    Pass,
    /// Not a failure the check can prove, but worth a look.
    Warn,
    Fail,
    /// The check could not apply (no path given, no command, nothing to see).
    Skip,
}

impl Grade {
    pub fn label(self) -> &'static str {
        match self {
            Grade::Pass => "pass",
            Grade::Warn => "warn",
            Grade::Fail => "FAIL",
            Grade::Skip => "skip",
        }
    }
}

/// The constructors of a finding of one grade: `Finding::pass(check, measured, value, why)`.
macro_rules! graded {
    ($($(#[$doc:meta])* $name:ident => $grade:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $name(
                check: Check,
                measured: impl Into<String>,
                value: Option<f64>,
                why: impl Into<String>,
            ) -> Finding {
                Finding::new(check, Grade::$grade, measured, value, why)
            }
        )*
    };
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub grade: Grade,
    /// The measurement, short: "closed after 1.80 s", "still open at 3.0 s".
    pub measured: String,
    /// The number behind it, in seconds or as a count, where there is one.
    pub value: Option<f64>,
    /// One sentence of why.
    pub why: String,
    /// The book's page on it, relative to the book's root.
    pub read: &'static str,
}

impl Finding {
    pub fn new(
        check: Check,
        grade: Grade,
        measured: impl Into<String>,
        value: Option<f64>,
        why: impl Into<String>,
    ) -> Finding {
        Finding {
            check: check.name(),
            grade,
            measured: measured.into(),
            value,
            why: why.into(),
            read: check.chapter(),
        }
    }

    graded! {
        /// A check the service passes.
        pass => Pass,
        /// Not a failure the check can prove, but worth a look.
        warn => Warn,
        /// A check the service fails.
        fail => Fail,
    }

    /// Pass if the server acted within the window (`first`: when, and what
    /// it did), fail if it still waited for the client at the end; `cost`
    /// says what each such client holds, and what would end it.
    pub fn ended_in_time(
        check: Check,
        first: Option<(std::time::Duration, String)>,
        window: std::time::Duration,
        what: &str,
        cost: &str,
    ) -> Finding {
        match first {
            Some((at, said)) => Finding::pass(
                check,
                said,
                Some(at.as_secs_f64()),
                format!("the server does not wait forever for {what}"),
            ),
            None => Finding::fail(
                check,
                format!("still open at {}", seconds(window)),
                Some(window.as_secs_f64()),
                format!("the server waits for {what} as long as the client likes: {cost}"),
            ),
        }
    }

    pub fn skip(check: Check, why: impl Into<String>) -> Finding {
        Finding::new(check, Grade::Skip, "skipped", None, why)
    }
}

/// Seconds with two decimals, the way every finding writes them.
pub fn seconds(duration: std::time::Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}
