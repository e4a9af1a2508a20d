//! Engine failures (out of memory, a buffer over the backend's size limit, a lost device) are
//! panics inside burn. A training step or evaluation runs under [`guarded`], which turns such a
//! panic into one error naming the cause and the fix; the run directory keeps its last
//! checkpoint (written atomically), so `normlab train --resume RUN` continues from there.

/// Runs `f` (a step or an evaluation at `step`); a panic inside it becomes [`failure`].
pub fn guarded<T>(step: usize, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    crate::guard::catch(f).unwrap_or_else(|msg| Err(failure(&msg, step)))
}

/// The error for an engine panic with message `msg` at `step`.
pub fn failure(msg: &str, step: usize) -> anyhow::Error {
    let lower = msg.to_lowercase();
    let fix = if ["allocat", "memory", "buffer of size", "oom"].iter().any(|k| lower.contains(k)) {
        "the step does not fit the device: lower train.micro_batch_size (gradients accumulate to the \
         same batch), train.seq_len or the model size, or set train.checkpoint_activations = true"
    } else if lower.contains("lost") || lower.contains("device") {
        "the device failed: check it (e.g. nvidia-smi) and resume"
    } else {
        "this is a bug: please report it with the run's config.toml"
    };
    let first = msg.lines().next().unwrap_or("(no message)");
    anyhow::anyhow!(
        "the compute engine failed at step {step} ({first}); {fix}. The run keeps its last checkpoint: \
         `normlab train --resume RUN` continues from it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_panic_becomes_one_error_with_the_fix() {
        let e = guarded(12, || -> anyhow::Result<()> { panic!("can't allocate buffer of size 4294967296") });
        let msg = format!("{:#}", e.unwrap_err());
        assert!(msg.contains("step 12") && msg.contains("train.micro_batch_size"), "{msg}");
        assert!(msg.contains("--resume"), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
        let lost = format!("{:#}", failure("Device lost", 3));
        assert!(lost.contains("the device failed"), "{lost}");
        assert_eq!(guarded(1, || Ok(5)).unwrap(), 5);
    }
}
