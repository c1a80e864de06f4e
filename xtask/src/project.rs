//! Where things are: the workspace root, the data directories, and the labs
//! (found from `labs/*/Cargo.toml` files that carry `[package.metadata.lab]`).

use std::{
    env, fs,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use lab_kit::manifest::LabInfo;

/// The paths every task needs.
#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
}

impl Project {
    pub fn locate() -> Project {
        // xtask/Cargo.toml sits one level below the workspace root.
        let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let root = manifest_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or(manifest_dir);
        Project { root }
    }

    /// The committed reference runs.
    pub fn reference_data(&self) -> PathBuf {
        self.root.join("book/data")
    }

    /// The reader's own runs, made by `cargo xtask book`.
    pub fn fresh_data(&self) -> PathBuf {
        self.root.join("target/data")
    }

    pub fn charts_dir(&self) -> PathBuf {
        self.root.join("target/charts")
    }

    pub fn book_out(&self) -> PathBuf {
        self.root.join("target/book")
    }

    /// Where cargo puts binaries: honours CARGO_TARGET_DIR like cargo does.
    pub fn cargo_target(&self) -> PathBuf {
        match env::var_os("CARGO_TARGET_DIR") {
            Some(dir) if !dir.is_empty() => {
                let dir = PathBuf::from(dir);
                if dir.is_absolute() {
                    dir
                } else {
                    self.root.join(dir)
                }
            }
            _ => self.root.join("target"),
        }
    }

    /// The cargo that runs us, so the pinned toolchain is used throughout.
    pub fn cargo(&self) -> std::process::Command {
        let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = std::process::Command::new(cargo);
        command.current_dir(&self.root);
        command
    }

    /// Every lab, sorted by slug.
    pub fn labs(&self) -> Result<Vec<Lab>> {
        let labs_dir = self.root.join("labs");
        let mut labs = Vec::new();
        for entry in
            fs::read_dir(&labs_dir).with_context(|| format!("reading {}", labs_dir.display()))?
        {
            let dir = entry?.path();
            let manifest = dir.join("Cargo.toml");
            if !manifest.is_file() {
                continue;
            }
            if let Some(lab) = Lab::from_manifest(&manifest)? {
                labs.push(lab);
            }
        }
        labs.sort_by(|a, b| a.slug.cmp(&b.slug));
        Ok(labs)
    }

    /// The labs named on the command line, or an error listing the known ones.
    pub fn select_labs(&self, names: &[String]) -> Result<Vec<Lab>> {
        let labs = self.labs()?;
        let mut chosen = Vec::new();
        for name in names {
            match labs.iter().find(|lab| &lab.slug == name) {
                Some(lab) => chosen.push(lab.clone()),
                None => {
                    let known: Vec<&str> = labs.iter().map(|lab| lab.slug.as_str()).collect();
                    return Err(lab_kit::exit::bad_input(format!(
                        "unknown lab {name:?}; the labs are: {}",
                        known.join(", ")
                    )));
                }
            }
        }
        Ok(chosen)
    }
}

/// One lab, as its Cargo.toml describes it.
#[derive(Debug, Clone)]
pub struct Lab {
    pub slug: String,
    pub package: String,
    pub title: String,
    pub dir: PathBuf,
    pub quick_budget: Duration,
    pub full_budget: Duration,
    /// The lab waits on timers rather than on the CPU, so the xtask may run it
    /// at the same time as the other labs that say so (`side-by-side = true`).
    pub side_by_side: bool,
    /// Its first parts wait and its last parts need the machine
    /// (`side-by-side-until-alone = true`): it runs in the side-by-side batch
    /// too, and its last parts alone.
    pub side_by_side_until_alone: bool,
}

impl Lab {
    /// Whether `cargo xtask book` runs it in the side-by-side batch.
    pub fn runs_in_batch(&self) -> bool {
        self.side_by_side || self.side_by_side_until_alone
    }

    fn from_manifest(path: &Path) -> Result<Option<Lab>> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let Some(info) = LabInfo::parse(&text).with_context(|| format!("{}", path.display()))?
        else {
            return Ok(None);
        };
        let dir = path
            .parent()
            .context("a manifest has a folder")?
            .to_path_buf();
        let folder = dir
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        if folder != info.slug {
            bail!(
                "{}: package {} must live in labs/{}",
                path.display(),
                info.package,
                info.slug
            );
        }
        Ok(Some(Lab {
            slug: info.slug,
            package: info.package,
            title: info.title,
            dir,
            quick_budget: info.quick_budget,
            full_budget: info.full_budget,
            side_by_side_until_alone: info.side_by_side_until_alone,
            side_by_side: info.side_by_side,
        }))
    }

    pub fn budget(&self, mode: lab_kit::Mode) -> Duration {
        match mode {
            lab_kit::Mode::Quick => self.quick_budget,
            lab_kit::Mode::Full => self.full_budget,
        }
    }
}
