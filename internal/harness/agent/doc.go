// Package agent is evalflow's built-in harness program, exposed by the
// starter and worker binaries as the hidden "agent" subcommand, and the
// reference for harness authors: any program that honours the same contract
// can be a harness.
//
// # The env contract
//
// A harness is started once per rollout with these variables set:
//
//	OPENAI_BASE_URL       the interception server, already ending in /v1
//	OPENAI_API_KEY        the rollout's secret; send it as the API key, never print it
//	ANTHROPIC_BASE_URL    the same server without /v1, for Anthropic SDKs
//	ANTHROPIC_API_KEY     the same secret
//	OPENAI_MODEL          the model name to request (the server enforces the run's anyway)
//	ANTHROPIC_MODEL       the same model name
//	EVALFLOW_TASK_FILE    a JSON file holding the task (tasksets.Task: id, prompt
//	                      or messages, answer, info)
//	EVALFLOW_PROMPT       the task's prompt as text, for command-line agents
//	EVALFLOW_ANSWER_FILE  where to write the final answer, as plain text
//	EVALFLOW_MAX_TURNS    the rollout's most model calls, which the interception
//	                      server enforces; 0 is no bound (unset means 8 for this
//	                      agent)
//	EVALFLOW_WORKDIR      the rollout's scratch directory, also the working directory
//	EVALFLOW_WORKSPACE    the task's workspace, when it has one: the directory the
//	                      agent works in (also its working directory)
//
// See harness.Env for how a runtime builds this environment.
//
// The harness talks only to OPENAI_BASE_URL (or ANTHROPIC_BASE_URL): every call
// is recorded there as a turn of the rollout's trace, so a harness need not
// report anything else. It writes its final answer to EVALFLOW_ANSWER_FILE,
// which the rubric scores, and exits.
//
// # Exit codes
//
// 0 means an answer was written. Any other code is recorded as a task error,
// not retried; this agent uses 1 for errors (bad environment, API errors), 3
// when the interception server refused a call for a rollout limit, and 2
// when it stopped itself at its safety bound (SafetyTurns), which only a
// server enforcing no turn limit lets it reach. The agent never stops
// itself at EVALFLOW_MAX_TURNS: the server refuses the call past it and
// records the limit, and the rollout is limit:turns from that record. Standard output and standard error are kept
// (their tails) with the rollout, so keep them short and free of secrets.
//
// # This agent
//
// It sends a system prompt and the task, offers its tools, executes the tool
// calls the model makes and loops until the model answers without calling a
// tool. It streams by default (pass --no-stream to disable) and prints one
// line per turn.
//
// --dialect picks its protocol and the official SDK it uses: chat (OpenAI chat
// completions, the default), responses (the OpenAI Responses API, stateless,
// reasoning items sent back) or anthropic (Anthropic Messages on
// ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and ANTHROPIC_MODEL).
//
// # Tools
//
// The same four tools, with the same JSON schemas, in every dialect and for
// every task (a task that needs none never calls them):
//
//	shell       {"command": string}                  sh -c in the workspace
//	read_file   {"path": string}                     a text file, up to 256 KiB
//	write_file  {"path": string, "content": string}  creates parent directories
//	calculator  {"expression": string}               + - * / and parentheses
//
// The workspace is EVALFLOW_WORKSPACE, else the agent's working directory;
// relative paths are resolved against it, absolute ones are taken as they
// are. shell answers "exit code: N" (or "killed by signal S") and the
// command's stdout and stderr together; output past --tool-output-limit
// bytes (EVALFLOW_TOOL_OUTPUT_LIMIT, default 16384) keeps its head and tail
// around a "[… N bytes cut …]" line. Each command runs in a process group of
// its own, without the model API keys in its environment and with stdin
// empty; the group is killed after --tool-timeout (EVALFLOW_TOOL_TIMEOUT, a
// duration or seconds, default 60s), when the command returns (nothing it
// left in the background survives it) and when the agent dies, however it
// dies. (A process that leaves the group with setsid is on its own.)
//
// A tool's failure (bad arguments, an unknown tool, a missing file, a
// timeout) is a tool result starting with "error:", an Anthropic tool_result
// with is_error set; it never stops the agent.
//
// # Tool servers and the user
//
// A task's MCP tool servers (tasksets.ToolServer) are started by the agent,
// which is their client on the official Go SDK: a stdio server's command
// through the SDK's CommandTransport, an HTTP server's command beside it,
// reached by the streamable HTTP transport once its port answers. Their
// tools are offered as SERVER__TOOL next to the four above, and every
// server is stopped when the agent exits. They get the agent's
// environment without the model keys: EVALFLOW_STATE_URL,
// EVALFLOW_TASK_URL, EVALFLOW_BASE_URL and EVALFLOW_ROLLOUT_SECRET (which
// shell commands do not get).
//
// With a task's user (tasksets.User), each final answer of the model gets
// the user's reply as the next user message, until the reply holds
// tasksets.UserDone or is empty, or the user has had its turns: a user
// command runs once per turn with the conversation on its stdin; a persona
// is asked through the interception server's /user, which runs it. Every
// user turn is posted to /user, so that the trace holds it. Each stretch
// of the model's work between two user turns has its own
// EVALFLOW_MAX_TURNS.
package agent
