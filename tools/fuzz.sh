#!/usr/bin/env bash
# Coverage-guided fuzzing of normlab's parsers and loaders with AFL++ on stable Rust
# (cargo-afl). Each target is a function of `normlab::fuzzing`; its seeds are in
# fuzz/seeds/TARGET, and every input that ever crashed it belongs in fuzz/regressions/TARGET
# (the unit test `fuzzing::tests` replays both, with random mutations, in every `cargo test`).
#
#   tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]     (default: 120 s, every target)
#   tools/fuzz.sh --execs N [TARGET ...]                (about N executions per target)
#
# Prints, per target, the inputs run and the crashes found (saved under fuzz/out/TARGET).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-V 120)
what="120 s"
if [ "${1:-}" = "--execs" ]; then
  limit=(-E "$2")
  what="$2 executions"
  shift 2
elif [ $# -gt 0 ]; then
  limit=(-V "$1")
  what="$1 s"
  shift
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(run_config set_edits recipe scale_expr safetensors checkpoint_state latest_json token_file tokenizer_json jsonl_corpus pair_files metrics_jsonl probes_jsonl results_jsonl sweep_file completion_request normalize_request hf_config)
fi
command -v cargo-afl >/dev/null || cargo install cargo-afl
(cd fuzz && cargo afl build --release)
status=0
for t in "${targets[@]}"; do
  out=fuzz/out/$t
  rm -rf "$out"
  mkdir -p fuzz/out
  AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
    NORMLAB_FUZZ_TARGET=$t cargo afl fuzz "${limit[@]}" -i "fuzz/seeds/$t" -o "$out" fuzz/target/release/normlab-fuzz \
    > "fuzz/out/$t.log" 2>&1 || { echo "$t: afl-fuzz failed, see fuzz/out/$t.log"; status=1; continue; }
  execs=$(awk '/^execs_done/ {print $3}' "$out/default/fuzzer_stats")
  crashes=$(find "$out/default/crashes" -type f -name 'id:*' | wc -l)
  hangs=$(find "$out/default/hangs" -type f -name 'id:*' | wc -l)
  echo "$t: $execs inputs (limit: $what), $crashes crashes, $hangs hangs"
  [ "$crashes" -eq 0 ] || status=1
done
exit $status
