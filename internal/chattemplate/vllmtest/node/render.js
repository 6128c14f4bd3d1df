// A family's chat template rendered as transformers renders it, and the
// messages of a request made what vLLM hands the template.
//
// transformers renders templates with Python's Jinja2, transformers.js
// with @huggingface/jinja, which differs from Jinja2 where Python's types
// are stricter or looser than JavaScript's. The differences the families'
// templates reach are made Python's here, so that a render agrees with
// transformers' (internal/chattemplate/testdata/goldens) character for
// character, failures included:
//   - `+` of a string and anything else is Python's TypeError (DeepSeek V3
//     concatenates tool call arguments: a dict fails there);
//   - string filters (trim, upper, ...) of None work on "None", as Jinja2's
//     do (Llama 3.1 trims a tool-calling message's null content to "None").
"use strict";

const { Template, Interpreter, Environment } = require("@huggingface/jinja");

// The runtime's string type, which the package does not export.
const probe = new Environment();
probe.set("s", "");
const StringValue = probe.lookupVariable("s").constructor;

const pyTypes = {
  StringValue: "str", IntegerValue: "int", FloatValue: "float", BooleanValue: "bool", ObjectValue: "dict",
  ArrayValue: "list", TupleValue: "tuple", NullValue: "NoneType", UndefinedValue: "Undefined",
};
const pyType = (v) => pyTypes[v.type] || v.type;

const evaluate = Interpreter.prototype.evaluate;
const evaluateBinary = Interpreter.prototype.evaluateBinaryExpression;
const applyFilter = Interpreter.prototype.applyFilter;

// An operand evaluated already: the binary expression below evaluates its
// operands once, then hands them to the original as such.
Interpreter.prototype.evaluate = function (node, env) {
  if (node && node.type === "Evaluated") {
    return node.value;
  }
  return evaluate.call(this, node, env);
};

Interpreter.prototype.evaluateBinaryExpression = function (node, env) {
  if (node.operator.value !== "+") {
    return evaluateBinary.call(this, node, env);
  }
  const left = this.evaluate(node.left, env);
  const right = this.evaluate(node.right, env);
  const ls = left.type === "StringValue";
  const rs = right.type === "StringValue";
  if (ls && rs) {
    return new StringValue(left.value + right.value);
  }
  if (ls) {
    throw new TypeError(`can only concatenate str (not "${pyType(right)}") to str`);
  }
  if (rs) {
    throw new TypeError(`unsupported operand type(s) for +: '${pyType(left)}' and 'str'`);
  }
  return evaluateBinary.call(this, { ...node, left: { type: "Evaluated", value: left }, right: { type: "Evaluated", value: right } }, env);
};

const stringFilters = new Set(["trim", "upper", "lower", "title", "capitalize"]);

Interpreter.prototype.applyFilter = function (operand, filter, env) {
  const name = filter.type === "Identifier" ? filter.value : filter.callee && filter.callee.value;
  if (operand.type === "NullValue" && stringFilters.has(name)) {
    operand = new StringValue("None");
  }
  return applyFilter.call(this, operand, filter, env);
};

// Renderer renders one family's template with its special tokens, as
// transformers' apply_chat_template does.
class Renderer {
  constructor(config) {
    this.template = new Template(config.chat_template);
    this.special = {};
    for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
      const v = config[key];
      if (v != null) {
        this.special[key] = typeof v === "object" ? v.content : v;
      }
    }
  }

  // render is the template's text of messages. tools, when not null, are
  // given to the template; kwargs are the template's own options
  // (chat_template_kwargs: enable_thinking, ...).
  render(messages, { tools = null, addGenerationPrompt = false, kwargs = {} } = {}) {
    const ctx = { ...this.special, ...kwargs, messages, add_generation_prompt: addGenerationPrompt };
    if (tools != null) {
      ctx.tools = tools;
    }
    return this.template.render(ctx);
  }
}

// vllmMessages are the messages as vLLM's chat endpoints hand them to a
// template whose content is a string (all three families'): a content of
// parts is its text parts joined by newlines, a null content is "", an
// assistant message's tool calls' arguments are parsed from their JSON
// text (an empty one is {}), an empty tool_calls list is dropped, and the
// message keeps role, content, tool_calls, tool_call_id and name, with
// its reasoning (`reasoning`, or `reasoning_content`) as reasoning_content.
function vllmMessages(messages) {
  return messages.map((m) => {
    const out = { role: m.role, content: contentText(m.content) };
    if (m.role === "assistant") {
      if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
        out.tool_calls = m.tool_calls.map(vllmToolCall);
      }
      const reasoning = m.reasoning != null ? m.reasoning : m.reasoning_content;
      if (reasoning != null) {
        out.reasoning = reasoning;
        out.reasoning_content = reasoning;
      }
    }
    if (m.role === "tool" && m.tool_call_id != null) {
      out.tool_call_id = m.tool_call_id;
    }
    if (typeof m.name === "string") {
      out.name = m.name;
    }
    return out;
  });
}

function contentText(content) {
  if (content == null) {
    return "";
  }
  if (typeof content === "string") {
    return content;
  }
  if (!Array.isArray(content)) {
    throw new RequestError("a message's content must be a string or a list of parts");
  }
  const texts = [];
  for (const p of content) {
    if (typeof p === "string") {
      texts.push(p);
    } else if (p && (p.type === "text" || p.type === "input_text" || p.type === "output_text" || p.type === "refusal")) {
      if (p.text != null) {
        texts.push(p.text);
      }
    } else {
      throw new RequestError(`unsupported content part type ${JSON.stringify(p && p.type)}: this server serves text only`);
    }
  }
  return texts.join("\n");
}

function vllmToolCall(tc) {
  if (!tc || typeof tc !== "object" || (tc.type || "function") !== "function" || typeof tc.function !== "object") {
    throw new RequestError("chat completions only support assistant tool_calls of type 'function'");
  }
  const fn = { ...tc.function };
  if (fn.arguments) {
    if (typeof fn.arguments === "string") {
      try {
        fn.arguments = JSON.parse(fn.arguments);
      } catch (e) {
        throw new RequestError(`a tool call's arguments are not JSON: ${e.message}`);
      }
      if (fn.arguments == null) {
        fn.arguments = {};
      }
    }
  } else {
    fn.arguments = {};
  }
  return { ...tc, function: fn };
}

// vllmTools are the tools as vLLM hands them to a template: each as its
// request model dumps it, {type, function: {name, description, parameters}}
// with null for a field not given.
function vllmTools(tools) {
  if (tools == null) {
    return null;
  }
  if (!Array.isArray(tools)) {
    throw new RequestError("tools must be a list");
  }
  return tools.map((t) => {
    const fn = (t && t.function) || {};
    if (typeof fn.name !== "string") {
      throw new RequestError("a tool's function has no name");
    }
    return {
      type: "function",
      function: { name: fn.name, description: fn.description ?? null, parameters: fn.parameters ?? null },
    };
  });
}

// RequestError is a request this server refuses: a 400.
class RequestError extends Error {
  constructor(message, status = 400) {
    super(message);
    this.status = status;
  }
}

module.exports = { Renderer, vllmMessages, vllmTools, RequestError };
