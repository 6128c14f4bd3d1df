#!/usr/bin/env python3
"""Run one rollout through evalflow's rollout gateway as verifiers' gateway
environments (RolloutGatewayMixin) do, with the standard library only.

Start a worker with a gateway, then run this:

    export EVALFLOW_GATEWAY_TOKEN=$(openssl rand -hex 16)
    go run ./worker --gateway-addr 127.0.0.1:8470 &
    python3 examples/gateway_seed.py --gateway http://127.0.0.1:8470

The environment's part: register the rollout (model, sampling parameters,
max turns, max sequence length), start the agent with
OPENAI_BASE_URL={gateway}/v1/rollouts/{rollout_id}, wait for it, fetch the
trajectory (trajectory, prompt, completion, is_truncated) and unregister,
on error too. The agent's part (`gateway_seed.py agent`, run as a
subprocess): an OpenAI chat completions client over urllib that answers an
arithmetic question with a calculator tool, as any agent in a sandbox
would. The agent's API key is the gateway token. The last line printed is
a JSON summary.
"""

import argparse
import ast
import json
import operator
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid


class GatewayError(Exception):
    """A call the gateway answered with an error."""

    def __init__(self, status, message):
        super().__init__(f"gateway answered {status}: {message}")
        self.status, self.message = status, message


def http_json(method, url, token, body=None, timeout=600):
    """Send a JSON request with a bearer token; return the decoded answer."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        raw = e.read().decode(errors="replace")
        try:
            message = json.loads(raw).get("error", {}).get("message", raw)
        except ValueError:
            message = raw
        raise GatewayError(e.code, message) from None


# ---- the environment: RolloutGatewayMixin's flow ----------------------------


class GatewayEnv:
    """The gateway side of a rollout, as RolloutGatewayMixin runs it."""

    def __init__(self, gateway_url, token, model, sampling_params, max_turns, max_seq_len, timeout_seconds=21600.0):
        self.gateway_url = gateway_url.rstrip("/")
        self.token = token
        self.model = model
        self.sampling_params = sampling_params
        self.max_turns = max_turns
        self.max_seq_len = max_seq_len
        self.timeout = timeout_seconds
        # environment_vars reach the agent beside the mixin's own; the
        # gateway token is the one credential the environment has.
        self.environment_vars = {"OPENAI_API_KEY": token}

    def rollout_url(self, state, action):
        return f"{self.gateway_url}/v1/rollouts/{state['rollout_id']}/{action}"

    def register_rollout(self, state):
        body = {
            "model": self.model,
            "sampling_params": self.sampling_params,
            "max_turns": self.max_turns,
            "max_seq_len": self.max_seq_len,
        }
        http_json("POST", self.rollout_url(state, "register"), self.token, body, self.timeout)
        state["registered"] = True

    def unregister_rollout(self, state):
        http_json("POST", self.rollout_url(state, "unregister"), self.token, None, self.timeout)
        state["registered"] = False

    def fetch_trajectory(self, state):
        answer = http_json("GET", self.rollout_url(state, "trajectory"), self.token, None, self.timeout)
        state["trajectory"] = answer["trajectory"]
        state["prompt"] = answer["prompt"]
        state["completion"] = answer["completion"]
        state["is_truncated"] = answer["is_truncated"]

    def build_env_vars(self, state):
        env = {
            "OPENAI_BASE_URL": state["rollout_base_url"],
            "OPENAI_MODEL": self.model,
            "OPENAI_TIMEOUT": "600",
            "OPENAI_REQUEST_TIMEOUT": "600",
            "HTTPX_TIMEOUT": "600",
        }
        env.update(self.environment_vars)
        return env

    def run_agent(self, state, command, timeout):
        env = dict(os.environ)
        env.update(self.build_env_vars(state))
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            state["agent_timed_out"] = True
            state["agent_stdout"], state["agent_stderr"] = e.stdout or "", e.stderr or ""
            return
        state["agent_completed"] = True
        state["agent_exit_code"] = done.returncode
        state["agent_stdout"], state["agent_stderr"] = done.stdout, done.stderr

    def rollout(self, agent_command, agent_timeout=600):
        state = {
            "rollout_id": f"rollout_{uuid.uuid4().hex}",
            "gateway_url": self.gateway_url,
            "registered": False,
            "agent_completed": False,
            "agent_timed_out": False,
            "error": None,
        }
        state["rollout_base_url"] = f"{self.gateway_url}/v1/rollouts/{state['rollout_id']}"
        try:
            self.register_rollout(state)
            self.run_agent(state, agent_command, agent_timeout)
            self.fetch_trajectory(state)
        except GatewayError as e:
            state["error"] = str(e)
        finally:
            if state["registered"]:
                try:
                    self.unregister_rollout(state)
                except GatewayError as e:  # logged, never raised
                    print(f"unregister {state['rollout_id']}: {e}", file=sys.stderr)
                    state["error"] = state["error"] or str(e)
        return state


def text_of(message):
    return "".join(p.get("text", "") for p in message.get("content") or [])


def summarize(state):
    """What a trainer checks of the trajectory: one entry per step."""
    steps = []
    for step in state.get("trajectory", []):
        tokens = step.get("tokens") or {}
        steps.append({
            "prompt_tokens": len(tokens.get("prompt_ids", [])),
            "completion_tokens": len(tokens.get("completion_ids", [])),
            "logprobs": len(tokens.get("completion_logprobs", [])),
            "masks_ok": bool(tokens)
            and all(m == 0 for m in tokens["prompt_mask"])
            and all(m == 1 for m in tokens["completion_mask"])
            and len(tokens["prompt_mask"]) == len(tokens["prompt_ids"])
            and len(tokens["completion_mask"]) == len(tokens["completion_ids"]),
            "finish_reason": step.get("finish_reason"),
            "extends_previous": step.get("extends_previous"),
            "tool_calls": [c["name"] for m in step.get("completion", []) for c in m.get("tool_calls") or []],
        })
    return {
        "rollout_id": state["rollout_id"],
        "agent_exit_code": state.get("agent_exit_code"),
        "agent_answer": (state.get("agent_stdout") or "").strip(),
        "agent_stderr": (state.get("agent_stderr") or "").strip()[-500:],
        "prompt": [text_of(m) for m in state.get("prompt", [])],
        "completion_roles": [m["role"] for m in state.get("completion", [])],
        "final_answer": text_of(state["completion"][-1]) if state.get("completion") else None,
        "is_truncated": state.get("is_truncated"),
        "steps": steps,
        "unregistered": not state["registered"],
        "error": state["error"],
    }


# ---- the agent: an OpenAI chat completions client in the sandbox ------------

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}

OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(expression):
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(f"not arithmetic: {expression!r}")

    value = ev(ast.parse(expression, mode="eval"))
    return str(int(value)) if float(value).is_integer() else str(value)


def agent(question, max_turns=8):
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    key = os.environ.get("OPENAI_API_KEY", "")
    model = os.environ.get("OPENAI_MODEL", "")
    timeout = float(os.environ.get("OPENAI_TIMEOUT", "600"))
    messages = [{"role": "user", "content": question}]
    for _ in range(max_turns):
        req = {"model": model, "messages": messages, "tools": [CALCULATOR]}
        try:
            answer = http_json("POST", base + "/chat/completions", key, req, timeout)
        except GatewayError as e:
            print(f"agent: chat completions: {e}", file=sys.stderr)
            return 1
        message = answer["choices"][0]["message"]
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            print(message.get("content") or "")
            return 0
        for call in calls:
            args = json.loads(call["function"]["arguments"] or "{}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": calculate(args["expression"])})
    print("agent: no answer within the turns allowed", file=sys.stderr)
    return 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "agent":
        sys.exit(agent(os.environ.get("AGENT_QUESTION", "What is 2 + 3?")))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gateway", default=os.environ.get("EVALFLOW_GATEWAY_URL", "http://127.0.0.1:8470"),
                   help="the gateway's root URL (EVALFLOW_GATEWAY_URL)")
    p.add_argument("--model", default="policy")
    p.add_argument("--question", default="What is 2 + 3?")
    p.add_argument("--max-turns", type=int, default=4)
    p.add_argument("--max-seq-len", type=int, default=4096)
    p.add_argument("--agent-key", help="the agent's API key, to try a wrong one (default: the gateway token)")
    args = p.parse_args()
    token = os.environ.get("EVALFLOW_GATEWAY_TOKEN")
    if not token:
        sys.exit("EVALFLOW_GATEWAY_TOKEN is not set: export the worker's --interception.gateway-token")

    env = GatewayEnv(args.gateway, token, args.model,
                     sampling_params={"temperature": 1.0, "max_tokens": 512, "logprobs": True},
                     max_turns=args.max_turns, max_seq_len=args.max_seq_len)
    if args.agent_key is not None:
        env.environment_vars["OPENAI_API_KEY"] = args.agent_key
    os.environ["AGENT_QUESTION"] = args.question
    state = env.rollout([sys.executable, os.path.abspath(__file__), "agent"])
    print(json.dumps(summarize(state)))
    sys.exit(0 if state["error"] is None else 1)


if __name__ == "__main__":
    main()
