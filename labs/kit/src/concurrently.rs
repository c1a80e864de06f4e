//! Running a lab's compared things at the same time: each on its own task,
//! the results back in the order they were given, so the data file reads the
//! same however the tasks finished.
//! (Not `side_by_side`: in the manifests that is the batch's word for labs
//! that share the machine.)

use std::future::Future;

use anyhow::{Context, Result, anyhow};
use tokio::task::JoinSet;

/// Runs `work` for every item at once and returns `(item, result)` in the
/// items' order. The first failure ends the run with the item's `label` as
/// context (a panicking task is a failure too); the other tasks are dropped.
pub async fn run_all<I, T, F, Fut>(
    items: impl IntoIterator<Item = I>,
    label: impl Fn(&I) -> String,
    work: F,
) -> Result<Vec<(I, T)>>
where
    I: Clone + Send + 'static,
    T: Send + 'static,
    F: Fn(I) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let items: Vec<I> = items.into_iter().collect();
    let mut tasks = JoinSet::new();
    for (index, item) in items.iter().cloned().enumerate() {
        let future = work(item);
        tasks.spawn(async move { (index, future.await) });
    }
    let mut results: Vec<Option<T>> = items.iter().map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        let (index, outcome) = joined.map_err(|error| anyhow!("a task failed: {error}"))?;
        results[index] = Some(outcome.with_context(|| label(&items[index]))?);
    }
    Ok(items
        .into_iter()
        .zip(results)
        .map(|(item, result)| (item, result.expect("every task reported")))
        .collect())
}

/// The result of `item` in what [`run_all`] returned.
pub fn result_of<'a, I: PartialEq, T>(results: &'a [(I, T)], item: &I) -> Option<&'a T> {
    results
        .iter()
        .find(|(each, _)| each == item)
        .map(|(_, result)| result)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn results_come_back_in_the_items_order_and_run_at_once() {
        // Every task waits until all three are running: run one after another,
        // they would never pass the barrier (the timeout turns that into a failure).
        let all_running = std::sync::Arc::new(tokio::sync::Barrier::new(3));
        let run = run_all(
            [3u64, 2, 1],
            |item| format!("item {item}"),
            |item| {
                let all_running = std::sync::Arc::clone(&all_running);
                async move {
                    all_running.wait().await;
                    // The first item finishes last: the order is the items'.
                    tokio::time::sleep(Duration::from_millis(20 * item)).await;
                    Ok(item * 10)
                }
            },
        );
        let results = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the tasks ran at the same time")
            .unwrap();
        assert_eq!(results, [(3, 30), (2, 20), (1, 10)]);
    }

    #[tokio::test]
    async fn a_failure_names_its_item() {
        let error = run_all(
            ["good", "bad"],
            |item| format!("watcher {item}"),
            |item| async move {
                anyhow::ensure!(item == "good", "it broke");
                Ok(())
            },
        )
        .await
        .unwrap_err();
        assert_eq!(format!("{error:#}"), "watcher bad: it broke");
    }

    #[test]
    fn result_of_finds_an_item_or_says_none() {
        let results = [("a", 1), ("b", 2)];
        assert_eq!(result_of(&results, &"b"), Some(&2));
        assert_eq!(result_of(&results, &"c"), None);
    }
}
