"""Writes tests/fixtures/tasks: a small file in each published task layout (tools/task_layouts.py)
and `requests.json`, the (context, continuation) pairs lm-evaluation-harness builds from each
file, zero-shot and with 2 examples (seed 1234; MMLU's examples from its dev file). The test
`tests/tasks.rs` asserts that normlab reads every file into exactly these requests.

    ~/.venvs/nl/bin/pip install "lm-eval==0.4.13" pyarrow
    HF_DATASETS_OFFLINE=1 ~/.venvs/nl/bin/python tools/make_task_fixtures.py
"""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task_layouts as tl  # noqa: E402

ITEMS = 8
SHOTS = (0, 2)


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(repo, "tests", "fixtures", "tasks")
    shutil.rmtree(out, ignore_errors=True)
    files = tl.write_layouts(out, tl.held_out_sentences(tl.corpus_tar(repo)), ITEMS, seed=7)
    import lm_eval
    expected = {"lm_eval": lm_eval.__version__, "seed": 1234, "tasks": {}}
    with tempfile.TemporaryDirectory() as yamls:
        for shots in SHOTS:
            # Few-shot leaves LAMBADA out: it has no answers to show.
            layouts = [l for l in tl.LAYOUTS if not (shots and l == "lambada_openai")]
            names = tl.write_yamls(yamls, files, shots, layouts)
            for name, docs in tl.lm_eval_requests(yamls, names).items():
                expected["tasks"][name] = docs
    with open(os.path.join(out, "requests.json"), "w") as f:
        json.dump(expected, f, indent=0, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    sizes = sum(os.path.getsize(os.path.join(out, p)) for p in os.listdir(out))
    print(f"wrote {len(os.listdir(out))} files ({sizes / 1024:.0f} kB) to {out}")


if __name__ == "__main__":
    main()
