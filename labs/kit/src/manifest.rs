//! The one reader of a lab's `Cargo.toml`: its package name (`lab-<slug>`),
//! description, and `[package.metadata.lab]` (title, budgets, whether it may
//! run beside other labs). The lab's own `main` reads it (through
//! `include_str!`) to know its budget, and the xtask reads it to find the labs
//! and set its kill timers, so the two always agree. Underneath,
//! `PackageManifest` reads any `[package.metadata.<table>]`; the xtask's
//! widgets read theirs (`[package.metadata.widget]`) with it too.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, de::DeserializeOwned};

use crate::Mode;

/// What a lab's manifest says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct LabInfo {
    pub slug: String,
    /// The package name, `lab-<slug>`.
    pub package: String,
    pub title: String,
    /// The package's description.
    pub about: String,
    /// The lab fails, rather than hangs, past this.
    pub quick_budget: Duration,
    pub full_budget: Duration,
    /// The lab waits on timers rather than on the CPU, so the xtask may run it
    /// at the same time as the other labs that say so (`side-by-side = true`).
    pub side_by_side: bool,
    /// The lab's first parts wait on timers and its last parts need the
    /// machine (`side-by-side-until-alone = true`): the xtask runs it in the
    /// side-by-side batch, and it calls `batch::alone` before its last parts.
    /// Its tests and exercises are scheduled as those of a lab that runs alone.
    pub side_by_side_until_alone: bool,
}

impl LabInfo {
    /// Whether `cargo xtask book` runs it in the side-by-side batch.
    pub fn runs_in_batch(&self) -> bool {
        self.side_by_side || self.side_by_side_until_alone
    }
}

/// A package's manifest as far as the book reads it: the package's name and
/// description, and its `[package.metadata.<table>]` read as `T`, if it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageManifest<T> {
    pub name: String,
    pub description: String,
    pub metadata: Option<T>,
}

impl<T: DeserializeOwned> PackageManifest<T> {
    /// Reads a manifest's text; `table` names the metadata table (`lab` for
    /// `[package.metadata.lab]`). Other tables and keys are left alone; `T`
    /// decides whether unknown keys inside its own table are refused.
    pub fn parse(manifest: &str, table: &str) -> Result<PackageManifest<T>> {
        #[derive(Deserialize)]
        struct Manifest {
            package: Package,
        }
        #[derive(Deserialize)]
        struct Package {
            name: String,
            #[serde(default)]
            description: String,
            #[serde(default)]
            metadata: toml::Table,
        }
        let manifest: Manifest = toml::from_str(manifest).context("not a valid Cargo.toml")?;
        let Package {
            name,
            description,
            mut metadata,
        } = manifest.package;
        let metadata = metadata
            .remove(table)
            .map(toml::Value::try_into)
            .transpose()
            .with_context(|| format!("package {name:?}: [package.metadata.{table}]"))?;
        Ok(PackageManifest {
            name,
            description,
            metadata,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct LabMetadata {
    title: String,
    quick_budget: u64,
    full_budget: u64,
    #[serde(default)]
    side_by_side: bool,
    #[serde(default)]
    side_by_side_until_alone: bool,
}

/// A lab's slug from its package name: `lab-conn-reuse` is `conn-reuse`.
pub fn slug_of(package: &str) -> &str {
    package.strip_prefix(LAB_PREFIX).unwrap_or(package)
}

/// What every lab's package name starts with.
const LAB_PREFIX: &str = "lab-";

impl LabInfo {
    /// Reads a manifest's text. `Ok(None)`: a package, but not a lab (no
    /// `[package.metadata.lab]`).
    pub fn parse(manifest: &str) -> Result<Option<LabInfo>> {
        let package = PackageManifest::<LabMetadata>::parse(manifest, "lab")?;
        let Some(lab) = package.metadata else {
            return Ok(None);
        };
        let Some(slug) = package.name.strip_prefix(LAB_PREFIX) else {
            bail!(
                "package {:?} has [package.metadata.lab] but is not named lab-<slug>",
                package.name
            );
        };
        Ok(Some(LabInfo {
            slug: slug.to_string(),
            package: package.name.clone(),
            title: lab.title,
            about: package.description,
            quick_budget: Duration::from_secs(lab.quick_budget),
            full_budget: Duration::from_secs(lab.full_budget),
            side_by_side: lab.side_by_side,
            side_by_side_until_alone: lab.side_by_side_until_alone,
        }))
    }

    /// Reads the manifest of a lab: `include_str!("../Cargo.toml")` in its `main`.
    pub fn from_manifest(manifest: &str) -> Result<LabInfo> {
        LabInfo::parse(manifest)?.context("the manifest has no [package.metadata.lab]")
    }

    pub fn budget(&self, mode: Mode) -> Duration {
        mode.pick(self.quick_budget, self.full_budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_is_the_package_name_without_its_prefix() {
        assert_eq!(slug_of("lab-conn-reuse"), "conn-reuse");
        // Expanded in this crate, the macro reads this crate's name.
        assert_eq!(crate::slug!(), "kit");
        let read = LabInfo::from_manifest(
            "[package]\nname = \"lab-demo\"\n\n[package.metadata.lab]\ntitle = \"Demo\"\n\
             quick-budget = 1\nfull-budget = 2\n",
        )
        .expect("a lab manifest");
        assert_eq!(read.slug, slug_of("lab-demo"));
    }

    #[test]
    fn reads_any_metadata_table_and_leaves_the_others() {
        #[derive(Debug, Deserialize, PartialEq)]
        struct Widget {
            title: String,
        }
        let text = "[package]\nname = \"widget-demo\"\n\n[package.metadata.widget]\ntitle = \"Demo\"\n\n\
                    [package.metadata.other]\nanything = 1\n";
        let read = PackageManifest::<Widget>::parse(text, "widget").expect("a manifest");
        assert_eq!(read.name, "widget-demo");
        assert_eq!(
            read.metadata,
            Some(Widget {
                title: "Demo".into()
            })
        );
        let none = PackageManifest::<Widget>::parse(text, "lab").expect("a manifest");
        assert_eq!(none.metadata, None);
        let wrong = PackageManifest::<Widget>::parse(&text.replace("title", "name"), "widget");
        assert!(
            format!("{:#}", wrong.expect_err("no title")).contains("[package.metadata.widget]")
        );
    }

    const DEMO: &str = "[package]\nname = \"lab-demo\"\ndescription = \"a demo\"\n\n\
                        [package.metadata.lab]\ntitle = \"Demo\" # a comment\n\
                        quick-budget = 15 # seconds\nfull-budget = 120\n\n\
                        [[bin]]\nname = \"other\"\npath = \"src/main.rs\"\n";

    #[test]
    fn reads_a_lab_manifest_comments_and_other_tables_included() {
        let info = LabInfo::from_manifest(DEMO).expect("a lab");
        assert_eq!(info.slug, "demo");
        assert_eq!(info.package, "lab-demo");
        assert_eq!(info.title, "Demo");
        assert_eq!(info.about, "a demo");
        assert_eq!(info.budget(Mode::Quick), Duration::from_secs(15));
        assert_eq!(info.budget(Mode::Full), Duration::from_secs(120));
        assert!(!info.side_by_side);
        let side = DEMO.replace(
            "full-budget = 120",
            "full-budget = 120\nside-by-side = true",
        );
        assert!(LabInfo::from_manifest(&side).expect("a lab").side_by_side);
    }

    #[test]
    fn what_is_not_a_lab_says_so() {
        assert_eq!(
            LabInfo::parse("[package]\nname = \"xtask\"\n").expect("a package"),
            None
        );
        let error = |text: &str| format!("{:#}", LabInfo::parse(text).expect_err(text));
        assert!(error(&DEMO.replace("lab-demo", "demo")).contains("not named lab-<slug>"));
        assert!(error(&DEMO.replace("= 15", "= soon")).contains("not a valid Cargo.toml"));
        assert!(error(&DEMO.replace("quick-budget", "quick-budgte")).contains("quick-budgte"));
        assert!(
            format!(
                "{:#}",
                LabInfo::from_manifest("[package]\nname = \"x\"\n").unwrap_err()
            )
            .contains("no [package.metadata.lab]")
        );
    }
}
