//! The processes behind the browser: where Chromium and chromedriver are,
//! Chromium's throwaway profiles, and ending every process the browser
//! leaves, including the ones that escape chromedriver's process group.

use std::{
    env,
    path::PathBuf,
    process::Child,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

/// Where Chromium and chromedriver are, or one line saying how to get them.
pub fn locate() -> Result<(PathBuf, PathBuf)> {
    let find = |variable: &str, names: &[&str]| -> Option<PathBuf> {
        if let Some(path) = env::var_os(variable) {
            return Some(PathBuf::from(path));
        }
        let path_list = env::var_os("PATH")?;
        env::split_paths(&path_list)
            .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
            .find(|candidate| candidate.is_file())
    };
    let chrome = find("CHROME", &["chromium", "chromium-browser", "google-chrome"]);
    let driver = find("CHROMEDRIVER", &["chromedriver"]);
    match (chrome, driver) {
        (Some(chrome), Some(driver)) => Ok((chrome, driver)),
        _ => bail!(
            "the browser checks need Chromium and chromedriver: on Debian or Ubuntu run \
             `sudo apt-get install chromium chromium-driver` (.ci/run does this), or set CHROME and CHROMEDRIVER"
        ),
    }
}

/// Chromium's throwaway profiles live under target/, not /tmp, and a profile
/// left by an xtask that was killed is removed the next time one starts.
pub(super) fn profiles_dir() -> PathBuf {
    let dir = crate::project::Project::locate()
        .root
        .join("target/browser-profiles");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let owner: Option<libc::pid_t> =
                name.split('-').next().and_then(|pid| pid.parse().ok());
            let alive = owner.is_some_and(lab_kit::process::exists);
            if !alive {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    dir
}

pub(super) fn kill_group(child: &Child) {
    lab_kit::process::kill_group(child.id() as i32);
}

/// Chromium starts its crash handler with a double fork in a session of its
/// own, outside chromedriver's process group, so killing the group does not
/// reach it. As a subreaper, the xtask becomes the parent of every process
/// the browser orphans (that handler, and the killed group's processes once
/// chromedriver is gone) and can end and reap them itself.
pub(super) fn become_subreaper() -> Result<()> {
    // SAFETY: prctl(2) with an integer argument; it changes only this process.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } != 0 {
        bail!(
            "making the xtask a subreaper: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The xtask's children that are Chromium processes (`chromium`,
/// `chrome_crashpad_handler`), from every thread's list of children.
fn chromium_children() -> Vec<libc::pid_t> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return found;
    };
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
        {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if name.starts_with("chrom") {
                found.push(pid);
            }
        }
    }
    found
}

/// Ends what is left of the browser after its group was killed: every
/// Chromium process the xtask inherited is killed and reaped, and the wait
/// lasts until no process of the group is left either (bounded, so a process
/// stuck in the kernel cannot hang the xtask).
pub(super) fn end_leftovers(group: libc::pid_t) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = chromium_children();
        for &pid in &children {
            let _ = lab_kit::process::signal(pid, libc::SIGKILL);
            // SAFETY: a non-blocking waitpid(2) on the xtask's own child;
            // one still dying is reaped on a later turn.
            unsafe {
                libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
        let group_alive = lab_kit::process::group_exists(group);
        if (children.is_empty() && !group_alive) || Instant::now() >= deadline {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
}
