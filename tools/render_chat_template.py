#!/usr/bin/env python3
"""Renders chat templates with Python's jinja2 set up as `transformers`' `apply_chat_template`
sets it up (`ImmutableSandboxedEnvironment` with `trim_blocks`, `lstrip_blocks` and loop
controls; `raise_exception` and `strftime_now` as globals), so that tests can hold normlab's
renderings and exports against the tool a user's model is loaded with.

Reads one JSON object from standard input, a list of renderings:
    [{"source": TEMPLATE, "bos_token": "...", "eos_token": "...", "messages": [...],
      "add_generation_prompt": true}, ...]
and prints the rendered texts as one JSON list.

    python3 tools/render_chat_template.py < requests.json
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = environment()
    out = []
    for r in json.load(sys.stdin):
        t = env.from_string(r["source"])
        out.append(t.render(messages=r["messages"], add_generation_prompt=r["add_generation_prompt"],
                            bos_token=r.get("bos_token") or "", eos_token=r.get("eos_token") or ""))
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
