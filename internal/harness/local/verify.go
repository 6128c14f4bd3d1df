package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/evalflow/evalflow/harness"
)

// Verify runs the verifier as a local subprocess with cwd = the workspace
// and EVALFLOW_TESTS, EVALFLOW_WORKSPACE, EVALFLOW_LOGS and
// EVALFLOW_VERIFIER_LOGS (= Logs/verifier) set. It does not isolate: paths
// are the host's, and a /tests path in the command (Harbor's "bash
// /tests/test.sh") is rewritten to the tests directory.
func (l *Runtime) Verify(ctx context.Context, spec harness.VerifySpec) (harness.VerifyResult, error) {
	return l.verify(ctx, spec, func(argv []string) []string { return argv })
}

// verify is Verify with the verifier's command line passed through wrap.
func (l *Runtime) verify(ctx context.Context, spec harness.VerifySpec, wrap func([]string) []string) (harness.VerifyResult, error) {
	ws, err := checkVerifySpec(spec)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	logs, err := harness.ResetVerifierLogs(ws)
	if err != nil {
		return harness.VerifyResult{}, err
	}
	env := harness.VerifierEnv(os.Environ(), spec, harness.VerifierPaths{
		Tests: spec.Tests, Workspace: ws.Dir, Logs: ws.Logs, VerifierLogs: logs,
	})
	res, err := l.exec(ctx, proc{
		argv: wrap([]string{"sh", "-c", hostTests(spec.Command, spec.Tests)}), dir: ws.HostWorkdir(), env: env,
		timeout: spec.Timeout, outputLimit: spec.OutputLimit,
	})
	if err != nil {
		return harness.VerifyResult{}, fmt.Errorf("run verifier: %w", err)
	}
	return harness.Verdict(res, spec.Timeout, logs)
}

// testsPath matches /tests as a path of its own in a shell command.
var testsPath = regexp.MustCompile(`(^|[\s'"=:])/tests(/|$|[\s'";|&)])`)

// hostTests rewrites the paths under /tests in command to dir.
func hostTests(command, dir string) string {
	if dir == "" {
		return command
	}
	return testsPath.ReplaceAllStringFunc(command, func(m string) string {
		i := strings.Index(m, "/tests")
		return m[:i] + dir + m[i+len("/tests"):]
	})
}

func checkVerifySpec(spec harness.VerifySpec) (*harness.Workspace, error) {
	switch {
	case spec.Workspace == nil:
		return nil, errors.New("verify: no workspace")
	case spec.Command == "":
		return nil, errors.New("verify: no command")
	}
	return spec.Workspace, nil
}
