//! As shipped, the check fails and names the unreadable Retry-After; with the solution it passes.

#[test]
fn as_shipped_it_fails_and_the_solution_passes() {
    exercise_kit::assert_shipped_fails_and_solution_passes(
        env!("CARGO_BIN_EXE_doctor-retry-after"),
        "Retry-After check failed: Retry-After: \"1.5s\"",
    );
}
