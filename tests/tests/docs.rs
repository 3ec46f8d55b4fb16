//! The documentation cites what exists: every test name, source file and
//! relative link in GUARANTEES.md, README.md and the guides in docs/ names
//! a test, a file or a path of this repository.
//!
//! A cited test is a backticked snake_case name of five words or more (or
//! a module path ending in `::*` / `::…`, such as `broken_log::*`); it must
//! be defined as a `fn` (each module segment as a `mod`, or a backend
//! module that `on_every_backend!` makes), or be a metric name of
//! jobq-runtime/src/metrics.rs. A cited file is a word ending in
//! `.rs` (`tests/bulk.rs`, `chaos_outage_*.rs`); it must be the end of the
//! path of some `.rs` file of the workspace. A relative Markdown link must
//! point at an existing file or directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_owned()
}

/// Every `.rs` file of the workspace, as paths relative to its root with `/`.
fn sources(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    walk(&path, root, out);
                }
            } else if name.ends_with(".rs") {
                let relative = path.strip_prefix(root).unwrap();
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The identifier that starts at `text[at..]`.
fn ident_at(text: &str, at: usize) -> &str {
    let end = text[at..]
        .bytes()
        .position(|b| !is_ident_byte(b))
        .map_or(text.len(), |n| at + n);
    &text[at..end]
}

/// Names defined in the sources: `fn x`, `mod x`, the per-backend modules
/// of `on_every_backend!` (`@backend x`), and the metric names.
fn defined_names(root: &Path, files: &[String]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for keyword in ["fn ", "mod ", "@backend "] {
            let mut from = 0;
            while let Some(found) = text[from..].find(keyword) {
                let at = from + found;
                from = at + keyword.len();
                if at > 0 && is_ident_byte(text.as_bytes()[at - 1]) {
                    continue;
                }
                let name = ident_at(&text, from);
                if !name.is_empty() {
                    names.insert(name.to_owned());
                }
            }
        }
    }
    // Metric names are cited too (`jobq_jobs_claimed_total`): the
    // constants of the metrics module.
    let metrics = std::fs::read_to_string(root.join("jobq-runtime/src/metrics.rs")).unwrap();
    for literal in metrics.split('"').skip(1).step_by(2) {
        if literal.starts_with("jobq_") && literal.bytes().all(is_ident_byte) {
            names.insert(literal.to_owned());
        }
    }
    names
}

/// The Markdown files whose citations are checked.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs = vec![root.join("GUARANTEES.md"), root.join("README.md")];
    let mut guides: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    docs.extend(guides);
    docs
}

/// The text of a Markdown file outside fenced code blocks.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The inline code spans of `text` (between single backticks).
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The test a code span cites, as its path segments; `None` if it cites none.
fn cited_test(span: &str) -> Option<Vec<&str>> {
    let (path, module) = match span
        .strip_suffix("::*")
        .or_else(|| span.strip_suffix("::…"))
    {
        Some(path) => (path, true),
        None => (span, false),
    };
    let segments: Vec<&str> = path.split("::").collect();
    let snake = |s: &&str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if !segments.iter().all(snake) {
        return None;
    }
    let long = segments.iter().any(|s| s.matches('_').count() >= 4);
    (long || module).then_some(segments)
}

/// Whether `path` ends with `pattern` at a path boundary, `*` matching
/// within one path component.
fn ends_with_pattern(path: &str, pattern: &str) -> bool {
    let path: Vec<&str> = path.split('/').collect();
    let pattern: Vec<&str> = pattern.split('/').collect();
    if pattern.len() > path.len() {
        return false;
    }
    path[path.len() - pattern.len()..]
        .iter()
        .zip(&pattern)
        .all(|(part, pat)| glob(part, pat))
}

fn glob(text: &str, pattern: &str) -> bool {
    match pattern.split_once('*') {
        None => text == pattern,
        Some((head, tail)) => {
            text.len() >= head.len()
                && text.starts_with(head)
                && (0..=text.len() - head.len()).any(|skip| glob(&text[head.len() + skip..], tail))
        }
    }
}

/// The `.rs` files a text cites: words ending in `.rs`.
fn cited_files(text: &str) -> BTreeSet<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-./*".contains(c);
    text.split(|c: char| !allowed(c))
        .filter(|w| w.ends_with(".rs") && w.len() > 3)
        .map(|w| w.trim_start_matches("./").to_owned())
        .collect()
}

/// The relative link targets of a Markdown text (`[..](target)`), without anchors.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = rest[..end].trim();
        if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
            continue;
        }
        let target = target.split('#').next().unwrap_or_default();
        if !target.is_empty() {
            links.push(target.to_owned());
        }
    }
    links
}

#[test]
fn every_test_file_and_link_the_docs_cite_exists() {
    let root = root();
    let files = sources(&root);
    let names = defined_names(&root, &files);
    let mut missing = Vec::new();
    let mut tests_seen = 0;
    for doc in documents(&root) {
        let markdown = std::fs::read_to_string(&doc).unwrap();
        let text = prose(&markdown);
        let shown = doc.strip_prefix(&root).unwrap().display().to_string();
        for span in code_spans(&text) {
            if let Some(segments) = cited_test(span) {
                tests_seen += 1;
                for segment in segments {
                    if !names.contains(segment) {
                        missing.push(format!("{shown}: test `{span}` ({segment} is not defined)"));
                    }
                }
            }
        }
        for file in cited_files(&text) {
            if !files.iter().any(|f| ends_with_pattern(f, &file)) {
                missing.push(format!("{shown}: file {file}"));
            }
        }
        for link in relative_links(&text) {
            let base = doc.parent().unwrap();
            if !base.join(&link).exists() {
                missing.push(format!("{shown}: link {link}"));
            }
        }
    }
    assert!(
        tests_seen > 50,
        "found only {tests_seen} cited tests: is the parser still reading the docs?"
    );
    assert!(
        missing.is_empty(),
        "the docs cite what does not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_citation_parser_finds_tests_files_and_links() {
    assert_eq!(
        cited_test("a_stale_success_cannot_settle_a_job"),
        Some(vec!["a_stale_success_cannot_settle_a_job"])
    );
    assert_eq!(cited_test("broken_log::*"), Some(vec!["broken_log"]));
    assert_eq!(cited_test("galera::…"), Some(vec!["galera"]));
    assert_eq!(cited_test("innodb_autoinc_lock_mode"), None);
    assert_eq!(cited_test("Jobq::cancel"), None);
    assert!(ends_with_pattern(
        "tests/tests/chaos_outage_mariadb.rs",
        "chaos_outage_*.rs"
    ));
    assert!(ends_with_pattern("tests/tests/bulk.rs", "tests/bulk.rs"));
    assert!(!ends_with_pattern("tests/tests/bulk.rs", "ulk.rs"));
    assert_eq!(
        cited_files("(tests/bulk.rs and chaos_outage_*.rs, every backend)"),
        BTreeSet::from(["tests/bulk.rs".to_owned(), "chaos_outage_*.rs".to_owned()])
    );
    assert_eq!(
        relative_links("see [a](docs/a.md#x), [b](https://b.example) and [c](#c)"),
        ["docs/a.md"]
    );
}

/// The `major.minor` of the sqlx jobq-runtime depends on, from the
/// workspace's `[workspace.dependencies]`.
fn jobq_sqlx_version(root: &Path) -> String {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.starts_with("sqlx = "))
        .expect("sqlx in [workspace.dependencies]");
    let after = &line[line.find("version = \"").expect("a version") + 11..];
    after[..after.find('"').unwrap()].to_owned()
}

/// The sqlx versions a text names: `sqlx 0.8`, `sqlx = "0.8"`, `sqlx-0.8`.
fn named_sqlx_versions(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("sqlx") {
        let rest = text[at + 4..].trim_start_matches([' ', '=', '"', '\\', '-', 'v']);
        let version: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let version = version.trim_end_matches('.');
        if version.contains('.') {
            found.push(version.to_owned());
        }
    }
    found
}

/// The compile error of `enqueue_in` (connection.rs), the re-export's docs, the README's
/// install section and the backends guide name the sqlx version jobq is
/// built on, and the lock file has it.
#[test]
fn the_sqlx_version_the_docs_name_is_the_one_jobq_is_built_on() {
    let root = root();
    let version = jobq_sqlx_version(&root);
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    assert!(
        lock.contains(&format!("name = \"sqlx\"\nversion = \"{version}.")),
        "Cargo.lock has no sqlx {version}.x"
    );
    for file in [
        "jobq-runtime/src/connection.rs",
        "jobq-runtime/src/lib.rs",
        "README.md",
        "docs/backends.md",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let named = named_sqlx_versions(&text);
        assert!(!named.is_empty(), "{file} names no sqlx version");
        let others: Vec<&String> = named.iter().filter(|v| **v != version).collect();
        assert!(
            others.is_empty(),
            "{file} names sqlx {others:?}; jobq is built on sqlx {version}"
        );
    }
    assert_eq!(
        named_sqlx_versions(r#"sqlx 0.8, sqlx = \"0.8\", sqlx-0.9.1 and sqlx::query"#),
        ["0.8", "0.8", "0.9.1"]
    );
}

/// The lines of the ```sh blocks of a Markdown text, comments and
/// continuation backslashes removed, continued lines joined.
fn shell_lines(markdown: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed.trim_end() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = line.split(" #").next().unwrap_or_default();
        if code.trim_start().starts_with('#') {
            continue;
        }
        match code.trim_end().strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(code);
                if !pending.trim().is_empty() {
                    lines.push(pending.trim().to_owned());
                }
                pending.clear();
            }
        }
    }
    lines
}

/// What the workspace's manifests declare: packages with their features,
/// and the names of test, example and bin targets.
#[derive(Debug, Default)]
struct Targets {
    packages: BTreeSet<String>,
    features: BTreeSet<(String, String)>,
    tests: BTreeSet<String>,
    examples: BTreeSet<String>,
    bins: BTreeSet<String>,
}

fn targets(root: &Path, files: &[String]) -> Targets {
    let mut t = Targets::default();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = &workspace[workspace.find("members = [").unwrap()..];
    let members = &members[..members.find(']').unwrap()];
    for member in members.split('"').skip(1).step_by(2) {
        let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        let mut section = String::new();
        let mut package = String::new();
        for line in manifest.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.to_owned();
                continue;
            }
            let Some((key, value)) = line.split_once(" = ") else {
                continue;
            };
            let value = value.trim_matches('"').to_owned();
            match (section.as_str(), key) {
                ("[package]", "name") => {
                    package.clone_from(&value);
                    t.packages.insert(value);
                }
                ("[features]", feature) => {
                    t.features.insert((package.clone(), feature.to_owned()));
                }
                ("[[test]]", "name") => {
                    t.tests.insert(value);
                }
                ("[[bin]]", "name") => {
                    t.bins.insert(value);
                }
                _ => {}
            }
        }
        // Optional dependencies are features too; every package has its backends' names.
        for dep in ["mysql", "postgres", "sqlite"] {
            if manifest.contains(&format!("jobq-runtime/{dep}")) {
                t.features.insert((package.clone(), dep.to_owned()));
            }
        }
    }
    for file in files {
        let parts: Vec<&str> = file.split('/').collect();
        let stem = parts.last().unwrap().trim_end_matches(".rs").to_owned();
        let parent = parts[parts.len().saturating_sub(2)];
        // A test of several files: tests/<name>/main.rs.
        if stem == "main" && parts.len() >= 3 && parts[parts.len() - 3] == "tests" {
            t.tests.insert(parent.to_owned());
        }
        match parent {
            "tests" if parts.len() >= 2 => {
                t.tests.insert(stem);
            }
            "examples" => {
                t.examples.insert(stem);
            }
            "bin" => {
                t.bins.insert(stem);
            }
            _ => {}
        }
    }
    t
}

/// What is wrong with one shell line of the docs, if anything.
fn check_shell_line(root: &Path, t: &Targets, line: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for word in line.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == '"') {
        let path = word.trim_start_matches("./");
        if path.starts_with("scripts/") && !root.join(path).is_file() {
            problems.push(format!("no script {path}"));
        }
    }
    let words: Vec<&str> = line
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .collect();
    if words.first() != Some(&"cargo") {
        return problems;
    }
    // Cargo's own arguments: up to `--`.
    let cargo: Vec<&str> = words.iter().copied().take_while(|w| *w != "--").collect();
    let mut package = None;
    let mut i = 1;
    while i < cargo.len() {
        let value = cargo.get(i + 1).copied().unwrap_or_default();
        match cargo[i] {
            "-p" | "--package" => {
                if !t.packages.contains(value) {
                    problems.push(format!("no package {value}"));
                }
                package = Some(value);
            }
            "--test" if !t.tests.contains(value) => problems.push(format!("no test {value}")),
            "--example" if !t.examples.contains(value) => {
                problems.push(format!("no example {value}"));
            }
            "--bin" if !t.bins.contains(value) => problems.push(format!("no bin {value}")),
            "--features" => {
                let package = package.unwrap_or_default().to_owned();
                for feature in value.split(',') {
                    if !t.features.contains(&(package.clone(), feature.to_owned())) {
                        problems.push(format!("package {package} has no feature {feature}"));
                    }
                }
            }
            "--path" if !root.join(value).join("Cargo.toml").is_file() => {
                problems.push(format!("no package at {value}"));
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    if cargo.get(1) == Some(&"install") {
        if let Some(name) = cargo.iter().skip(2).find(|w| !w.starts_with('-')) {
            let after_path = cargo.contains(&"--path");
            if !after_path && !t.packages.contains(*name) {
                problems.push(format!(
                    "cargo install {name}: not a package of the workspace"
                ));
            }
        }
    }
    problems
}

/// Every command in the ```sh blocks of the README and the guides names
/// packages, test/example/bin targets, features and scripts that exist.
#[test]
fn every_shell_command_the_docs_show_names_what_exists() {
    let root = root();
    let files = sources(&root);
    let t = targets(&root, &files);
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents(&root) {
        let shown = doc.strip_prefix(&root).unwrap().display().to_string();
        for line in shell_lines(&std::fs::read_to_string(&doc).unwrap()) {
            checked += 1;
            for problem in check_shell_line(&root, &t, &line) {
                problems.push(format!("{shown}: `{line}`: {problem}"));
            }
        }
    }
    assert!(checked > 20, "only {checked} shell lines found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    let mistakes = [
        "cargo run -p quickstrat",
        "cargo test -p jobq-tests --test no_such_test",
        "cargo run -p quickstart --features mssql",
        "eval \"$(scripts/no-such.sh)\"",
        "cargo install jobq",
    ];
    for line in mistakes {
        assert!(
            !check_shell_line(&root, &t, line).is_empty(),
            "`{line}` passed the check"
        );
    }
}
