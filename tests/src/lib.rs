//! Workspace-level tests live in `tests/tests/`: every lab in quick mode,
//! called in-process, asserting the mechanism each chapter claims.
