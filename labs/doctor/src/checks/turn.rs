//! Taking turns on the machine. The load checks (the blocked runtime, the
//! overload, the slow read's pipelining) time a server's answers under the
//! load the doctor makes; two servers' loads at once would blur each other's
//! timing. When the lab probes several servers at once, their loads take
//! turns in a fixed order, while the checks that only wait (the watchers,
//! the slow read's window, the shutdown) run beside whatever else runs.

use std::time::{Duration, Instant};

use lab_kit::child::cpu_ms;
use tokio::sync::oneshot;

/// One server's place in the order: wait for the one before, then hand on
/// to the one after. Handing on is dropping: a server whose checks end in
/// an error, or hang past their bound, hands on too.
#[derive(Debug, Default)]
pub struct Turn {
    before: Option<oneshot::Receiver<()>>,
    after: Option<oneshot::Sender<()>>,
}

impl Turn {
    /// No one else to wait for: the `doctor` command, one server.
    pub fn alone() -> Turn {
        Turn::default()
    }

    /// `count` turns, in order: the first waits for no one.
    pub fn in_order(count: usize) -> Vec<Turn> {
        let mut turns: Vec<Turn> = (0..count).map(|_| Turn::default()).collect();
        for i in 1..count {
            let (done, next) = oneshot::channel();
            turns[i - 1].after = Some(done);
            turns[i].before = Some(next);
        }
        turns
    }

    /// Waits until the server before has handed on (or is gone).
    pub async fn take(&mut self) {
        if let Some(before) = self.before.as_mut() {
            // A dropped sender hands on as well as a sent `()`. Kept until
            // it answers, so that a wait given up on can be taken up again.
            let _ = before.await;
            self.before = None;
        }
    }

    /// Hands on to the server after, once this one has worked through what
    /// the load checks sent it: a server still parsing a backlog of
    /// pipelined requests (Node buffers hundreds of megabytes of them) would
    /// load the machine under the next one's checks. `server` is its process
    /// where the doctor started it; quiet means its CPU time grew by under
    /// 10 ms in 100 ms, and the wait ends after 3 s in any case.
    /// Returns how long it waited for quiet, where it handed on to anyone.
    pub async fn hand_on(&mut self, server: Option<i32>) -> Option<Duration> {
        let after = self.after.take()?;
        let started = Instant::now();
        if let Some(pid) = server {
            while started.elapsed() < Duration::from_secs(3) {
                let Ok(before) = cpu_ms(pid) else { break };
                tokio::time::sleep(Duration::from_millis(100)).await;
                let Ok(now) = cpu_ms(pid) else { break };
                if now - before < 10.0 {
                    break;
                }
            }
        }
        drop(after);
        Some(started.elapsed())
    }
}
