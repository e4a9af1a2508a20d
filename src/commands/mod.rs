//! What each `normlab` command does and prints: the binary (`src/main.rs`) parses the command
//! line and calls one of these. Every line goes through [`crate::io::term`], so a closed pipe
//! ends the output and never the work.
//!
//! - [`train`], [`finetune`], [`sweep`] (with `report`, `compare`, `studies`, `scaling`, `textnorm`),
//!   [`recipes`], [`data`], [`hf`] (`import`, `export`), [`serve`], [`bench`], [`track`]
//! - on a saved run: [`perplexity`], [`evaluate`], [`generate`], [`probe`]; [`windows`]: the
//!   token windows they read
//! - [`process`]: the process around a command (the template worker, the CPU set-up, the exit
//!   status and its `error:` line)

/// `println!` that a closed pipe cannot turn into a panic.
macro_rules! outln {
    () => {
        crate::io::term::out(format_args!(""))
    };
    ($($t:tt)*) => {
        crate::io::term::out(format_args!($($t)*))
    };
}

/// `eprintln!` that a closed pipe cannot turn into a panic.
macro_rules! errln {
    ($($t:tt)*) => {
        crate::io::term::err(format_args!($($t)*))
    };
}

/// `print!` and flush (text as it is generated).
macro_rules! outp {
    ($($t:tt)*) => {
        crate::io::term::out_partial(format_args!($($t)*))
    };
}

pub mod bench;
pub mod data;
pub mod evaluate;
pub mod finetune;
pub mod generate;
pub mod hf;
pub mod perplexity;
pub mod probe;
pub mod process;
pub mod recipes;
pub mod serve;
pub mod sweep;
pub mod track;
pub mod train;
mod windows;

/// Progress lines of the library, on standard error.
fn log(msg: &str) {
    errln!("{msg}");
}
