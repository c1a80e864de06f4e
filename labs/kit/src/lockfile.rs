//! Reads Cargo.lock: which version of a crate the workspace's own packages
//! depend on. Used by the kit's build script, and tested here.

/// One `[[package]]` of Cargo.lock.
#[derive(Default)]
struct Locked<'a> {
    name: &'a str,
    version: &'a str,
    /// No `source`: a member of this workspace.
    member: bool,
    /// Entries of `dependencies`: `name`, or `name version` (and a source in
    /// parentheses) when Cargo.lock holds several versions of that name.
    dependencies: Vec<&'a str>,
}

/// The version of each crate in `tracked_names` that the workspace's own packages depend
/// on. Cargo.lock can hold several versions of one crate (tower-http 0.6 for
/// reqwest's internals, 0.7 for the labs); the one the labs call is the one a
/// member names in its `dependencies`. If two members used two versions,
/// both are listed, "a, b".
pub fn linked_versions<'a>(lock: &str, tracked_names: &[&'a str]) -> Vec<(&'a str, String)> {
    let mut packages: Vec<Locked> = Vec::new();
    let mut in_dependencies = false;
    for line in lock.lines() {
        if line == "[[package]]" {
            packages.push(Locked {
                member: true,
                ..Locked::default()
            });
            in_dependencies = false;
            continue;
        }
        let Some(package) = packages.last_mut() else {
            continue;
        };
        if in_dependencies {
            if line == "]" {
                in_dependencies = false;
            } else {
                package
                    .dependencies
                    .push(line.trim().trim_end_matches(',').trim_matches('"'));
            }
        } else if let Some(rest) = line.strip_prefix("name = ") {
            package.name = rest.trim_matches('"');
        } else if let Some(rest) = line.strip_prefix("version = ") {
            package.version = rest.trim_matches('"');
        } else if line.starts_with("source = ") {
            package.member = false;
        } else if line == "dependencies = [" {
            in_dependencies = true;
        }
    }
    let mut linked = Vec::new();
    for &tracked in tracked_names {
        let locked: Vec<&str> = packages
            .iter()
            .filter(|package| package.name == tracked)
            .map(|package| package.version)
            .collect();
        let mut versions: Vec<&str> = packages
            .iter()
            .filter(|package| package.member)
            .flat_map(|package| &package.dependencies)
            .filter_map(|entry| {
                let mut words = entry.split_whitespace();
                (words.next() == Some(tracked)).then(|| match words.next() {
                    Some(version) => Some(version),
                    // A bare name: Cargo.lock holds one version of it.
                    None => locked.first().copied(),
                })?
            })
            .collect();
        versions.sort_unstable();
        versions.dedup();
        if !versions.is_empty() {
            linked.push((tracked, versions.join(", ")));
        }
    }
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock where a dependency pulls in a second version of tower-http,
    /// listed after the one the member uses.
    const TWO_VERSIONS: &str = r#"
version = 4

[[package]]
name = "lab-demo"
version = "0.1.0"
dependencies = [
 "hyper",
 "reqwest",
 "tower-http 0.7.1",
]

[[package]]
name = "hyper"
version = "1.12.0"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "reqwest"
version = "0.13.5"
source = "registry+https://github.com/rust-lang/crates.io-index"
dependencies = [
 "hyper",
 "tower-http 0.9.0",
]

[[package]]
name = "tower-http"
version = "0.7.1"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "tower-http"
version = "0.9.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
"#;

    #[test]
    fn takes_the_version_a_member_depends_on_not_the_last_listed() {
        let linked = linked_versions(TWO_VERSIONS, &["hyper", "tower-http", "tokio"]);
        assert_eq!(
            linked,
            vec![
                ("hyper", "1.12.0".to_string()),
                ("tower-http", "0.7.1".to_string())
            ]
        );
    }

    #[test]
    fn lists_both_when_two_members_use_two_versions() {
        let lock = TWO_VERSIONS.replace(
            "name = \"lab-demo\"",
            "name = \"lab-other\"\nversion = \"0.1.0\"\ndependencies = [\n \"tower-http 0.9.0\",\n]\n\n[[package]]\nname = \"lab-demo\"",
        );
        let linked = linked_versions(&lock, &["tower-http"]);
        assert_eq!(linked, vec![("tower-http", "0.7.1, 0.9.0".to_string())]);
    }
}
