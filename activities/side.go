package activities

import (
	"encoding/json"

	"github.com/evalflow/evalflow/interception"
)

// shareTask gives the rollout's tool servers and user its task at
// {base}/task: the task as its agent sees it (tasksets.Task.ForHarness),
// never the reference answer, which the agent could read there too.
func (a *Activities) shareTask(j job) {
	b, err := json.Marshal(j.task.ForHarness())
	if err != nil {
		a.logger().Warn("could not share a task with its tool servers", "key", j.key, "error", err)
		return
	}
	a.Pool.SetTask(j.key, b)
}

// sideOf is what a rollout's tool servers and user left on its slot: the
// shared state and the user's turns, kept in its trace. Read before the
// slot is released.
func (a *Activities) sideOf(key string) interception.Side {
	s, _ := a.Pool.Side(key)
	return s
}
