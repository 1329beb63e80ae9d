#!/usr/bin/env python3
"""Renders real chat templates with Jinja as transformers' apply_chat_template does (a sandboxed
environment, trim_blocks and lstrip_blocks, raise_exception, tojson), for the conversations loft's
template tests compare with: tests/tokenizer/data/chat_template_reference.json. Needs only jinja2
(Debian's python3-jinja2). The templates are the test data's (tests/data/README.md says where each
comes from).
Usage: chat_template_reference.py > tests/tokenizer/data/chat_template_reference.json"""
import json, os, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data")


def raise_exception(message):
    raise ValueError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
env.globals["raise_exception"] = raise_exception


def from_config(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return json.load(f)["chat_template"]


def from_file(path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def u(text):
    return {"role": "user", "content": text}


def a(text):
    return {"role": "assistant", "content": text}


def s(text):
    return {"role": "system", "content": text}


# Conversations every template renders: one question, a system prompt, several turns with
# whitespace kept, code, digits, CJK and emoji.
common = [
    ([u("Hi")], True),
    ([s("You are terse."), u("What is 12345 + 678?"), a("13023")], False),
    ([u("Hello"), a("Hi there"), u("Who are you"), a("   I am an assistant   "), u("Another question")], True),
    ([u("日本語で説明して 🎉 (emoji) — ok?"), a("def f(x):\n    return x ** 2  # 12345\n")], False),
    ([s("Answer in French."), u("Say hi"), a("Salut !"), u("And bye")], True),
]
# Qwen 3's thinking: reasoning in earlier turns is dropped, the last turn keeps its block.
thinking = [
    ([u("2+2?"), a("<think>\nadd them\n</think>\n\n4")], False),
    ([u("2+2?"), a("<think>\nadd them\n</think>\n\n4"), u("times 3?"), a("<think>\n4*3\n</think>\n\n12")], False),
    ([s("Be brief."), u("2+2?"), a("<think>add</think>4"), u("times 3?")], True),
    ([u("Hi"), a("Hello!"), u("Bye"), a("\n\nBye!")], False),
]

templates = [
    ("qwen2.5", from_file("reference/chat_templates/Qwen-Qwen2.5-7B-Instruct.jinja"), {}, common),
    ("qwen3", from_config("tokenizers/qwen3/tokenizer_config.json"), {}, common + thinking),
    ("qwen3-no-thinking", from_config("tokenizers/qwen3/tokenizer_config.json"), {"enable_thinking": False},
     common + thinking),
    ("mistral", from_file("reference/chat_templates/mistralai-Mistral-7B-Instruct-v0.2.jinja"),
     {"bos_token": "<s>", "eos_token": "</s>"}, common),
    # v0.3's template puts the system prompt into the last message only when that is a user turn:
    # loft always puts it into the last user turn (mistral-common's rule), so only those cases.
    ("mistral-v3", from_file("reference/chat_templates/mistralai-v3.jinja"),
     {"bos_token": "<s>", "eos_token": "</s>"},
     [c for c in common if c[0][0]["role"] != "system" or c[0][-1]["role"] == "user"]),
]

out = []
for name, source, extra, convs in templates:
    template = env.from_string(source)
    for messages, generation in convs:
        rendered = template.render(messages=messages, add_generation_prompt=generation, **extra)
        out.append({"template": name, "messages": messages, "add_generation_prompt": generation,
                    "rendered": rendered})
json.dump({"cases": out}, sys.stdout, ensure_ascii=False, indent=1)
sys.stdout.write("\n")
