// A vLLM-shaped server for tests: one model family's real chat template
// and tokenizer, and a scripted model.
//
//   node server.js --family qwen3|llama3.1|deepseek-v3 [--script FILE]
//       [--model NAME] [--port N] [--max-model-len N] [--as-given]
//
// Routes, in vLLM's shapes: POST /tokenize, POST /detokenize,
// POST /v1/chat/completions (streamed or not; return_token_ids, logprobs,
// top_logprobs, max_tokens), prime-rl's POST /v1/chat/completions/tokens
// (the prompt as ids in "tokens"), GET /v1/models, GET /health.
//
// Messages reach the template as vLLM hands them over (render.js), unless
// --as-given: then as the request holds them, as transformers'
// apply_chat_template takes them. The completion is the scripted turn
// (script.js) as the family generates it (families.js), tokenized,
// ended with the family's end token unless max_tokens cuts it; the message
// answered is what vLLM's parsers read from its text.
//
// It prints "vllmtest: listening on http://HOST:PORT" on stdout when it
// serves, and a line a request on stderr.
"use strict";

const http = require("http");
const crypto = require("crypto");
const { Renderer, vllmMessages, vllmTools, RequestError } = require("./render.js");
const { families } = require("./families.js");
const { loadScript, turnFor } = require("./script.js");

function flags(argv) {
  const out = { port: "0", host: "127.0.0.1" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--as-given") {
      out.asGiven = true;
    } else if (a.startsWith("--") && i + 1 < argv.length) {
      out[a.slice(2)] = argv[++i];
    } else {
      throw new Error(`unknown argument ${a}`);
    }
  }
  return out;
}

// Model is the served model: its family, tokenizer, template and script.
class Model {
  constructor(opts) {
    this.family = families[opts.family];
    if (!this.family) {
      throw new Error(`--family ${opts.family}: one of ${Object.keys(families).join(", ")}`);
    }
    const pkg = require(this.family.package);
    this.tok = pkg.fromPreTrained();
    this.renderer = new Renderer(pkg.tokenizerConfig);
    this.name = opts.model || this.family.model;
    this.maxModelLen = Number(opts["max-model-len"] || this.family.maxModelLen);
    this.asGiven = !!opts.asGiven;
    this.script = opts.script ? loadScript(opts.script, this.family) : [];
    this.vocab = this.tok.model.vocab.length;
  }

  encode(text, addSpecial = false) {
    return this.tok.encode(text, { add_special_tokens: addSpecial });
  }

  decode(ids) {
    return this.tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  checkModel(name) {
    if (name != null && name !== this.name) {
      throw new RequestError(`The model \`${name}\` does not exist.`, 404);
    }
  }

  checkIDs(ids, what) {
    if (!Array.isArray(ids) || ids.some((id) => !Number.isInteger(id) || id < 0 || id >= this.vocab)) {
      throw new RequestError(`${what} must be a list of token ids below ${this.vocab}`);
    }
  }

  // conversation is a request's messages and tools as the template gets them.
  conversation(body) {
    if (!Array.isArray(body.messages)) {
      throw new RequestError("messages must be a list");
    }
    if (this.asGiven) {
      return { messages: body.messages, tools: body.tools ?? null };
    }
    return { messages: vllmMessages(body.messages), tools: vllmTools(body.tools) };
  }

  render(conv, body, gen) {
    try {
      return this.renderer.render(conv.messages, { tools: conv.tools, addGenerationPrompt: gen, kwargs: body.chat_template_kwargs || {} });
    } catch (e) {
      throw new RequestError(`the chat template failed: ${e.message}`);
    }
  }

  tokenize(body) {
    this.checkModel(body.model);
    let ids;
    if (body.prompt != null && body.messages != null) {
      throw new RequestError("give either messages or prompt, not both");
    } else if (typeof body.prompt === "string") {
      ids = this.encode(body.prompt, body.add_special_tokens ?? true);
    } else if (body.messages != null) {
      const text = this.render(this.conversation(body), body, body.add_generation_prompt ?? true);
      ids = this.encode(text, body.add_special_tokens ?? false);
    } else {
      throw new RequestError("messages or prompt is required");
    }
    return {
      count: ids.length, max_model_len: this.maxModelLen, tokens: ids,
      token_strs: body.return_token_strs ? this.tok.model.convert_ids_to_tokens(ids) : null,
    };
  }

  detokenize(body) {
    this.checkModel(body.model);
    this.checkIDs(body.tokens, "tokens");
    return { prompt: this.decode(body.tokens) };
  }

  // complete answers a chat body; prompt, when given, is its prompt's ids
  // (the tokens route), else the template's render of its messages.
  complete(body, prompt) {
    this.checkModel(body.model);
    if (body.n != null && body.n !== 1) {
      throw new RequestError("this server samples one choice: n must be 1");
    }
    const conv = this.conversation(body);
    if (prompt == null) {
      prompt = this.encode(this.render(conv, body, body.add_generation_prompt ?? true));
    }
    if (prompt.length >= this.maxModelLen) {
      throw new RequestError(`This model's maximum context length is ${this.maxModelLen} tokens. However, your request has ${prompt.length} input tokens.`);
    }
    const max = body.max_completion_tokens ?? body.max_tokens;
    if (max != null && !(Number.isInteger(max) && max >= 1)) {
      throw new RequestError("max_tokens must be at least 1");
    }
    const turn = turnFor(this.script, conv.messages.map((m) => ({ role: m.role, content: contentOf(m) })));
    if (turn.status) {
      throw new RequestError(turn.error || `scripted status ${turn.status}`, turn.status);
    }
    const thinking = (body.chat_template_kwargs || {}).enable_thinking !== false;
    let ids = this.encode(this.family.generate(turn, { thinking }));
    let finish = "stop";
    if (max != null && ids.length > max) {
      ids = ids.slice(0, max);
      finish = "length";
    }
    const text = this.decode(ids);
    const tools = Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== "none";
    const parsed = this.family.parse(text, { tools });
    parsed.calls.forEach((c) => (c.id = "chatcmpl-tool-" + crypto.randomUUID().replaceAll("-", "")));
    if (finish === "stop" && parsed.calls.length) {
      finish = "tool_calls";
    }
    return { prompt, ids, text, parsed, finish };
  }

  // logprob is the log probability of the completion's token at position
  // i, made up and deterministic; alternative k (0: the token) has k less.
  logprob(ids, i, k) {
    const id = (ids[i] + k) % this.vocab;
    const token = this.decode([id]);
    return { token, logprob: -((i % 8) + 1) / 16 - k, bytes: [...Buffer.from(token, "utf8")] };
  }

  logprobs(body, ids, from, to) {
    if (!body.logprobs) {
      return null;
    }
    const content = [];
    for (let i = from; i < to; i++) {
      const top = [];
      for (let k = 0; k < (body.top_logprobs || 0); k++) {
        top.push(this.logprob(ids, i, k));
      }
      content.push({ ...this.logprob(ids, i, 0), top_logprobs: top });
    }
    return { content };
  }
}

function contentOf(m) {
  return typeof m.content === "string" ? m.content : m.content == null ? "" : JSON.stringify(m.content);
}

function toolCall(c, index) {
  const out = { id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } };
  return index == null ? out : { index, ...out };
}

function completion(model, body, r) {
  const usage = { prompt_tokens: r.prompt.length, total_tokens: r.prompt.length + r.ids.length, completion_tokens: r.ids.length, prompt_tokens_details: null };
  return {
    id: "chatcmpl-" + crypto.randomUUID().replaceAll("-", ""),
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: model.name,
    choices: [{
      index: 0,
      message: {
        role: "assistant", content: r.parsed.content, reasoning_content: r.parsed.reasoning,
        tool_calls: r.parsed.calls.map((c) => toolCall(c)),
      },
      logprobs: model.logprobs(body, r.ids, 0, r.ids.length),
      finish_reason: r.finish,
      stop_reason: null,
      token_ids: body.return_token_ids ? r.ids : null,
    }],
    usage,
    prompt_logprobs: null,
    prompt_token_ids: body.return_token_ids ? r.prompt : null,
    kv_transfer_params: null,
  };
}

// chunks are a streamed answer's chunks: the role first (with the prompt's
// ids), then one a completion token, its delta what of the parsed message
// the text up to that token completes (a tool call whole, in the chunk
// of the token that closes it), the last with the finish reason; then
// the usage, when asked.
function chunks(model, body, r) {
  const base = { id: "chatcmpl-" + crypto.randomUUID().replaceAll("-", ""), object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: model.name };
  const out = [{ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] }];
  if (body.return_token_ids) {
    out[0].prompt_token_ids = r.prompt;
  }
  const ends = offsets(model, r.ids, r.text);
  const sent = new Set();
  let from = 0;
  r.ids.forEach((id, i) => {
    const last = i === r.ids.length - 1;
    const to = last ? r.text.length : ends[i];
    const delta = {};
    for (const s of r.parsed.spans) {
      if (s.kind === "tool") {
        if (!sent.has(s.index) && (s.end <= to || last)) {
          sent.add(s.index);
          (delta.tool_calls = delta.tool_calls || []).push(toolCall(r.parsed.calls[s.index], s.index));
        }
        continue;
      }
      const a = Math.max(s.start, from);
      const b = Math.min(s.end, to);
      if (a < b) {
        const key = s.kind === "reasoning" ? "reasoning_content" : "content";
        delta[key] = (delta[key] || "") + r.text.slice(a, b);
      }
    }
    from = to;
    const choice = { index: 0, delta, logprobs: model.logprobs(body, r.ids, i, i + 1), finish_reason: last ? r.finish : null };
    if (body.return_token_ids) {
      choice.token_ids = [id];
    }
    out.push({ ...base, choices: [choice] });
  });
  if (body.stream_options && body.stream_options.include_usage) {
    out.push({ ...base, choices: [], usage: { prompt_tokens: r.prompt.length, total_tokens: r.prompt.length + r.ids.length, completion_tokens: r.ids.length } });
  }
  return out;
}

// offsets are, for each completion token, where in text the tokens up to
// it end: a token ending inside a character ends where the one before did.
function offsets(model, ids, text) {
  const out = [];
  let at = 0;
  for (let i = 0; i < ids.length; i++) {
    const prefix = model.decode(ids.slice(0, i + 1));
    if (!prefix.endsWith("\uFFFD") && text.startsWith(prefix)) {
      at = prefix.length;
    }
    out.push(at);
  }
  return out;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > 32 << 20) {
        reject(new RequestError("request body too large", 413));
        req.destroy();
        return;
      }
      parts.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

function send(res, status, body) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

const errorTypes = { 400: "BadRequestError", 404: "NotFoundError", 413: "BadRequestError", 429: "RateLimitError" };

function sendError(res, status, message) {
  send(res, status, { error: { message, type: errorTypes[status] || (status >= 500 ? "InternalServerError" : "BadRequestError"), param: null, code: status } });
}

async function handle(model, req, res) {
  const path = req.url.split("?")[0];
  if (req.method === "GET" && path === "/health") {
    res.writeHead(200);
    return res.end();
  }
  if (req.method === "GET" && path === "/v1/models") {
    return send(res, 200, {
      object: "list",
      data: [{ id: model.name, object: "model", created: Math.floor(Date.now() / 1000), owned_by: "vllm", root: model.name, parent: null, max_model_len: model.maxModelLen }],
    });
  }
  const routes = ["/tokenize", "/detokenize", "/v1/chat/completions", "/v1/chat/completions/tokens"];
  if (req.method !== "POST" || !routes.includes(path)) {
    return send(res, 404, { detail: "Not Found" });
  }
  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    throw e instanceof RequestError ? e : new RequestError(`the body is not JSON: ${e.message}`);
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new RequestError("the body must be a JSON object");
  }
  if (path === "/tokenize") {
    return send(res, 200, model.tokenize(body));
  }
  if (path === "/detokenize") {
    return send(res, 200, model.detokenize(body));
  }
  let prompt = null;
  if (path === "/v1/chat/completions/tokens") {
    model.checkIDs(body.tokens, "tokens");
    if (body.tokens.length === 0) {
      throw new RequestError("tokens must not be empty");
    }
    prompt = body.tokens;
  }
  const r = model.complete(body, prompt);
  if (!body.stream) {
    return send(res, 200, completion(model, body, r));
  }
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  for (const c of chunks(model, body, r)) {
    res.write(`data: ${JSON.stringify(c)}\n\n`);
  }
  res.end("data: [DONE]\n\n");
}

function main() {
  let model;
  let opts;
  try {
    opts = flags(process.argv.slice(2));
    model = new Model(opts);
  } catch (e) {
    process.stderr.write(`vllmtest: ${e.message}\n`);
    process.exit(2);
  }
  const server = http.createServer((req, res) => {
    const start = Date.now();
    handle(model, req, res)
      .catch((e) => {
        const status = e instanceof RequestError ? e.status : 500;
        if (!res.headersSent) {
          sendError(res, status, e.message);
        } else {
          res.end();
        }
        process.stderr.write(`vllmtest: ${req.method} ${req.url}: ${e.message}\n`);
      })
      .finally(() => process.stderr.write(`vllmtest: ${req.method} ${req.url} ${res.statusCode} ${Date.now() - start}ms\n`));
  });
  server.listen(Number(opts.port), opts.host, () => {
    const a = server.address();
    process.stdout.write(`vllmtest: listening on http://${a.address}:${a.port}\n`);
  });
  process.on("SIGTERM", () => process.exit(0));
}

main();
