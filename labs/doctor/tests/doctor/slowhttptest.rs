//! The doctor's slow-head close time against slowhttptest's, on one nginx:
//! within 10 %. Skipped, with one line, where nginx or slowhttptest is not
//! installed.

#[tokio::test]
async fn the_slow_head_close_time_agrees_with_slowhttptest() {
    if let Some(reason) = lab_doctor::compare::missing() {
        eprintln!("skipped: {reason}");
        return;
    }
    let seen = lab_doctor::compare::run()
        .await
        .expect("the comparison runs");
    assert!(
        seen.difference_pct <= 10.0,
        "the doctor saw {:.2} s, slowhttptest {:.0} s",
        seen.doctor_s,
        seen.slowhttptest_s
    );
    // Both saw nginx's own timeout, not something else.
    let configured = lab_doctor::compare::HEADER_TIMEOUT_S as f64;
    assert!((seen.doctor_s - configured).abs() < 1.0, "{seen:?}");
}
