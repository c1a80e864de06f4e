//! Part 2 in quick mode: at twice its capacity, a server that refuses what
//! it cannot start keeps its goodput near capacity; one that queues
//! everything spends its workers on requests whose clients have left.

use lab_kit::{Lab, Mode, Output};
use lab_overload::{Config, shedding::run_shedding};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shedding_keeps_goodput_at_twice_capacity_and_queueing_loses_it() -> anyhow::Result<()> {
    let config = Config::for_mode(Mode::Quick);
    let out = Output::collect_part(&config, run_shedding).await?;
    let goodput_at = |series: &str, offered_x: f64| {
        out.samples(series)
            .find(|point| point.number("offered_x").expect("offered_x") == offered_x)
            .map(|point| point.number("goodput_pct_of_capacity").expect("goodput"))
            .unwrap_or_else(|| panic!("{series} has no point at {offered_x}x"))
    };
    let label = format!("{:#?}", out.records());
    for shedding in ["shed/load-shed", "shed/token-bucket"] {
        // Not 100 %: with no queue at all, a worker idles whenever two
        // arrivals were close and the second was refused (about 77 % here).
        assert!(goodput_at(shedding, 2.0) >= 60.0, "{shedding}: {label}");
        assert!(goodput_at(shedding, 3.0) >= 60.0, "{shedding}: {label}");
    }
    for queueing in ["shed/queue", "shed/queue-cancels"] {
        // Below capacity a queue is fine; above it, the goodput collapses.
        assert!(goodput_at(queueing, 0.5) >= 35.0, "{queueing}: {label}");
        assert!(goodput_at(queueing, 2.0) <= 60.0, "{queueing}: {label}");
        assert!(
            goodput_at("shed/load-shed", 2.0) >= 1.4 * goodput_at(queueing, 2.0),
            "{queueing}: {label}"
        );
    }
    Ok(())
}
