//! As shipped, the check fails and names the refusals with no 503 first; with the solution it passes.

#[test]
fn as_shipped_it_fails_and_the_solution_passes() {
    exercise_kit::assert_shipped_fails_and_solution_passes(
        env!("CARGO_BIN_EXE_shutdown-drain-readiness"),
        "without a 503 from /readyz first",
    );
}
