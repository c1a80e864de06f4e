//! Overload, pure: the circuit breaker's state machine, which the overload lab
//! puts in front of a real provider and the overload widget simulates, and the
//! widget's seeded simulation of a service calling a fast and a flaky provider
//! through limits, timeouts and that breaker.
//!
//! No I/O, no threads, no clock and no system randomness: time is a number of
//! milliseconds the caller passes in (the breaker) or a simulated one (`sim`).

pub mod breaker;
mod report;
pub mod sim;
