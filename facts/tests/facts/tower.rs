//! tower's limits as services, without a server: what `ConcurrencyLimit` does
//! with a call past its limit (waits in `poll_ready`), and what `LoadShed`
//! over it does instead (refuses at once with `Overloaded`). Read in tower's
//! source at the pinned version: `limit/concurrency/service.rs` acquires a
//! semaphore permit in `poll_ready`; `load_shed/mod.rs` answers
//! `Overloaded` when the inner service is not ready.

use std::{convert::Infallible, time::Duration};

use lab_facts::bounded;
use tower::{
    Service, ServiceBuilder, ServiceExt,
    limit::ConcurrencyLimitLayer,
    load_shed::{LoadShedLayer, error::Overloaded},
    service_fn,
};

const BOUND: Duration = Duration::from_secs(10);

async fn slow(_request: ()) -> Result<(), Infallible> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(())
}

#[tokio::test]
async fn concurrency_limit_makes_the_next_call_wait() {
    bounded("concurrency limit", BOUND, async {
        let mut service = ServiceBuilder::new()
            .layer(ConcurrencyLimitLayer::new(1))
            .service(service_fn(slow));
        let first = service.ready().await.expect("ready").call(());
        let held = tokio::spawn(first);
        let mut second = service.clone();
        // The second caller is not refused: it waits for the first's permit.
        let waited = tokio::time::timeout(Duration::from_millis(200), second.ready()).await;
        assert!(waited.is_err(), "ready while the limit was taken");
        held.await.expect("the task").expect("the call");
        tokio::time::timeout(Duration::from_secs(2), second.ready())
            .await
            .expect("ready once the permit came back")
            .expect("ready");
    })
    .await;
}

#[tokio::test]
async fn load_shed_over_a_full_limit_refuses_at_once() {
    bounded("load shed", BOUND, async {
        let mut service = ServiceBuilder::new()
            .layer(LoadShedLayer::new())
            .layer(ConcurrencyLimitLayer::new(1))
            .service(service_fn(slow));
        let first = service.ready().await.expect("ready").call(());
        let held = tokio::spawn(first);
        let mut second = service.clone();
        let started = std::time::Instant::now();
        let refused = second
            .ready()
            .await
            .expect("load_shed is always ready")
            .call(())
            .await
            .expect_err("refused");
        assert!(refused.is::<Overloaded>(), "{refused:?}");
        assert!(started.elapsed() < Duration::from_millis(200));
        held.await.expect("the task").expect("the call");
    })
    .await;
}
