// The scripted model: what it answers, per conversation.
//
// A script is JSONL, one entry a line, as providers/mock's scripts are:
// {"match": "...", "turns": [...]}. An entry serves the conversations
// whose user messages contain match ("" matches every one); the turn
// answered is the number of assistant messages after the first user
// message that matches, the last turn repeating past the end. A turn is
// {"content", "reasoning", "tool_calls": [{"name", "arguments"}]} or a
// failing {"status", "error"}; arguments are a JSON object (written as
// Python's json.dumps writes it) or a string (the arguments' text as it
// is). A conversation no entry matches is refused with a 400.
"use strict";

const fs = require("fs");
const { pyJSON } = require("./families.js");
const { RequestError } = require("./render.js");

// loadScript reads and checks a script for family; errors name the line.
function loadScript(path, family) {
  const entries = [];
  fs.readFileSync(path, "utf8").split("\n").forEach((line, n) => {
    if (line.trim() === "") {
      return;
    }
    try {
      entries.push(parseEntry(JSON.parse(line), family));
    } catch (e) {
      throw new Error(`${path}:${n + 1}: ${e.message}`);
    }
  });
  if (entries.length === 0) {
    throw new Error(`${path}: no entries`);
  }
  return entries;
}

const entryKeys = new Set(["match", "turns"]);
const turnKeys = new Set(["content", "reasoning", "tool_calls", "status", "error"]);

function parseEntry(e, family) {
  unknownKeys(e, entryKeys, "entry");
  if (typeof e.match !== "string") {
    throw new Error('no "match" ("" matches every conversation)');
  }
  if (!Array.isArray(e.turns) || e.turns.length === 0) {
    throw new Error("no turns");
  }
  return { match: e.match, turns: e.turns.map((t, i) => parseTurn(t, i + 1, family)) };
}

function parseTurn(t, n, family) {
  unknownKeys(t, turnKeys, `turn ${n}`);
  const failing = t.status != null && t.status !== 200;
  if (failing && !(Number.isInteger(t.status) && t.status >= 400 && t.status <= 599)) {
    throw new Error(`turn ${n}: status ${t.status} is not an HTTP error status`);
  }
  if (t.error != null && !failing) {
    throw new Error(`turn ${n}: error without an error status`);
  }
  const turn = {
    content: t.content || "",
    reasoning: t.reasoning || "",
    calls: (t.tool_calls || []).map((c, k) => {
      if (!c || typeof c.name !== "string" || c.name === "") {
        throw new Error(`turn ${n}: tool call ${k + 1} has no name`);
      }
      return { name: c.name, arguments: argumentsText(c.arguments, n, k + 1) };
    }),
    status: failing ? t.status : 0,
    error: t.error || "",
  };
  if (!failing && !turn.content && !turn.reasoning && turn.calls.length === 0) {
    throw new Error(`turn ${n}: neither content, reasoning, tool_calls nor an error status`);
  }
  const why = !failing && family.check(turn);
  if (why) {
    throw new Error(`turn ${n}: ${why}`);
  }
  return turn;
}

function argumentsText(a, n, k) {
  if (a == null) {
    return "{}";
  }
  if (typeof a === "string") {
    return a;
  }
  if (typeof a === "object" && !Array.isArray(a)) {
    return pyJSON(a);
  }
  throw new Error(`turn ${n}: tool call ${k}: arguments must be a JSON object or a string`);
}

function unknownKeys(obj, known, what) {
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) {
    throw new Error(`${what} is not a JSON object`);
  }
  for (const k of Object.keys(obj)) {
    if (!known.has(k)) {
      throw new Error(`${what}: unknown field ${JSON.stringify(k)}`);
    }
  }
}

// turnFor is the scripted turn answering messages (as vLLM hands them to
// the template: contents are strings).
function turnFor(entries, messages) {
  for (const e of entries) {
    const i = messages.findIndex((m) => m.role === "user" && m.content.includes(e.match));
    if (i < 0) {
      continue;
    }
    const done = messages.slice(i + 1).filter((m) => m.role === "assistant").length;
    return e.turns[Math.min(done, e.turns.length - 1)];
  }
  throw new RequestError("no script entry matches the conversation (no user message contains an entry's match)");
}

module.exports = { loadScript, turnFor };
