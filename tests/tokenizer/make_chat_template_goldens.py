#!/usr/bin/env python3
"""Renders every tests/data/chat_templates/*.jinja on every conversation of conversations.json with
Python's Jinja2, the way Hugging Face transformers renders chat templates, and writes golden.json;
renders every small template of snippets.json (one language feature each) into golden_snippets.json.
They are the reference that tests/tokenizer/jinja_golden_test.cc holds trine's interpreter to.

Environment as transformers' chat-template renderer: ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loop controls, a tojson without HTML escaping (ensure_ascii=False), and the globals
raise_exception and strftime_now (here at the fixed time of conversations.json, so the goldens do
not change with the date).

  python3 tests/tokenizer/make_chat_template_goldens.py           # rewrite golden.json
  python3 tests/tokenizer/make_chat_template_goldens.py --check   # exit 1 if it would change
Needs Debian's python3-jinja2.
"""
import datetime
import json
import pathlib
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "chat_templates"


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(now).strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_case(template, ctx):
    try:
        return {"text": template.render(**ctx)}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception's message, or Jinja's own error: trine must fail too.
        return {"error": str(e), "raised": type(e) is jinja2.exceptions.TemplateError}
    except Exception as e:  # a Python TypeError etc. inside the template
        return {"error": f"{type(e).__name__}: {e}", "raised": False}


def snippets(env):
    spec = json.loads((DATA / "snippets.json").read_text(encoding="utf-8"))
    out = []
    for source in spec["snippets"]:
        try:
            template = env.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as e:
            out.append({"source": source, "error": str(e), "raised": False})
            continue
        out.append({"source": source, **render_case(template, spec["context"])})
    return out


def write(path, obj, check):
    text = json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{path} is out of date: run {sys.argv[0]}", file=sys.stderr)
            return False
        return True
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return True


def main():
    spec = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    env = make_env(spec["now"])
    golden = {}
    for path in sorted(DATA.glob("*.jinja")):
        template = env.from_string(path.read_text(encoding="utf-8"))
        cases = {}
        for conv in spec["conversations"]:
            for gen in (True, False):
                ctx = {"messages": conv["messages"], "add_generation_prompt": gen,
                       "bos_token": spec["bos_token"], "eos_token": spec["eos_token"]}
                if "tools" in conv:
                    ctx["tools"] = conv["tools"]
                cases[conv["name"] + ("+gen" if gen else "")] = render_case(template, ctx)
        golden[path.stem] = cases
    check = "--check" in sys.argv
    ok = write(DATA / "golden.json", golden, check)
    ok = write(DATA / "golden_snippets.json", snippets(env), check) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
