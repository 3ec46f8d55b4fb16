//! The quickstart's output: cut short by a closed pipe (`| head`), the run
//! still finishes, removes its database and exits 0, without a panic; its
//! logs carry no colour codes when they do not go to a terminal.

use std::io::Read;
use std::process::{Command, Stdio};

fn quickstart() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quickstart"));
    command
        .env_remove("DATABASE_URL")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    command
}

#[test]
fn a_closed_stdout_or_stderr_ends_the_output_not_the_run() {
    // stdout closed before the first line; stderr read.
    let mut child = quickstart()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Both closed, with every log line on (they go to stdout too).
    let mut child = quickstart()
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));

    // The shell's way, after the first line.
    let output = Command::new("bash")
        .arg("-c")
        .arg("\"$0\" | head -n 1; echo \"${PIPESTATUS[0]}\"")
        .arg(env!("CARGO_BIN_EXE_quickstart"))
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("jobq quickstart on sqlite://"),
        "{stdout}"
    );
    assert_eq!(lines[1], "0", "the quickstart's exit status: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Its temp database is gone.
    let path = lines[0].trim_start_matches("jobq quickstart on sqlite://");
    assert!(
        !std::path::Path::new(path).exists(),
        "{path} was left behind"
    );
}

#[test]
fn logs_into_a_pipe_have_no_colour_codes() {
    let output = quickstart().env("RUST_LOG", "info").output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(" INFO "),
        "info lines were logged: {stdout}"
    );
    assert!(!stdout.contains('\x1b'), "colour codes in a pipe: {stdout}");
}
