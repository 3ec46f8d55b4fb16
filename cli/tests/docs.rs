//! Every `jobq` command line the README and the guides show names a
//! command and flags that `jobq` has: each is checked against that
//! command's `--help`. Lines are taken from `$ jobq …` in output blocks,
//! `cargo run -p jobq-cli -- …` in shell blocks, and inline `` `jobq …` ``.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_owned()
}

fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs = vec![root.join("README.md"), root.join("GUARANTEES.md")];
    let mut guides: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    docs.extend(guides);
    docs
}

/// The arguments of every `jobq` invocation a Markdown text shows.
fn invocations(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            continue;
        }
        let line = line.split(" #").next().unwrap_or_default().trim();
        for marker in ["$ jobq ", "cargo run -p jobq-cli -- "] {
            if let Some(at) = line.find(marker) {
                found.push(line[at + marker.len()..].to_owned());
            }
        }
    }
    for span in markdown.split('`').skip(1).step_by(2) {
        if let Some(args) = span.strip_prefix("jobq ") {
            found.push(args.to_owned());
        }
    }
    found
}

/// The command and the flags of one invocation's arguments (`--url X` and
/// placeholders such as `<command>` left out); `None` for `--help` alone.
fn command_and_flags(args: &str) -> Option<(String, Vec<String>)> {
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut command = None;
    let mut flags = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if word == "--url" {
            i += 2;
            continue;
        }
        if word.starts_with("--") {
            flags.push(word.split('=').next().unwrap().to_owned());
        } else if command.is_none() && !word.starts_with('<') && !word.starts_with('-') {
            command = Some(word.to_owned());
        }
        i += 1;
    }
    command.map(|c| (c, flags))
}

/// Whether `help` lists `flag` as a whole word (`--queue` is not `--queu`).
fn has_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        help[at + flag.len()..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
    })
}

/// The word right after `command` in `args`: a subcommand if `command`
/// has any (`schedule put`).
fn word_after(args: &str, command: &str) -> Option<String> {
    let words: Vec<&str> = args.split_whitespace().collect();
    let at = words.iter().position(|w| *w == command)?;
    words.get(at + 1).map(|w| (*w).to_owned())
}

/// Whether `help` lists subcommands, and `word` among them.
fn lists_subcommand(help: &str, word: &str) -> bool {
    help.split("\nCommands:\n").nth(1).is_some_and(|commands| {
        commands
            .lines()
            .take_while(|l| l.starts_with("  "))
            .any(|l| l.split_whitespace().next() == Some(word))
    })
}

fn help(command: &str) -> Result<String, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_jobq"))
        .args(command.split_whitespace())
        .arg("--help")
        .env_remove("JOBQ_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn every_jobq_command_the_docs_show_exists_with_its_flags() {
    let root = root();
    let mut helps: BTreeMap<String, Result<String, String>> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents(&root) {
        let shown = doc.strip_prefix(&root).unwrap().display().to_string();
        for args in invocations(&std::fs::read_to_string(&doc).unwrap()) {
            let Some((command, flags)) = command_and_flags(&args) else {
                continue;
            };
            checked += 1;
            let sub = word_after(&args, &command).filter(|word| {
                let outer = helps
                    .entry(command.clone())
                    .or_insert_with(|| help(&command));
                outer
                    .as_ref()
                    .is_ok_and(|text| lists_subcommand(text, word))
            });
            let command = match sub {
                Some(sub) => format!("{command} {sub}"),
                None => command,
            };
            let help = helps
                .entry(command.clone())
                .or_insert_with(|| help(&command));
            match help {
                Err(error) => problems.push(format!("{shown}: `jobq {args}`: {error}")),
                Ok(text) => {
                    for flag in flags.iter().filter(|f| !has_flag(text, f)) {
                        problems.push(format!(
                            "{shown}: `jobq {args}`: `jobq {command}` has no {flag}"
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 15, "only {checked} jobq command lines found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_finds_a_command_or_flag_that_does_not_exist() {
    let (command, flags) = command_and_flags("--url sqlite://x.db list --queu mail").unwrap();
    assert_eq!(command, "list");
    let list = help(&command).unwrap();
    assert!(has_flag(&list, "--queue"));
    assert!(!has_flag(&list, &flags[0]));
    assert!(help("lsit").is_err());
    // A subcommand's flags are its own.
    let args = "--url u schedule put n j '@daily' --time-zone Europe/Paris";
    let (command, _) = command_and_flags(args).unwrap();
    let sub = word_after(args, &command).unwrap();
    assert!(lists_subcommand(&help(&command).unwrap(), &sub));
    assert!(!lists_subcommand(&help("list").unwrap(), "put"));
    assert!(has_flag(&help("schedule put").unwrap(), "--time-zone"));
    assert!(!has_flag(&help("schedule").unwrap(), "--time-zone"));
    assert_eq!(
        invocations(
            "```text\n$ jobq --url u stats\ncargo run -p jobq-cli -- web\n```\n`jobq pause mail`, not `cargo run -p jobq-cli -- …`"
        ),
        ["--url u stats", "web", "pause mail"]
    );
}
