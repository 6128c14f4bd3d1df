package sidecar

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/evalflow/evalflow/trace"
)

// StateLimit bounds a rollout's shared state, in bytes of JSON.
const StateLimit = 1 << 20

// State is what a rollout shares with the programs beside its harness:
// the state at /state, the task at /task, and the user's turns posted to
// /user. The proxy keeps one with each rollout it serves; the zero value
// is a rollout with nothing shared yet.
type State struct {
	mu    sync.Mutex
	state json.RawMessage // a JSON object; nil is {}
	task  json.RawMessage // the task as the agent may see it; nil until set
	users []trace.UserTurn
}

// Side is what a rollout's tool servers and user left: the final shared
// state and the user's turns.
type Side struct {
	// State is the rollout's /state at the end, a JSON object; nil when
	// nothing was ever written.
	State json.RawMessage
	// Users are the simulated user's turns, in order.
	Users []trace.UserTurn
}

// SetTask sets what /task answers: the task as the rollout's agent may
// see it (tasksets.Task.ForHarness), never its answer, tests or solution.
func (s *State) SetTask(task json.RawMessage) {
	s.mu.Lock()
	s.task = bytes.Clone(task)
	s.mu.Unlock()
}

// Side returns a copy of what the rollout's tool servers and user left.
func (s *State) Side() Side {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Side{State: bytes.Clone(s.state), Users: append([]trace.UserTurn(nil), s.users...)}
}

// read returns the state, the task and how many user turns there are.
func (s *State) read() (state, task json.RawMessage, users int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.task, len(s.users)
}

// mergePatch applies an RFC 7386 merge patch to an object.
func mergePatch(target, patch map[string]json.RawMessage) map[string]json.RawMessage {
	if target == nil {
		target = map[string]json.RawMessage{}
	}
	for k, v := range patch {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(target, k)
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) == nil && sub != nil {
			var cur map[string]json.RawMessage
			if old, ok := target[k]; !ok || json.Unmarshal(old, &cur) != nil {
				cur = nil
			}
			merged, _ := json.Marshal(mergePatch(cur, sub))
			target[k] = merged
			continue
		}
		target[k] = v
	}
	return target
}
