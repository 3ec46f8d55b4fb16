//! Printing that a closed pipe cannot turn into a panic.
//!
//! `println!` panics when stdout is a pipe whose reader has gone
//! (`jobq list --json | head -c 10`). Every line the command prints goes
//! through `out!` and `outln!` instead: a closed stdout ends the output
//! and the command goes on quietly, exiting with the status it would have
//! had (`stats --watch` stops, as it has no one to show the table to). Any
//! other failure to write is said once on stderr and makes the command exit
//! with 1. `errln!` writes to stderr and ignores a closed one: there is no
//! one left to tell. The crate denies `print!`-style macros so that no line
//! bypasses this.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Stdout could not be written to: nothing more is printed there.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Writing failed otherwise than by a closed pipe (the exit status says so).
static WRITE_FAILED: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout and flushes, unless stdout is closed.
pub(crate) fn write_out(args: fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = io::stdout().lock();
    if let Err(error) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if error.kind() != io::ErrorKind::BrokenPipe {
            WRITE_FAILED.store(true, Ordering::Relaxed);
            write_err(format_args!("jobq: cannot write to stdout: {error}\n"));
        }
    }
}

/// Writes `args` to stderr; a closed stderr is ignored.
pub(crate) fn write_err(args: fmt::Arguments<'_>) {
    let mut stderr = io::stderr().lock();
    let _ = stderr.write_fmt(args).and_then(|()| stderr.flush());
}

/// Whether stdout is gone (its reader closed the pipe, or it failed).
pub(crate) fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Whether writing the output failed otherwise than by a closed pipe.
pub(crate) fn write_failed() -> bool {
    WRITE_FAILED.load(Ordering::Relaxed)
}

/// `print!` that a closed stdout cannot panic.
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdio::write_out(format_args!($($arg)*)) };
}

/// `println!` that a closed stdout cannot panic.
macro_rules! outln {
    () => { $crate::stdio::write_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that a closed stderr cannot panic.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::stdio::write_err(format_args!("{}\n", format_args!($($arg)*))) };
}
