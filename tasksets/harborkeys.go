package tasksets

import "fmt"

// unhonouredEnvironment lists the keys of a task.toml's [environment] that
// Harbor defines and evalflow does not carry out, each with why. A key
// here is named in a warning on every task that sets it; refusedEnvironment
// lists those a task cannot run without.
var unhonouredEnvironment = map[string]string{
	"storage_mb": "no runtime here limits a sandbox's disk",
	"storage":    "no runtime here limits a sandbox's disk",
	"memory":     "the memory limit is read from memory_mb only",
	"skills_dir": "no harness here is given the task's skills",
}

// refusedEnvironment lists the keys of [environment] whose requirement no
// runtime here can meet: a task that sets one is refused, naming the key.
var refusedEnvironment = map[string]string{
	"gpu_types": "no runtime here gives a sandbox a GPU, of any type",
}

// checkHarborKeys refuses a task whose [environment] asks for what no
// runtime here can give, and adds to t's warnings each key of Harbor's
// that evalflow leaves undone.
func checkHarborKeys(doc map[string]any, t *Task) error {
	env, ok := doc["environment"].(map[string]any)
	if !ok {
		return nil
	}
	for _, k := range sortedKeys(env) {
		if why, ok := refusedEnvironment[k]; ok && !empty(env[k]) {
			return fmt.Errorf("[environment] %s = %v cannot be met: %s", k, env[k], why)
		}
		if why, ok := unhonouredEnvironment[k]; ok {
			t.Warnings = append(t.Warnings, fmt.Sprintf("[environment] %s is not honoured: %s", k, why))
		}
	}
	return nil
}

// empty reports whether a TOML value asks for nothing: an empty list or
// string.
func empty(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case string:
		return x == ""
	}
	return false
}
