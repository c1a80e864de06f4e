//! The lab killed mid-run leaves nothing behind. The built binary runs in
//! quick mode with its own empty `TMPDIR`; once it says the spiral has
//! started (SQLite queries running on the blocking pool, servers and clients
//! on loopback), it gets SIGKILL, where no destructor runs. Before the kill
//! the test looks at what the process holds: no child process and no open
//! file (the database lives in SQLite's `memdb` VFS, in the process's own
//! memory); after it, the process is gone and the temp dir is still empty.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

/// Files the process has open, by descriptor, as `/proc/<pid>/fd` names
/// them: sockets, pipes and anonymous inodes have no path; a file does.
fn open_paths(pid: u32) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            Some((entry.file_name().to_string_lossy().into_owned(), target))
        })
        .filter(|(_, target)| target.is_absolute() && !target.starts_with("/dev"))
        .collect()
}

/// The pids of the process's children, from every thread's `children` list.
fn children(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_killed_lab_leaves_no_process_and_no_file() {
    let scratch = std::env::temp_dir().join(format!("cancellation-killed-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("the scratch dir is created");
    // A descriptor the lab inherits (whatever ran the tests left one open
    // without close-on-exec, as `time -o FILE cargo ...` does) is not the lab's.
    let inherited = open_paths(std::process::id());
    let mut lab = Command::new(env!("CARGO_BIN_EXE_lab-cancellation"))
        .arg("--quick")
        .env("TMPDIR", &scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the lab starts");
    let pid = lab.id();
    let stderr = lab.stderr.take().expect("stderr is piped");
    let (lines, progress) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let until = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let reached_spiral = loop {
        let left = until.saturating_duration_since(Instant::now());
        match progress.recv_timeout(left) {
            Ok(line) => {
                let spiral = line.contains("the spiral");
                seen.push(line);
                if spiral {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    // Into the spiral: queries are running now.
    std::thread::sleep(Duration::from_millis(300));
    let held_files: Vec<_> = open_paths(pid)
        .into_iter()
        .filter(|fd| !inherited.contains(fd))
        .collect();
    let held_children = children(pid);
    lab.kill().expect("SIGKILL is sent");
    let status = lab.wait().expect("the lab is reaped");
    assert!(reached_spiral, "the lab never reached the spiral: {seen:?}");
    assert!(held_children.is_empty(), "children: {held_children:?}");
    assert!(held_files.is_empty(), "open files: {held_files:?}");
    assert!(!status.success(), "the lab ended on its own: {status}");
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    let left_behind: Vec<_> = std::fs::read_dir(&scratch)
        .expect("the scratch dir is readable")
        .map(|entry| entry.map(|entry| entry.path()))
        .collect();
    std::fs::remove_dir_all(&scratch).expect("the scratch dir is removed");
    assert!(left_behind.is_empty(), "left behind: {left_behind:?}");
}
