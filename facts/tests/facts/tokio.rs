//! tokio's runtime defaults. Read in tokio's source at the pinned version:
//! `runtime/builder.rs` sizes a multi-thread runtime's workers from
//! `available_parallelism` (unless `TOKIO_WORKER_THREADS` says otherwise) and
//! caps the blocking pool at 512 threads, its queue unbounded;
//! `tokio-macros` builds `#[tokio::test]` on a current-thread runtime.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use lab_facts::bounded;
use tokio::runtime::{Builder, Handle, RuntimeFlavor};

#[test]
fn a_multi_thread_runtime_has_one_worker_per_core() {
    let runtime = Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let cores = std::thread::available_parallelism()
        .expect("the core count")
        .get();
    let told = std::env::var("TOKIO_WORKER_THREADS").ok();
    assert_eq!(
        runtime.metrics().num_workers(),
        told.and_then(|value| value.parse().ok()).unwrap_or(cores)
    );
}

#[tokio::test]
async fn tokio_test_runs_on_a_current_thread_runtime() {
    assert_eq!(
        Handle::current().runtime_flavor(),
        RuntimeFlavor::CurrentThread
    );
}

#[test]
fn the_blocking_pool_runs_512_jobs_at_once_and_queues_the_rest() {
    let runtime = Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime with the default blocking pool");
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(Mutex::new(0usize));
    runtime.block_on(bounded(
        "600 blocking jobs",
        Duration::from_secs(30),
        async {
            let jobs: Vec<_> = (0..600)
                .map(|_| {
                    let (running, peak) = (running.clone(), peak.clone());
                    tokio::task::spawn_blocking(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        {
                            let mut peak = peak.lock().expect("not poisoned");
                            *peak = (*peak).max(now);
                        }
                        std::thread::sleep(Duration::from_millis(1500));
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect();
            for job in jobs {
                job.await.expect("every queued job ran");
            }
        },
    ));
    assert_eq!(*peak.lock().expect("not poisoned"), 512);
}

#[tokio::test]
async fn a_dropped_future_stops_at_the_await_where_it_is_suspended() {
    let reached = Arc::new(AtomicUsize::new(0));
    let steps = reached.clone();
    let work = async move {
        steps.store(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
        // Never runs: the future is dropped while suspended above.
        steps.store(2, Ordering::SeqCst);
    };
    let outcome = tokio::time::timeout(Duration::from_millis(50), work).await;
    assert!(outcome.is_err(), "the timeout dropped the work");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(reached.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn read_exact_dropped_midway_loses_the_bytes_it_had_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // tokio's `read_exact` documents itself as not cancel safe: what it has
    // read sits in the caller's buffer, and a dropped call returns none of it.
    let (mut writer, mut reader) = tokio::io::duplex(64);
    writer.write_all(&[1, 2]).await.expect("writes");
    let mut four = [0u8; 4];
    let dropped =
        tokio::time::timeout(Duration::from_millis(50), reader.read_exact(&mut four)).await;
    assert!(
        dropped.is_err(),
        "two of four bytes: still waiting when dropped"
    );
    writer.write_all(&[3, 4, 5, 6]).await.expect("writes");
    let mut next = [0u8; 4];
    bounded(
        "the next read",
        Duration::from_secs(5),
        reader.read_exact(&mut next),
    )
    .await
    .expect("reads");
    // The next read starts after the lost bytes: 1 and 2 are gone.
    assert_eq!(next, [3, 4, 5, 6]);
}
