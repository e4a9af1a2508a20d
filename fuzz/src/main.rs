//! One AFL++ harness for every target of `normlab::fuzzing`: the target is chosen by
//! `NORMLAB_FUZZ_TARGET` (see `tools/fuzz.sh`).

fn main() {
    let name = std::env::var("NORMLAB_FUZZ_TARGET").expect("set NORMLAB_FUZZ_TARGET to a target name");
    let (_, target) = normlab::fuzzing::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no fuzz target `{name}`"));
    afl::fuzz!(|data: &[u8]| target(data));
}
