//! Overload, pure: the circuit breaker's state machine, which the overload lab
//! puts in front of a real provider and the overload widget simulates.
//!
//! No I/O, no threads, no clock and no system randomness: time is a number of
//! milliseconds the caller passes in.

pub mod breaker;
