//! When a page chromedriver says it opened has really loaded: the page's
//! state as its document and its navigation timing tell it, and the verdict
//! `Browser::open` waits on.

use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

use super::Browser;

/// How long `open` waits for a page chromedriver says has loaded to be
/// complete. A page of the book loads in well under a second on a quiet
/// machine; this bound only turns a page that never completes into an error.
pub(super) const PAGE_LOAD_WAIT: Duration = Duration::from_secs(30);

/// A page's loading state as its document and its navigation timing tell it.
pub(super) struct PageState {
    url: String,
    left_behind: bool,
    ready_state: String,
    load_event_ended: bool,
    response_ended: bool,
    status: u64,
    bytes: u64,
}

pub(super) enum Verdict {
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

    pub(super) fn read(browser: &Browser) -> Result<PageState> {
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

    pub(super) fn verdict(&self, url: &str, expected_bytes: u64) -> Verdict {
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
