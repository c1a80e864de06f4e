//! A child process in its own process group, killed (the whole group, with
//! SIGKILL) on every exit path: when its guard is dropped, when the lab fails,
//! when the lab's own process dies.
//!
//! Labs that need a second process (a prober that must not share the server's
//! threads, a server that receives a real SIGTERM) usually re-execute their
//! own binary with a hidden subcommand: `std::env::current_exe()` plus
//! `__prober` or `__server`, its settings as `--flag value` pairs (see
//! [`crate::flags`]). [`ChildGuard`] starts such a child so that nothing is
//! left behind:
//!
//! - **Its own process group** (`setpgid(0, 0)` in the child). A signal meant
//!   for the child never reaches the lab, and a Ctrl-C in the terminal (sent
//!   to the terminal's foreground group) reaches the lab alone, which then
//!   cleans up in order. The other way round, `kill(-pgid)` reaches the child
//!   and every grandchild it started (a shell wrapper's server, a worker), so
//!   one call cleans up a whole tree.
//! - **PR_SET_PDEATHSIG = SIGKILL** (Linux). Destructors do not run when the lab
//!   itself is killed with SIGKILL (the xtask's kill timer, the OOM killer): no
//!   guard can help then. The kernel can: it sends the child SIGKILL when its
//!   parent dies. One catch: "the parent" is the *thread* that forked, so
//!   start children from a thread that lives as long as they should (a tokio
//!   worker, the main thread), not from `spawn_blocking`, whose idle threads
//!   exit after ten seconds and would take the child with them.
//! - **The guard's `Drop`** sends SIGKILL to the group and reaps the child, so
//!   an early `?` return, a panic or a timeout leaves no process and no zombie.
//!
//! The lab signals the child itself (SIGTERM to its pid, as an orchestrator
//! signals a container's PID 1), and keeps SIGKILL to the group for cleanup.

use std::{
    ffi::OsStr,
    os::unix::process::ExitStatusExt,
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

/// How a child ended, in the words a shell and Kubernetes use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It called exit with this code.
    Code(i32),
    /// A signal ended it (SIGTERM's default action, SIGKILL...).
    Signal(i32),
}

impl Ended {
    pub fn from_status(status: ExitStatus) -> Ended {
        match (status.code(), status.signal()) {
            (Some(code), _) => Ended::Code(code),
            (None, Some(signal)) => Ended::Signal(signal),
            // Unreachable on Unix: a reaped child either exited or was signalled.
            (None, None) => Ended::Code(-1),
        }
    }

    /// The exit code as a shell (and `kubectl describe pod`) reports it:
    /// 128 + the signal number for a signalled process.
    pub fn shell_code(self) -> i32 {
        match self {
            Ended::Code(code) => code,
            Ended::Signal(signal) => 128 + signal,
        }
    }

    /// "0", "1", "signal 15 (SIGTERM)", "signal 9 (SIGKILL)".
    pub fn describe(self) -> String {
        match self {
            Ended::Code(code) => code.to_string(),
            Ended::Signal(libc::SIGTERM) => "signal 15 (SIGTERM)".into(),
            Ended::Signal(libc::SIGKILL) => "signal 9 (SIGKILL)".into(),
            Ended::Signal(signal) => format!("signal {signal}"),
        }
    }
}

/// A running child in its own process group. Dropping the guard kills the
/// group with SIGKILL and reaps the child, so no path leaves it running.
pub struct ChildGuard {
    child: Child,
    pid: i32,
    ended: Option<Ended>,
}

impl ChildGuard {
    /// Starts `program args...` with stdin closed, stdout as given, stderr
    /// inherited (its messages show up beside the lab's progress).
    pub fn spawn(
        program: impl AsRef<OsStr>,
        args: &[impl AsRef<OsStr>],
        stdout: Stdio,
    ) -> Result<ChildGuard> {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::inherit());
        ChildGuard::spawn_command(command)
    }

    /// Starts a prepared command (its program, arguments and stdio as the
    /// caller set them) in its own process group, with PR_SET_PDEATHSIG.
    pub fn spawn_command(mut command: Command) -> Result<ChildGuard> {
        let program = command.get_program().to_string_lossy().into_owned();
        crate::process::own_group_killed_with_parent(&mut command);
        let child = command
            .spawn()
            .with_context(|| format!("starting {program:?}"))?;
        let pid = i32::try_from(child.id()).context("a pid that does not fit in i32")?;
        Ok(ChildGuard {
            child,
            pid,
            ended: None,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The child's stdout, if it was piped. (Async code can wrap it with
    /// `tokio::process::ChildStdout::from_std`.)
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// The child's stderr, if it was piped.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// The child's stdin, if it was piped. Dropping it closes the pipe: the
    /// child reads end-of-file, a polite "stop" that needs no signal.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// Sends `signal` to the child alone (not its group).
    pub fn signal(&self, signal: i32) -> Result<()> {
        if self.ended.is_some() {
            return Ok(());
        }
        // The pid is ours and not yet reaped (`ended` is None), so it cannot
        // have been reused.
        crate::process::signal(self.pid, signal)
            .with_context(|| format!("sending signal {signal} to pid {}", self.pid))
    }

    /// How the child ended, if it has (reaps it when it has).
    pub fn try_ended(&mut self) -> Result<Option<Ended>> {
        if self.ended.is_none() {
            let status = self
                .child
                .try_wait()
                .with_context(|| format!("waiting for pid {}", self.pid))?;
            self.ended = status.map(Ended::from_status);
        }
        Ok(self.ended)
    }

    /// Waits for the child to end, polling, for at most `limit`.
    pub async fn wait_for(&mut self, limit: Duration) -> Result<Option<Ended>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(ended) = self.try_ended()? {
                return Ok(Some(ended));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// SIGKILL to the whole group, then reap the child. Idempotent.
    pub fn kill_group(&mut self) -> Result<Ended> {
        // The group's id is the child's pid because of `process_group(0)`.
        // Killing the group even after the child exited takes its
        // grandchildren too.
        crate::process::kill_group(self.pid);
        if let Some(ended) = self.ended {
            return Ok(ended);
        }
        let status = self
            .child
            .wait()
            .with_context(|| format!("reaping pid {}", self.pid))?;
        let ended = Ended::from_status(status);
        self.ended = Some(ended);
        Ok(ended)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // After SIGKILL the wait is short: the kernel tears the process down
        // without running any of its code.
        let _ = self.kill_group();
    }
}

/// True while a process with this pid exists (a zombie counts as existing):
/// [`crate::process::exists`], under the name the labs' tests use.
pub use crate::process::exists as pid_exists;

/// User plus system CPU time of process `pid` so far, ms (`/proc/<pid>/stat`,
/// in clock ticks: 10 ms each where `CLK_TCK` is 100).
pub fn cpu_ms(pid: i32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // After the command name in parentheses: state is field 3, utime 14 and
    // stime 15 (proc(5)), so indices 11 and 12 of what follows.
    let after_name = stat.rsplit_once(')').context("no ')' in stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |index: usize| -> Result<f64> {
        fields
            .get(index)
            .and_then(|field| field.parse::<f64>().ok())
            .context("a short /proc/<pid>/stat")
    };
    // SAFETY: sysconf has no memory-safety preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((ticks(11)? + ticks(12)?) * 1000.0 / per_second.max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_while_a_process_works() {
        let pid = std::process::id() as i32;
        let before = cpu_ms(pid).expect("our own stat");
        // Spin until it shows 50 ms more, or give up after 10 s of wall time
        // (a busy machine may give this thread a fraction of a core).
        let started = std::time::Instant::now();
        let mut spin = 0u64;
        let mut after = before;
        while after - before < 50.0 && started.elapsed() < Duration::from_secs(10) {
            for _ in 0..100_000 {
                spin = std::hint::black_box(spin.wrapping_add(1));
            }
            after = cpu_ms(pid).expect("our own stat");
        }
        assert!(after - before >= 50.0, "{before} ms, then {after} ms");
        assert!(cpu_ms(-1).is_err(), "no such process");
    }

    #[tokio::test]
    async fn a_dropped_guard_leaves_no_process() {
        let guard = ChildGuard::spawn("sleep", &["30"], Stdio::null()).expect("sleep starts");
        let pid = guard.pid();
        assert!(pid_exists(pid));
        drop(guard);
        assert!(!pid_exists(pid), "pid {pid} still exists after drop");
    }

    #[tokio::test]
    async fn reports_a_signal_as_a_shell_does() {
        let mut guard = ChildGuard::spawn("sleep", &["30"], Stdio::null()).expect("sleep starts");
        guard.signal(libc::SIGTERM).expect("signal sent");
        let ended = guard
            .wait_for(Duration::from_secs(5))
            .await
            .expect("wait works")
            .expect("sleep ends on SIGTERM");
        assert_eq!(ended, Ended::Signal(libc::SIGTERM));
        assert_eq!(ended.shell_code(), 143);
    }

    /// Polls for at most five seconds: a killed grandchild is re-parented and
    /// reaped by init (or a subreaper), not by us, so it may linger a moment
    /// as a zombie.
    fn gone_within_seconds(pid: i32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pid_exists(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        !pid_exists(pid)
    }

    #[tokio::test]
    async fn kills_a_child_that_ignores_sigterm_and_its_grandchild() {
        use std::io::BufRead;
        // A shell that ignores SIGTERM (its `sleep` inherits that), starts a
        // grandchild and tells us its pid.
        let mut command = Command::new("sh");
        command
            .args(["-c", "trap '' TERM; sleep 30 & echo $!; wait"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut guard = ChildGuard::spawn_command(command).expect("sh starts");
        let pid = guard.pid();
        let mut line = String::new();
        std::io::BufReader::new(guard.take_stdout().expect("piped stdout"))
            .read_line(&mut line)
            .expect("sh prints the grandchild's pid");
        let grandchild: i32 = line.trim().parse().expect("a pid");
        guard.signal(libc::SIGTERM).expect("signal sent");
        let ended = guard
            .wait_for(Duration::from_millis(300))
            .await
            .expect("wait works");
        assert_eq!(ended, None, "sh was meant to ignore SIGTERM");
        assert!(pid_exists(grandchild));
        drop(guard);
        assert!(!pid_exists(pid), "pid {pid} still exists after drop");
        assert!(
            gone_within_seconds(grandchild),
            "grandchild {grandchild} outlived the group kill"
        );
    }

    #[test]
    fn a_command_that_does_not_start_is_a_one_line_error() {
        let error = ChildGuard::spawn("/no/such/program", &["x"], Stdio::null())
            .err()
            .expect("no such program");
        let text = format!("{error:#}");
        assert!(
            text.starts_with("starting \"/no/such/program\": "),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }

    /// Set in the environment of the re-executed test binary, which then
    /// plays the lab that dies.
    const DYING_LAB: &str = "LAB_KIT_CHILD_DYING_LAB";
    const MARK: &str = "guarded-child-pid=";

    /// In the test run: a guarded `sleep` is gone once its guard drops. As
    /// the "lab" of the test below: prints the `sleep`'s pid and waits to be
    /// killed (bounded, so that even a broken test leaves nothing behind).
    #[test]
    fn starts_a_guarded_child_and_waits_to_be_killed() {
        let guard = ChildGuard::spawn("sleep", &["60"], Stdio::null()).expect("sleep starts");
        let pid = guard.pid();
        if std::env::var_os(DYING_LAB).is_some() {
            // On a line of its own: the harness has just printed "test ... ".
            println!("\n{MARK}{pid}");
            std::thread::sleep(Duration::from_secs(60));
        }
        drop(guard);
        assert!(!pid_exists(pid), "pid {pid} still exists after drop");
    }

    /// SIGKILL to the lab runs no destructor, so no guard can clean up; the
    /// kernel does, because of PR_SET_PDEATHSIG. The `sleep` is in a process
    /// group of its own, so only the death signal can have ended it.
    #[tokio::test]
    async fn the_kernel_kills_the_child_of_a_lab_killed_with_sigkill() {
        use std::io::BufRead;
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut command = Command::new(exe);
        command
            .args([
                "--exact",
                "child::tests::starts_a_guarded_child_and_waits_to_be_killed",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DYING_LAB, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut lab = ChildGuard::spawn_command(command).expect("the test binary runs again");
        let stdout = std::io::BufReader::new(lab.take_stdout().expect("piped stdout"));
        let grandchild: i32 = stdout
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.split_once(MARK).map(|(_, pid)| pid.trim().to_string()))
            .expect("the dying lab printed its child's pid")
            .parse()
            .expect("a pid");
        assert!(pid_exists(grandchild));
        lab.signal(libc::SIGKILL)
            .expect("SIGKILL sent to the lab alone");
        let ended = lab
            .wait_for(Duration::from_secs(5))
            .await
            .expect("wait works");
        assert_eq!(ended, Some(Ended::Signal(libc::SIGKILL)));
        assert!(
            gone_within_seconds(grandchild),
            "the child {grandchild} outlived its killed parent"
        );
    }
}
