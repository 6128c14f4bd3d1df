package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/evalflow/evalflow/tasksets"
)

func readTask(path string) (tasksets.Task, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tasksets.Task{}, fmt.Errorf("read task: %w", err)
	}
	var t tasksets.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return tasksets.Task{}, fmt.Errorf("decode task %s: %w", path, err)
	}
	return t, nil
}

// message is an opening message of the conversation, in no dialect yet.
type message struct {
	role, content string
}

// conversation builds the opening messages: the system prompt (unless the
// task brings its own), the task's messages, then its prompt as a user
// message.
func conversation(system string, t tasksets.Task) ([]message, error) {
	if t.Prompt == "" && len(t.Messages) == 0 {
		return nil, errors.New("task has neither prompt nor messages")
	}
	var msgs []message
	ownSystem := len(t.Messages) > 0 && (t.Messages[0].Role == "system" || t.Messages[0].Role == "developer")
	if system != "" && !ownSystem {
		msgs = append(msgs, message{"system", system})
	}
	for i, m := range t.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant":
			msgs = append(msgs, message{m.Role, m.Content})
		default:
			return nil, fmt.Errorf("task message %d: unsupported role %q", i, m.Role)
		}
	}
	if t.Prompt != "" {
		msgs = append(msgs, message{"user", t.Prompt})
	}
	return msgs, nil
}
