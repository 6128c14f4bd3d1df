package activities

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/interception/sidecar"
)

// shareTask gives the rollout's tool servers and user its task at
// {base}/task: the task as its agent sees it (tasksets.Task.ForHarness),
// never the reference answer, which the agent could read there too.
func (a *Activities) shareTask(j job, reg *interception.Registration) {
	b, err := json.Marshal(j.task.ForHarness())
	if err != nil {
		a.logger().Warn("could not share a task with its tool servers", "key", j.key, "error", err)
		return
	}
	reg.SetTask(b)
}

// sideOf is what a rollout's tool servers and user left on its
// registration: the shared state and the user's turns, kept in its trace,
// with the rollout's secret blanked out of them as out of the harness's
// output. Read before the registration is released.
func (a *Activities) sideOf(reg *interception.Registration) sidecar.Side {
	s, _ := reg.Side()
	secret := reg.Secret
	if secret == "" {
		return s
	}
	// The secret is hex: blanking it keeps the state valid JSON.
	s.State = bytes.ReplaceAll(s.State, []byte(secret), []byte("[rollout secret]"))
	for i := range s.Users {
		s.Users[i].Content = strings.ReplaceAll(s.Users[i].Content, secret, "[rollout secret]")
	}
	return s
}
