//! Third-party code that panics on bad input (the `tokenizers` crate does, deserialising some
//! malformed `tokenizer.json` files) is run through [`catch`], which turns the panic into an
//! error and keeps its message off the terminal, so the user sees one `error:` line.
//! Panics in threads normlab does not run (a GPU runtime's engine thread) cannot be caught
//! that way: [`on_unguarded_panic`] lets the binary turn the ones it recognises into an
//! `error:` line and exit status 2.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Turns a panic outside [`catch`] into one line: for a panic whose message `recognise`
/// maps to a line, prints `error: LINE` and exits 2 (the process cannot go on: the panicking
/// thread may hold the device); other panics keep Rust's report (a bug keeps its backtrace).
pub fn on_unguarded_panic(recognise: fn(&str) -> Option<String>) {
    install_hook();
    let _ = RECOGNISE.set(recognise);
}

static RECOGNISE: std::sync::OnceLock<fn(&str) -> Option<String>> = std::sync::OnceLock::new();

fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) {
                return;
            }
            let line = RECOGNISE.get().and_then(|f| f(&message(info.payload())));
            match line {
                Some(line) => {
                    use std::io::Write;
                    let _ = writeln!(std::io::stderr(), "error: {line}");
                    std::process::exit(2);
                }
                None => default(info),
            }
        }));
    });
}

fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default()
}

/// Runs `f`; a panic inside it becomes `Err` with the panic's message.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let was = GUARDED.with(|g| g.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    result.map_err(|p| message(p.as_ref()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_becomes_an_error_and_a_value_passes_through() {
        assert_eq!(super::catch(|| 7), Ok(7));
        let e = super::catch(|| -> u8 { panic!("bad decoder") }).unwrap_err();
        assert_eq!(e, "bad decoder");
    }
}
