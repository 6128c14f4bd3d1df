#!/usr/bin/env python3
"""A GRPO-shaped trainer loop on evalflow's HTTP pull API, standard library only.

It trains nothing (there are no weights here): it does what a trainer does
around its optimizer step, against a real pull run, and checks what it gets.

    export EVALFLOW_PULL_TOKEN=$(openssl rand -hex 16)
    starter train --pull --run-id rl-1 --trace-tokens --pull-addr 127.0.0.1:8790 &
    python3 examples/grpo_trainer.py --run-id rl-1 --steps 3 --groups 2 --n 4

Each step: sample tasks, run a group of rollouts of each (asking for the
interleaved view and a staleness bound), check every training sample's
masks and the exact-prefix flag, compute group-relative advantages
((reward - mean) / std), form the policy-gradient surrogate a learner would
minimize, then announce the next policy version, as a trainer does once its
new weights are loaded into the inference server. At the end it asks again
for a group generated on the first version: with --on-stale rerun evalflow
runs it again on the current policy, with --on-stale mark it comes back
marked stale. The last line printed is a JSON summary.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pull_http import PullClient  # noqa: E402  (the same directory)


class CheckError(Exception):
    """What the trainer got is not what it can learn from."""


def check_samples(rollout, traj, samples):
    """Checks one rollout's samples against its trajectory; returns the
    number of tokens a learner trains on (mask 1)."""
    steps = traj["steps"]
    sampled = sum(len(s["tokens"]["completion_ids"]) for s in steps if s["tokens"])
    trained = 0
    for s in samples:
        n = len(s["completion_ids"])
        if len(s["completion_mask"]) != n or len(s["completion_logprobs"]) != n:
            raise CheckError(f"{rollout['key']}: completion ids, mask and logprobs differ in length")
        if len(s["prompt_mask"]) != len(s["prompt_ids"]) or any(s["prompt_mask"]):
            raise CheckError(f"{rollout['key']}: the prompt is not masked out")
        if any(m not in (0, 1) for m in s["completion_mask"]):
            raise CheckError(f"{rollout['key']}: a mask holds something other than 0 and 1")
        if any(lp != 0 for lp, m in zip(s["completion_logprobs"], s["completion_mask"]) if m == 0):
            raise CheckError(f"{rollout['key']}: a masked token has a log probability")
        trained += sum(s["completion_mask"])
    if trained != sampled:
        raise CheckError(f"{rollout['key']}: mask 1 on {trained} tokens, the policy sampled {sampled}")
    # The exact-prefix flag: one sample when every step extends the one
    # before, else a new sample at each break.
    want = 1 if traj["interleavable"] else len(traj["prefix_breaks"]) + 1
    if len(samples) != want:
        raise CheckError(f"{rollout['key']}: {len(samples)} interleaved samples, want {want}")
    for i, step in enumerate(steps[1:], start=1):
        if step["extends_previous"] != (i not in traj["prefix_breaks"]):
            raise CheckError(f"{rollout['key']}: step {i}'s extends_previous disagrees with prefix_breaks")
    return trained


def advantages(rewards):
    """GRPO's group-relative advantages: (r - mean) / (std + eps)."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + 1e-6) for r in rewards]


def surrogate(samples_by_k, advs):
    """The policy-gradient surrogate -A * mean(logprob over trained tokens),
    averaged over samples: the number a learner would differentiate."""
    terms = []
    for samples, a in zip(samples_by_k, advs):
        for s in samples:
            lps = [lp for lp, m in zip(s["completion_logprobs"], s["completion_mask"]) if m]
            if lps:
                terms.append(-a * sum(lps) / len(lps))
    return sum(terms) / len(terms) if terms else 0.0


def run_group(pull, position, n, args):
    return pull.call("run_group", {"position": position, "n": n, "view": "interleaved",
                                   "max_off_policy_steps": args.max_off_policy_steps,
                                   "on_stale": args.on_stale})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("EVALFLOW_PULL_URL", "http://127.0.0.1:8790"))
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps")
    ap.add_argument("--groups", type=int, default=2, help="groups (tasks) per step")
    ap.add_argument("--n", type=int, default=4, help="rollouts per group")
    ap.add_argument("--max-off-policy-steps", type=int, default=0,
                    help="how many versions behind a rollout's oldest turn may be")
    ap.add_argument("--on-stale", choices=["rerun", "mark"], default="rerun")
    args = ap.parse_args()
    token = os.environ.get("EVALFLOW_PULL_TOKEN")
    if not token:
        sys.exit("set EVALFLOW_PULL_TOKEN")

    pull = PullClient(args.url, args.run_id, token)
    # The weights the inference server holds now: version 0 unless the run
    # already has one. Rollouts scheduled from here on record it.
    version = pull.call("policy", {"version": pull.progress().get("policy_version") or 0})["version"]
    first_position = None
    summary = {"steps": [], "groups": 0, "samples": 0, "trained_tokens": 0, "interleavable": 0, "rollouts": 0,
               "trajectory_steps": 0, "token_in_steps": 0}
    for step in range(args.steps):
        losses, versions, step_advs = [], set(), []
        for _ in range(args.groups):
            ref = pull.sample()
            if first_position is None:
                first_position = ref["position"]
            group = run_group(pull, ref["position"], args.n, args)
            rollouts, trajs, samples = group["rollouts"], group["trajectories"], group["samples"]
            for ro, traj, ss in zip(rollouts, trajs, samples):
                summary["trained_tokens"] += check_samples(ro, traj, ss)
                summary["samples"] += len(ss)
                summary["interleavable"] += traj["interleavable"]
                summary["rollouts"] += 1
                summary["trajectory_steps"] += len(traj["steps"])
                summary["token_in_steps"] += sum(1 for st in traj["steps"] if st.get("token_in"))
                versions.add(ro.get("policy_version"))
                if ro.get("stale"):
                    raise CheckError(f"{ro['key']}: stale rollout in a fresh group")
            advs = advantages([ro["reward"] for ro in rollouts])
            summary["groups"] += 1
            step_advs.append([round(a, 6) for a in advs])
            losses.append(surrogate(samples, advs))
        # The new weights are loaded: work generated from now on is on them.
        version = pull.call("policy", {"version": version + 1})["version"]
        summary["steps"].append({"step": step, "loss": round(sum(losses) / len(losses), 6),
                                 "generated_on": sorted(v for v in versions if v is not None),
                                 "advantages": step_advs, "now": version})
        print(f"step {step}: loss {summary['steps'][-1]['loss']}, rollouts generated on "
              f"{summary['steps'][-1]['generated_on']}, policy now {version}")

    # A group generated on the first version, asked for again: it is
    # args.steps versions behind.
    again = run_group(pull, first_position, args.n, args)
    stale = [ro for ro in again["rollouts"] if ro.get("stale")]
    fresh = [ro for ro in again["rollouts"] if ro.get("policy_version") == version]
    summary["old_group"] = {"position": first_position, "on_stale": args.on_stale,
                            "marked_stale": len(stale), "on_current_policy": len(fresh),
                            "off_policy_steps": [ro.get("off_policy_steps") for ro in again["rollouts"]]}
    if args.on_stale == "rerun" and len(fresh) != args.n:
        raise CheckError(f"rerun asked: {len(fresh)} of {args.n} rollouts are on policy {version}")
    if args.on_stale == "mark" and len(stale) != args.n:
        raise CheckError(f"mark asked: {len(stale)} of {args.n} rollouts are marked stale")
    summary["policy_version"] = version
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
