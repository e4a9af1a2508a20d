//! Third-party code that panics on bad input (the `tokenizers` crate does, deserialising some
//! malformed `tokenizer.json` files) is run through [`catch`], which turns the panic into an
//! error and keeps its message off the terminal, so the user sees one `error:` line.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`; a panic inside it becomes `Err` with the panic's message.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                default(info);
            }
        }));
    });
    let was = GUARDED.with(|g| g.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    result.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
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
