//! The xtask's one kind of error with its own exit code: bad usage or bad
//! input (exit 2), as against a task that failed (exit 1). Any module may
//! return one; `main` reads it back to choose the exit code.

/// Bad usage: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}
