#!/usr/bin/env python3
"""Pull work from an evalflow pull run over HTTP, with the standard library only.

Start a pull run and its API, then run this:

    export EVALFLOW_PULL_TOKEN=$(openssl rand -hex 16)
    starter train --pull --run-id rl-1 --pull-addr 127.0.0.1:8790 &
    python3 examples/pull_http.py --run-id rl-1 --groups 2 --n 4

Each group: sample a task position, run a group of rollouts of it, and read
the rewards and group advantages a trainer would learn from. The last line
printed is a JSON summary.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request


class PullError(Exception):
    """A call the pull API answered with an error."""

    def __init__(self, status, kind, message):
        super().__init__(f"{status} {kind}: {message}")
        self.status, self.kind, self.message = status, kind, message


class PullClient:
    """The pull API of one run: sample, run_rollout, run_group, progress, close."""

    def __init__(self, base_url, run_id, token, timeout=3600):
        self.base = f"{base_url.rstrip('/')}/v1/pull/{run_id}/"
        self.token = token
        self.timeout = timeout

    def call(self, action, body=None, method="POST", retries=5):
        data = None if method == "GET" else json.dumps(body or {}).encode()
        req = urllib.request.Request(self.base + action, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            err = json.load(e).get("error", {})
            if e.code == 503 and retries > 0:
                # Temporal is unreachable for now: wait as told, then retry.
                time.sleep(int(e.headers.get("Retry-After", "5")))
                return self.call(action, body, method, retries - 1)
            raise PullError(e.code, err.get("type"), err.get("message")) from None

    def sample(self):
        return self.call("sample")

    def run_rollout(self, position):
        return self.call("run_rollout", {"position": position})

    def run_group(self, position, n):
        return self.call("run_group", {"position": position, "n": n})

    def progress(self):
        return self.call("progress", method="GET")

    def close(self):
        return self.call("close")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("EVALFLOW_PULL_URL", "http://127.0.0.1:8790"))
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--groups", type=int, default=1, help="groups to sample and run")
    ap.add_argument("--n", type=int, default=4, help="rollouts per group")
    args = ap.parse_args()
    token = os.environ.get("EVALFLOW_PULL_TOKEN")
    if not token:
        sys.exit("set EVALFLOW_PULL_TOKEN")

    pull = PullClient(args.url, args.run_id, token)
    groups = []
    for _ in range(args.groups):
        ref = pull.sample()
        res = pull.run_group(ref["position"], args.n)
        rewards = [r["reward"] for r in res["rollouts"]]
        print(f"task {ref['index']} (epoch {ref['epoch']}, position {ref['position']}): "
              f"rewards {rewards}, advantages {res['group']['advantages']}")
        groups.append({"position": ref["position"], "rewards": rewards,
                       "advantages": res["group"]["advantages"]})
    progress = pull.progress()
    print(json.dumps({"groups": groups, "progress": progress}))


if __name__ == "__main__":
    main()
