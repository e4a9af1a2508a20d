//! Printing that never stops the program: a closed pipe (`normlab recipes | head -1`) or a
//! terminal that went away ends the output, not the work; a training run keeps training. The
//! standard `println!` panics on such a write.

use std::fmt::Arguments;
use std::io::Write;

/// Writes `args` and a newline to standard output; a failed write is dropped.
pub fn out(args: Arguments<'_>) {
    let _ = std::io::stdout().lock().write_fmt(format_args!("{args}\n"));
}

/// Writes `args` to standard output without a newline and flushes (text as it is generated).
pub fn out_partial(args: Arguments<'_>) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_fmt(args).and_then(|()| o.flush());
}

/// Writes `args` and a newline to standard error; a failed write is dropped.
pub fn err(args: Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(format_args!("{args}\n"));
}
