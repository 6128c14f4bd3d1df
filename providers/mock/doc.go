// Package mock is the offline "mock" model: a deterministic test double that
// speaks OpenAI chat completions, OpenAI Responses and Anthropic Messages over
// HTTP, streaming or not. It solves arithmetic questions, calling a
// "calculator" tool when one is offered, so evaluations run end to end with
// no provider configured; a script makes it act out other tasks.
//
// # Judging
//
// A conversation whose last user message is a judge's prompt, as the
// default template of evalflow's judge rubrics writes it (the headings
// "## Reference answer" and "## The assistant's final answer"), is graded
// deterministically: "Score: 10/10" when the answer contains the reference
// answer or ends with its number, "Score: 0/10" when it does not, and
// "Score: 5/10" without a reference answer. Scripts do not apply to it.
//
// # Scripts
//
// Config.Script names a JSONL file that scripts the model per task: one line
// per task, each a sequence of assistant turns, tool calls and then a final
// answer, so a test drives real tool calls through a real harness into a
// real workspace. Scripts are test fixtures: keep them in testdata/, never a
// task's answer in product code. A line:
//
//	{"match": "Create hello.txt", "turns": [{"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}, {"tool_calls": [{"name": "shell", "arguments": {"command": "cat hello.txt"}}]}, {"content": "Done."}]}
//
// Its fields (a JSON schema in short):
//
//	match          string            required; a substring of a user message's
//	                                 text; "" matches every conversation
//	turns          array of turns    required, at least one; in order
//	  content      string            the assistant's text; a turn without tool
//	                                 calls is the final answer
//	  tool_calls   array of calls    tool calls, several allowed, in order
//	    name       string            required; the tool's name
//	    arguments  object | string   the arguments; a string is sent verbatim
//	                                 (to script malformed ones); absent is {}
//	  status       integer           an HTTP status; other than 200 the call
//	                                 fails with it, in the caller's dialect
//	  error        string            that failure's message
//
// A turn holds content, tool calls or a failing status. Unknown fields are
// errors, and every error names the file and line.
//
// Only the conversation reaches the model: not the task's id, file or
// workspace. A line therefore matches on the text of a user message, in
// file order, the first line found wins; a task whose prompt is not
// distinctive can carry its id in the prompt. Conversations no line matches
// get the arithmetic behaviour.
//
// The turn answered is chosen from the conversation alone: the number of
// assistant messages after the user message that matched. The first call
// gets turns[0]; once the harness sent back the calls of a turn and their
// results, the next call gets the next turn, and past the last turn the last
// one repeats. A retried call therefore gets the same answer, tool call ids
// included, and any number of workers may share one script. (A failing
// status fails every retry of that call alike.)
//
// Tool names are not checked against the tools a request offers, so a script
// can drive any harness's own tools, with their own argument shapes (codex's
// shell or apply_patch, claude-code's Bash, Read or Write), as well as the
// built-in agent's shell, read_file, write_file and calculator. Tool calls go
// out in the caller's dialect: chat tool_calls, Responses function_call
// items, Anthropic tool_use blocks, streamed or not.
//
// # Token data
//
// A chat request that asks for logprobs (and top_logprobs) or, as vLLM
// takes it, return_token_ids gets them, streamed or not: one token per
// character, its id the code point (TokenIDs), log probabilities made up
// from the position (Logprob), prompt_token_ids at the top level and
// token_ids in the choice, as vLLM sends them.
//
// It also speaks the token routes of vLLM and prime-rl's vLLM extension:
// POST /tokenize (or /v1/tokenize) takes {"messages", "tools",
// "add_generation_prompt"} or {"prompt"} and answers {"count",
// "max_model_len", "tokens"} with the same tokenization, and POST
// /v1/chat/completions/tokens takes a chat completions body with the
// prompt as ids in "tokens", answering as /v1/chat/completions does with
// those ids as prompt_token_ids.
//
// Config.TokenMerge (a worker's --mock-token-merge) makes re-tokenizing a
// conversation differ from what was sampled, as a BPE tokenizer's merges
// do: in a prompt (prompt_token_ids, /tokenize of messages) every pair of
// adjacent ASCII letters of an assistant message is one id, above every
// code point, while completions are still sampled one id per character.
// Turn 2's prompt then does not start with turn 1's prompt and
// completion ids, which is what token-in prompts (--token-in) are for.
//
// # Policy versions
//
// With Config.PolicyVersionHeader set, every answer names in that header the
// version SetPolicyVersion set last, as an inference server that reloads
// its weights does: tests move it mid-run.
package mock
