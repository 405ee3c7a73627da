"""Python reference for router/chat: renders raw OpenAI chat request bodies
the way vLLM serves them, with the Hugging Face chat-template environment
written out literally in ../jinja/testdata/hf_env.py.

usage: python3 render_reference.py TOKENIZER_CONFIG [--trust-request-template] < bodies.jsonl
Each stdin line is a JSON request body; each stdout line is
{"text": rendered} or {"error": message}.

The request rules are the vLLM behaviour documented in router/chat/normalize.go,
written here independently in Python.
"""
import json
import os
import sys

import jinja2.meta
import jinja2.nodes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jinja", "testdata"))
from hf_env import ENV  # noqa: E402  (the environment lives with the engine's tests)

HF_PARAMS = {"conversation", "tools", "documents", "chat_template", "add_generation_prompt",
             "continue_final_message", "tokenize", "padding", "truncation", "max_length",
             "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs"}
SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
           "mask_token", "additional_special_tokens"]
TEXT_FIELD = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
              "thinking": "thinking", "tool_reference": "name"}


def token_str(v):
    return v["content"] if isinstance(v, dict) else v


def load_config(path):
    cfg = json.load(open(path, encoding="utf-8"))
    ct = cfg.get("chat_template")
    templates = {"default": ct} if isinstance(ct, str) else {t["name"]: t["template"] for t in (ct or [])}
    special = {}
    for name in SPECIAL:
        v = cfg.get(name)
        if v is None:
            continue
        special[name] = [token_str(x) for x in v] if isinstance(v, list) else token_str(v)
    return templates, special


def loops_over_content(source):
    """vLLM's content-format detection on the real Jinja AST."""
    ast = ENV.parse(source)

    def access(node, var, key=None):
        if isinstance(node, (jinja2.nodes.Filter, jinja2.nodes.Test)):
            return node.node is not None and access(node.node, var, key)
        if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
            return access(node.node, var, key)
        if key is None:
            return isinstance(node, jinja2.nodes.Name) and node.name == var
        if isinstance(node, jinja2.nodes.Getitem):
            return access(node.node, var) and isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key
        if isinstance(node, jinja2.nodes.Getattr):
            return access(node.node, var) and node.attr == key
        return False

    names, queue = ["messages"], ["messages"]
    while queue:
        v = queue.pop(0)
        for a in ast.find_all(jinja2.nodes.Assign):
            if isinstance(a.target, jinja2.nodes.Name) and access(a.node, v) and a.target.name not in names:
                names.append(a.target.name)
                queue.append(a.target.name)
    items = [f.target.name for f in ast.find_all(jinja2.nodes.For)
             if isinstance(f.target, jinja2.nodes.Name) and any(access(f.iter, n) for n in names)]
    return any(access(f.iter, m, "content") for f in ast.find_all(jinja2.nodes.For) for m in items)


class Untokenizable(Exception):
    pass


def part_text(part):
    if isinstance(part, str):
        return part
    kind, uuid = part.get("type"), part.get("uuid")
    if isinstance(kind, str) and kind in TEXT_FIELD and uuid is None:
        value = part.get(TEXT_FIELD[kind])
        if value is None and kind in ("text", "refusal"):
            return None
        if not isinstance(value, str):
            raise ValueError("text part without text")
        return value
    if kind is None or uuid is not None:
        raise Untokenizable("untyped part")
    if kind in ("image_url", "input_image", "audio_url", "input_audio", "video_url", "image_embeds",
                "audio_embeds", "prompt_embeds", "image_pil"):
        raise Untokenizable("multimodal part")
    raise ValueError("unsupported part type")


def conversation(messages, openai_format):
    conv = []
    for m in messages:
        content = m.get("content")
        parts = [] if content is None else [content] if isinstance(content, str) else content
        texts = [t for t in (part_text(p) for p in parts) if t is not None]
        msg = {"role": m["role"],
               "content": [{"type": "text", "text": t} for t in texts] if openai_format else "\n".join(texts)}
        if m["role"] == "assistant":
            if m.get("tool_calls") is not None:
                msg["tool_calls"] = [{"id": c["id"], "function": {"arguments": c["function"]["arguments"],
                                                                  "name": c["function"]["name"]},
                                      "type": "function"} for c in m["tool_calls"]]
            if m.get("reasoning") is not None:
                msg["reasoning"] = msg["reasoning_content"] = m["reasoning"]
        elif m["role"] == "tool":
            if "tool_call_id" in m:
                msg["tool_call_id"] = m["tool_call_id"]
            if isinstance(msg["content"], list) and all(p.get("type") == "text" for p in msg["content"]):
                msg["content"] = "\n".join(p["text"] for p in msg["content"])
        if isinstance(m.get("name"), str):
            msg["name"] = m["name"]
        if msg.get("tool_calls") == []:
            del msg["tool_calls"]
        for call in msg.get("tool_calls", []):
            try:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
            except json.JSONDecodeError:
                call["function"]["arguments"] = {}
        conv.append(msg)
    return conv


def dump_tool(tool):
    fn = tool["function"]
    out_fn = {"name": fn["name"], "description": fn.get("description"), "parameters": fn.get("parameters")}
    out_fn.update({k: v for k, v in fn.items() if k not in out_fn})
    out = {"type": tool.get("type", "function"), "function": out_fn}
    out.update({k: v for k, v in tool.items() if k not in out})
    return out


def render(body, templates, special, trust):
    req = json.loads(body)
    add_gen = req.get("add_generation_prompt", True)
    cont = req.get("continue_final_message", False)
    if add_gen and cont:
        raise ValueError("both add_generation_prompt and continue_final_message")
    tools = None if req.get("tools") is None else [dump_tool(t) for t in req["tools"]]
    requested = req.get("chat_template")
    if requested is not None and not trust:
        raise ValueError("request chat_template not trusted")
    if requested is not None:
        source = templates.get(requested, requested)
    elif tools is not None and "tool_use" in templates:
        source = templates["tool_use"]
    else:
        source = templates["default"]
    conv = conversation(req["messages"], loops_over_content(source))
    kwargs = {"add_generation_prompt": add_gen, "continue_final_message": cont, "tools": tools,
              "documents": req.get("documents")}
    kwargs.update(req.get("chat_template_kwargs") or {})
    declared = jinja2.meta.find_undeclared_variables(ENV.parse(source))
    kwargs = {k: v for k, v in kwargs.items() if k in declared or k in HF_PARAMS}
    extra = {k: v for k, v in kwargs.items() if k not in HF_PARAMS}
    add_gen = kwargs.get("add_generation_prompt", False)
    cont = kwargs.get("continue_final_message", False)
    if add_gen and cont:
        raise ValueError("continue_final_message and add_generation_prompt")
    text = ENV.from_string(source).render(messages=conv, tools=kwargs.get("tools"),
                                          documents=kwargs.get("documents"),
                                          add_generation_prompt=add_gen, **{**special, **extra})
    if cont:
        final = conv[-1]["content"]
        if isinstance(final, list):
            final = next(p["text"] for p in reversed(final) if "text" in p)
        loc = text.rindex(final.strip())
        if text[loc:loc + len(final.lstrip())] == final:
            text = text[:loc + len(final.lstrip())]
        else:
            text = text[:loc + len(final.strip())]
    return text


def main():
    templates, special = load_config(sys.argv[1])
    trust = "--trust-request-template" in sys.argv[2:]
    for line in sys.stdin:
        try:
            out = {"text": render(line, templates, special, trust)}
        except Untokenizable as e:
            out = {"untokenizable": str(e)}
        except Exception as e:  # every refusal is compared as "error"
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
