//! The solution: a retry budget shared by every call (the backoff-jitter
//! lab's token bucket). Each call deposits a tenth of a token, each retry
//! withdraws a whole one. A transient failure here and there is retried as
//! before; when every call fails, the deposits stop covering the
//! withdrawals, and retries stop at about 10 % of the traffic instead of
//! multiplying it.

use std::time::Duration;

use lab_backoff_jitter::policy::RetryBudget;
use reqwest::StatusCode;

/// Attempts per call, the first one included.
const MAX_ATTEMPTS: u32 = 4;

/// The client's calls to its dependency. One value serves every call.
pub struct Retrying {
    client: reqwest::Client,
    /// Retries per call allowed in the long run (0.1), and 10 tokens of slack
    /// (also the most it holds) for a burst of transient failures.
    budget: RetryBudget,
}

impl Retrying {
    pub fn new(client: reqwest::Client) -> Retrying {
        let budget = RetryBudget::new(0.1, 10);
        Retrying { client, budget }
    }

    /// GET `url`: the last status, or `None` if no attempt got one.
    pub async fn get(&self, url: &str) -> Option<StatusCode> {
        self.budget.deposit();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let status = self.client.get(url).send().await.ok().map(|r| r.status());
            let failed = status.is_none_or(|status| status.is_server_error());
            // The budget is asked last: only a retry that would happen spends.
            if !failed || attempts == MAX_ATTEMPTS || !self.budget.try_withdraw() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(5 << attempts)).await;
        }
    }
}
