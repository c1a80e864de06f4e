//! The balancer's access log, one line a request, in the order of the first
//! thirteen fields of an AWS Application Load Balancer's access log: type,
//! time, load balancer, client, target, the three processing times, the
//! balancer's and the target's status codes, bytes in and out, and the
//! request line. The fields after those (user agent, TLS, trace and routing
//! fields) have nothing to say on a plain-HTTP loopback lab and are left out.
//!
//! The two fields that tell the keep-alive race apart from a target's own
//! error: a 502 the balancer answered for a target that sent nothing logs
//! `target_status_code` as `-` and `target_processing_time` as `-1`; a target
//! that answered 5xx logs its own status. AWS's documentation of the format:
//! <https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-access-logs.html>.

use std::{
    net::SocketAddr,
    time::{Duration, SystemTime},
};

/// One request as the balancer saw it.
#[derive(Debug, Clone)]
pub struct AccessLine {
    /// When the response started back to the client.
    pub time: SystemTime,
    pub client: SocketAddr,
    /// The upstream the request went to, if a connection to it was had.
    pub target: Option<SocketAddr>,
    /// Request read to request sent upstream; `None` when it never was sent.
    pub request_processing: Option<Duration>,
    /// Request sent upstream to response read; `None` when no response came.
    pub target_processing: Option<Duration>,
    /// Response read to response starting back to the client; `None`
    /// without one.
    pub response_processing: Option<Duration>,
    pub elb_status_code: u16,
    /// The target's status, `None` when the target sent no response.
    pub target_status_code: Option<u16>,
    pub received_bytes: usize,
    pub sent_bytes: usize,
    /// `GET http://host:port/path HTTP/1.1`.
    pub request: String,
}

impl AccessLine {
    /// The line, space-separated, `-1` for a time and `-` for a status the
    /// balancer does not have.
    pub fn render(&self) -> String {
        let seconds = |time: Option<Duration>| match time {
            Some(time) => format!("{:.3}", time.as_secs_f64()),
            None => "-1".to_string(),
        };
        let time = humantime_utc(self.time);
        let target = self
            .target
            .map_or_else(|| "-".to_string(), |target| target.to_string());
        let target_status = self
            .target_status_code
            .map_or_else(|| "-".to_string(), |status| status.to_string());
        format!(
            "http {time} app/lab-balancer/0 {} {target} {} {} {} {} {target_status} {} {} \"{}\"",
            self.client,
            seconds(self.request_processing),
            seconds(self.target_processing),
            seconds(self.response_processing),
            self.elb_status_code,
            self.received_bytes,
            self.sent_bytes,
            self.request.replace('"', "%22"),
        )
    }

    /// The keep-alive race's signature: the balancer answered 502 and the
    /// target sent nothing (`target_status_code` `-`, `target_processing_time`
    /// `-1`).
    pub fn is_balancer_502_without_target_response(&self) -> bool {
        self.elb_status_code == 502
            && self.target_status_code.is_none()
            && self.target_processing.is_none()
    }

    /// What `HTTPCode_Target_5XX_Count` counts: a 5xx the target itself sent.
    pub fn is_target_5xx(&self) -> bool {
        self.target_status_code
            .is_some_and(|status| (500..600).contains(&status))
    }
}

/// `2026-12-03T21:40:01.123456Z`: the time format of ALB's log (the kit's
/// RFC 3339 to the second, with the microseconds added).
fn humantime_utc(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let to_the_second = lab_kit::time::rfc3339_from_unix(since.as_secs());
    let without_zone = to_the_second.trim_end_matches('Z');
    format!("{without_zone}.{:06}Z", since.subsec_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(target_status: Option<u16>, elb: u16) -> AccessLine {
        AccessLine {
            time: SystemTime::UNIX_EPOCH + Duration::from_micros(1_764_797_401_123_456),
            client: "127.0.0.1:50000".parse().unwrap(),
            target: Some("127.0.0.1:40000".parse().unwrap()),
            request_processing: Some(Duration::from_micros(200)),
            target_processing: target_status.map(|_| Duration::from_millis(3)),
            response_processing: target_status.map(|_| Duration::ZERO),
            elb_status_code: elb,
            target_status_code: target_status,
            received_bytes: 39,
            sent_bytes: 120,
            request: "GET http://lab:80/ HTTP/1.1".into(),
        }
    }

    #[test]
    fn a_race_502_logs_no_target_status_and_minus_one() {
        let race = line(None, 502);
        assert_eq!(
            race.render(),
            "http 2025-12-03T21:30:01.123456Z app/lab-balancer/0 127.0.0.1:50000 \
             127.0.0.1:40000 0.000 -1 -1 502 - 39 120 \"GET http://lab:80/ HTTP/1.1\""
        );
        assert!(race.is_balancer_502_without_target_response());
        assert!(!race.is_target_5xx());
    }

    #[test]
    fn a_target_5xx_logs_its_own_status() {
        let own = line(Some(503), 503);
        assert!(own.render().contains(" 0.000 0.003 0.000 503 503 "));
        assert!(own.is_target_5xx());
        assert!(!own.is_balancer_502_without_target_response());
    }
}
