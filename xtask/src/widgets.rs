//! Widgets: wasm-bindgen crates under `widgets/` that make a simulation
//! interactive in the book. Built for wasm32, bound with wasm-bindgen used as a
//! library, and staged with their hand-written `web/` files in target/widgets.
//! See "The widget contract" in ARCHITECTURE.md.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, anyhow, bail};
use lab_kit::manifest::PackageManifest;

use crate::project::Project;

/// The largest a widget's JS and wasm may be, uncompressed (bytes).
pub const SIZE_LIMIT: u64 = 250 * 1000;

/// One widget crate.
#[derive(Debug, Clone)]
pub struct Widget {
    /// The folder name, as in `{{#widget <name>}}`.
    pub name: String,
    pub package: String,
    pub dir: PathBuf,
}

impl Widget {
    /// The staged files: the generated bindings and `web/*`.
    pub fn staged(&self, project: &Project) -> PathBuf {
        project.root.join("target/widgets").join(&self.name)
    }

    /// The widget's browser test, if it has one.
    pub fn check_script(&self) -> Option<PathBuf> {
        let path = self.dir.join("web/check.js");
        path.is_file().then_some(path)
    }
}

/// Every widget crate (crates under widgets/ with `[package.metadata.widget]`).
pub fn discover(project: &Project) -> Result<Vec<Widget>> {
    let dir = project.root.join("widgets");
    let mut widgets = Vec::new();
    if !dir.exists() {
        return Ok(widgets);
    }
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let crate_dir = entry?.path();
        let manifest_path = crate_dir.join("Cargo.toml");
        if !manifest_path.is_file() {
            continue;
        }
        let text = fs::read_to_string(&manifest_path)?;
        // The widget's table is only a marker here; its title is for readers.
        let package = PackageManifest::<toml::Value>::parse(&text, "widget")
            .with_context(|| format!("parsing {}", manifest_path.display()))?;
        if package.metadata.is_none() {
            continue;
        }
        let name = crate_dir
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default()
            .to_string();
        if package.name != format!("widget-{name}") {
            bail!(
                "{}: a widget in widgets/{name} must be named widget-{name}",
                manifest_path.display()
            );
        }
        widgets.push(Widget {
            name,
            package: package.name,
            dir: crate_dir,
        });
    }
    widgets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(widgets)
}

/// What `build_all` reports about one widget's size.
pub struct SizeReport {
    pub name: String,
    pub bytes: u64,
    pub gzip_bytes: u64,
}

/// Builds every widget and stages it in target/widgets/<name>/.
pub fn build_all(project: &Project) -> Result<Vec<SizeReport>> {
    let widgets = discover(project)?;
    let staging = project.root.join("target/widgets");
    if staging.exists() {
        fs::remove_dir_all(&staging).with_context(|| format!("clearing {}", staging.display()))?;
    }
    if widgets.is_empty() {
        return Ok(Vec::new());
    }
    let mut build = project.cargo();
    build.args([
        "build",
        "--target",
        "wasm32-unknown-unknown",
        "--profile",
        "widget",
    ]);
    for widget in &widgets {
        build.args(["--package", &widget.package]);
    }
    eprintln!(
        "    {} widget(s): cargo build --target wasm32-unknown-unknown --profile widget",
        widgets.len()
    );
    let status = crate::steps::status_with_heartbeat(&mut build, "cargo build (widgets)")?;
    if !status.success() {
        bail!(
            "building the widgets failed ({status}); if the wasm target is missing, \
             `rustup target add wasm32-unknown-unknown` (rust-toolchain.toml lists it)"
        );
    }
    let wasm_dir = project.cargo_target().join("wasm32-unknown-unknown/widget");
    let mut reports = Vec::new();
    for widget in &widgets {
        let stem = widget.package.replace('-', "_");
        let input = wasm_dir.join(format!("{stem}.wasm"));
        let out = widget.staged(project);
        fs::create_dir_all(&out)?;
        wasm_bindgen_cli_support::Bindgen::new()
            .input_path(&input)
            .web(true)
            .map_err(|error| anyhow!("wasm-bindgen: {error}"))?
            .typescript(false)
            // The CLI default: the JS finds its .wasm next to itself.
            .omit_default_module_path(false)
            .generate(&out)
            .map_err(|error| anyhow!("wasm-bindgen on {}: {error:#}", input.display()))?;
        // The widget's own files, and beside them the helpers every widget
        // shares (`widgets/web-kit`), so each imports `./widget-kit.js`.
        for web in [widget.dir.join("web"), project.root.join("widgets/web-kit")] {
            copy_files(&web, &out)?;
        }
        reports.push(size_of(&widget.name, &out)?);
    }
    Ok(reports)
}

/// Copies the files (not the folders) of `from`, if it exists, into `to`.
fn copy_files(from: &Path, to: &Path) -> Result<()> {
    if !from.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let path = entry?.path();
        if path.is_file() {
            let name = path.file_name().context("a file has a name")?;
            fs::copy(&path, to.join(name))
                .with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

/// The uncompressed and gzipped size of a staged widget's JS and wasm
/// (the browser test script is not shipped to readers' pages, so not counted).
fn size_of(name: &str, dir: &Path) -> Result<SizeReport> {
    let (mut bytes, mut gzip_bytes) = (0, 0);
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let counted = path
            .extension()
            .is_some_and(|extension| extension == "js" || extension == "wasm")
            && path.file_name().is_some_and(|file| file != "check.js");
        if !counted {
            continue;
        }
        let content = fs::read(&path)?;
        bytes += content.len() as u64;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&content)?;
        gzip_bytes += encoder.finish()?.len() as u64;
    }
    Ok(SizeReport {
        name: name.to_string(),
        bytes,
        gzip_bytes,
    })
}
