//! The tasks `cargo xtask` offers, one module per task, named after its
//! command (`lab-tests` is `lab_tests`). Each has one entry point, `run`,
//! taking the project and the task's options as `cli` parsed them; it handles
//! the options, runs the steps and prints the report, and leaves the work to
//! the library modules beside `tasks` (`book`, `runner`, `charts`, ...).

pub mod book;
pub mod browser;
pub mod charts;
pub mod doctor;
pub mod exercise;
pub mod exercise_checks;
pub mod help;
pub mod lab;
pub mod lab_tests;
pub mod labs;
pub mod prepare;
pub mod serve;
pub mod test;
pub mod tidy;
