//! What one case saw, on one clock: when the client left or got its answer,
//! when the downstream stopped working on the request and whether it
//! finished, when the query ended and how, and when an order was placed.
//! The downstream and the database write here themselves, from their own
//! side, so "work done after the client left" is counted where the work is.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::db::QueryEnd;

/// Milliseconds since the case started, for each mark that happened.
#[derive(Debug, Clone, Default)]
pub struct CaseMarks {
    pub client_done_ms: Option<f64>,
    pub downstream_end_ms: Option<f64>,
    pub downstream_completed: bool,
    pub query_end_ms: Option<f64>,
    pub query_end: Option<QueryEnd>,
    pub order_ms: Option<f64>,
}

/// Shared by the client, the server, the downstream and the database.
#[derive(Debug)]
pub struct CaseLog {
    epoch: Instant,
    marks: Mutex<CaseMarks>,
}

impl CaseLog {
    pub fn start() -> Arc<CaseLog> {
        Arc::new(CaseLog {
            epoch: Instant::now(),
            marks: Mutex::new(CaseMarks::default()),
        })
    }

    pub fn now_ms(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1000.0
    }

    pub fn mark(&self, change: impl FnOnce(&mut CaseMarks, f64)) {
        let now = self.now_ms();
        change(&mut self.marks.lock().expect("marks are not poisoned"), now);
    }

    pub fn marks(&self) -> CaseMarks {
        self.marks.lock().expect("marks are not poisoned").clone()
    }

    /// Waits (polling) until `settled` holds or `bound` has passed.
    pub async fn settle(&self, bound: Duration, settled: impl Fn(&CaseMarks) -> bool) -> CaseMarks {
        let until = Instant::now() + bound;
        loop {
            let marks = self.marks();
            if settled(&marks) || Instant::now() >= until {
                return marks;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// CaseMarks the downstream's end when dropped: on completion, or when hyper
/// drops the downstream handler because its caller went away.
pub struct DownstreamEndGuard {
    pub log: Arc<CaseLog>,
    pub completed: bool,
}

impl Drop for DownstreamEndGuard {
    fn drop(&mut self) {
        let completed = self.completed;
        self.log.mark(|marks, now| {
            marks.downstream_end_ms = Some(now);
            marks.downstream_completed = completed;
        });
    }
}
