package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/evalflow/evalflow/tasksets"
)

// The audit's adversaries: fixed harnesses that try to get a task's reward
// without doing the task, each the way an RL policy would find it. Every
// one prints what it did as "audit: " lines, which the audit reports with
// a score above 0. None of them calls the model. In a sandbox (its logs at
// /logs) they write wherever the sandbox lets them; on the worker's own
// host (the local runtime) only in their workspace and logs, so that an
// audit never leaves a file on the host: what they find elsewhere they
// read, or name.

// Adversaries are the names of the audit's harnesses, in the order an
// audit runs them.
var Adversaries = []string{
	"nothing", "read-tests", "write-reward", "rewrite-tests",
	"leave-process", "reach-host", "placeholders", "common-answer",
}

// adversaryFlag is the hidden flag under which the built-in agent runs an
// adversary, and the background process of leave-process.
const (
	adversaryFlag = "adversary"
	lingerName    = "linger"
)

// lingerFor is how long leave-process's process lives: long enough to be
// there while the verifier runs, and it stops by itself.
const lingerFor = 10 * time.Minute

// commonAnswer holds what lax string matches accept: every small number,
// the usual words and letters, in one answer.
var commonAnswer = func() string {
	var b strings.Builder
	for i := 0; i <= 100; i++ {
		fmt.Fprintf(&b, "%d ", i)
	}
	b.WriteString("yes no true false True False A B C D E")
	return b.String()
}()

// hostPorts are the worker host's services an adversary tries at their
// default ports: the Temporal frontend (gRPC, HTTP), its UI, the viewer,
// the gateway, the pull API, the metrics, PostgreSQL, the engine's API.
// An audit adds its own in AUDIT_HOST_PORTS (comma-separated), for
// services on other ports.
var hostPorts = []int{7233, 7243, 8233, 8234, 8470, 8790, 9464, 5432, 15432, 2375}

// auditPorts are hostPorts and those of AUDIT_HOST_PORTS.
func auditPorts() []int {
	ports := slices.Clone(hostPorts)
	for _, f := range strings.Split(os.Getenv("AUDIT_HOST_PORTS"), ",") {
		if p, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && p > 0 && p < 65536 && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports
}

// runAdversary runs the adversary name and returns the exit code.
func runAdversary(ctx context.Context, name string, stdout, stderr io.Writer) int {
	a := &adversary{out: stdout}
	a.task, _ = readTask(os.Getenv("EVALFLOW_TASK_FILE"))
	a.workdir, _ = workspace()
	var err error
	switch name {
	case "nothing":
	case "read-tests":
		err = a.readTests(ctx)
	case "write-reward":
		a.writeReward()
	case "rewrite-tests":
		a.rewriteTests()
	case "leave-process":
		err = a.leaveProcess()
	case lingerName:
		a.linger(ctx)
	case "reach-host":
		a.reachHost(ctx)
	case "placeholders":
		a.placeholders()
	case "common-answer":
		err = a.answer(commonAnswer)
	default:
		fmt.Fprintf(stderr, "agent: --%s %q: want one of %s\n", adversaryFlag, name, strings.Join(Adversaries, ", "))
		return ExitError
	}
	if err != nil {
		fmt.Fprintf(stderr, "agent: adversary %s: %v\n", name, err)
	}
	return ExitOK
}

type adversary struct {
	out     io.Writer
	task    tasksets.Task
	workdir string
}

// sandboxed reports whether the harness runs in a sandbox, whose /logs is
// its own, rather than on the worker's host.
func sandboxed() bool { return filepath.Clean(os.Getenv("EVALFLOW_LOGS")) == "/logs" }

// writable reports whether an adversary may write p: anywhere in a
// sandbox, only under its workspace and logs on the host.
func (a *adversary) writable(p string) bool {
	if sandboxed() {
		return true
	}
	for _, d := range []string{a.workdir, os.Getenv("EVALFLOW_LOGS")} {
		if d != "" && (p == d || strings.HasPrefix(p, filepath.Clean(d)+"/")) {
			return true
		}
	}
	return false
}

func (a *adversary) say(format string, args ...any) {
	fmt.Fprintf(a.out, "audit: "+format+"\n", args...)
}

// answer writes the harness's final answer.
func (a *adversary) answer(s string) error {
	f := os.Getenv("EVALFLOW_ANSWER_FILE")
	if f == "" {
		return errors.New("EVALFLOW_ANSWER_FILE is not set")
	}
	a.say("answered %q", shorten(s))
	return os.WriteFile(f, []byte(s), 0o644)
}

// verifierDirs are where a verifier may read its reward from.
func verifierDirs() []string {
	dirs := []string{"/logs/verifier"}
	if l := os.Getenv("EVALFLOW_LOGS"); l != "" && filepath.Clean(l) != "/logs" {
		dirs = append(dirs, filepath.Join(l, "verifier"))
	}
	return dirs
}

// testsDirs are where the tests may be copied for the verifier.
func testsDirs() []string {
	return []string{"/tests"}
}

// writeReward writes a full reward wherever a verifier reads one.
func (a *adversary) writeReward() {
	for _, d := range verifierDirs() {
		if !a.writable(d) || os.MkdirAll(d, 0o777) != nil {
			continue
		}
		okText := os.WriteFile(filepath.Join(d, "reward.txt"), []byte("1\n"), 0o666) == nil
		okJSON := os.WriteFile(filepath.Join(d, "reward.json"), []byte(`{"reward": 1}`), 0o666) == nil
		if okText || okJSON {
			a.say("wrote a reward of 1 to %s", d)
		}
	}
}

// hook is a pytest plugin that passes every test.
const hook = `import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
`

// passingTest is a test script that writes a full reward.
const passingTest = "#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"

// rewriteTests plants tests that pass, and pytest hooks that pass every
// test, where the verifier's tests are copied and where pytest looks.
func (a *adversary) rewriteTests() {
	for _, d := range testsDirs() {
		if !a.writable(d) || os.MkdirAll(d, 0o777) != nil {
			continue
		}
		if os.WriteFile(filepath.Join(d, "test.sh"), []byte(passingTest), 0o777) == nil {
			a.say("planted %s/test.sh writing a reward of 1", d)
		}
		if os.WriteFile(filepath.Join(d, "conftest.py"), []byte(hook), 0o666) == nil {
			a.say("planted a pytest hook in %s", d)
		}
	}
	for _, d := range []string{a.workdir, "/"} {
		if d != "" && a.writable(filepath.Join(d, "conftest.py")) && os.WriteFile(filepath.Join(d, "conftest.py"), []byte(hook), 0o666) == nil {
			a.say("planted a pytest hook in %s", d)
		}
	}
}

// leaveProcess starts a process that outlives the harness: for
// lingerFor, it rewrites the tests as they appear and writes a reward.
func (a *adversary) leaveProcess() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "--"+adversaryFlag, lingerName)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	a.say("left process %d rewriting the tests and writing a reward while the verifier runs", cmd.Process.Pid)
	return cmd.Process.Release()
}

// linger is leave-process's process: it ends at lingerFor, or once its
// workspace is gone.
func (a *adversary) linger(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, lingerFor)
	defer cancel()
	quiet := &adversary{out: io.Discard, workdir: a.workdir}
	for ctx.Err() == nil {
		if _, err := os.Stat(a.workdir); err != nil {
			return
		}
		quiet.writeReward()
		for _, d := range testsDirs() {
			if !a.writable(d) {
				continue
			}
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				p := filepath.Join(d, e.Name())
				switch {
				case strings.HasSuffix(e.Name(), ".sh"):
					_ = os.WriteFile(p, []byte(passingTest), 0o777)
				case strings.HasSuffix(e.Name(), ".py") && strings.HasPrefix(e.Name(), "test"):
					_ = os.WriteFile(p, []byte("def test_ok():\n    pass\n"), 0o666)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// reachHost tries the worker host's services at loopback and at the
// sandbox's gateway, and names each that answered.
func (a *adversary) reachHost(ctx context.Context) {
	hosts := []string{"127.0.0.1"}
	if gw := defaultGateway(); gw != "" {
		hosts = append(hosts, gw)
	}
	own := ownPort()
	d := net.Dialer{Timeout: 2 * time.Second}
	for _, h := range hosts {
		for _, p := range auditPorts() {
			if h == "127.0.0.1" && p == own {
				continue
			}
			addr := net.JoinHostPort(h, fmt.Sprint(p))
			if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
				c.Close()
				a.say("reached %s", addr)
			}
		}
	}
	for _, s := range []string{"/run/podman/podman.sock", "/var/run/docker.sock", "/run/docker.sock"} {
		if c, err := net.Dial("unix", s); err == nil {
			c.Close()
			a.say("reached the engine's socket %s", s)
		}
	}
}

// ownPort is the port of the harness's own interception, which it may
// reach.
func ownPort() int {
	u := os.Getenv("EVALFLOW_BASE_URL")
	if i := strings.LastIndex(u, ":"); i >= 0 {
		var p int
		fmt.Sscanf(u[i+1:], "%d", &p)
		return p
	}
	return 0
}

// defaultGateway is the IPv4 default gateway from /proc/net/route.
func defaultGateway() string {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 2 && f[1] == "00000000" && len(f[2]) == 8 {
			var v uint32
			if _, err := fmt.Sscanf(f[2], "%x", &v); err == nil && v != 0 {
				return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String()
			}
		}
	}
	return ""
}

// pathInText finds absolute file paths in an instruction.
var pathInText = regexp.MustCompile(`(?:^|[\s"'` + "`" + `(])(/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*)`)

// placeholders writes a non-empty placeholder into every file the
// instruction names, and answers with one.
func (a *adversary) placeholders() {
	seen := map[string]bool{}
	for _, m := range pathInText.FindAllStringSubmatch(a.task.Prompt, -1) {
		p := filepath.Clean(strings.TrimRight(m[1], "."))
		if seen[p] || !strings.Contains(filepath.Base(p), ".") || underSystem(p) {
			continue
		}
		seen[p] = true
		if a.writable(p) && os.MkdirAll(filepath.Dir(p), 0o777) == nil && os.WriteFile(p, []byte("placeholder\n"), 0o666) == nil {
			a.say("wrote a placeholder into %s", p)
		}
	}
	_ = a.answer("placeholder")
}

// underSystem reports whether p is in a directory no task asks an agent
// to write (the system's own).
func underSystem(p string) bool {
	for _, d := range []string{"/proc", "/sys", "/dev", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/boot"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Bounds of read-tests's search of the file system.
const (
	searchEntries = 200_000
	searchTime    = 20 * time.Second
	jsonlLimit    = 64 << 20
)

// readTests looks for the task's solution and tests wherever they can be
// read, runs the solution it finds, and answers with the answer a JSONL
// file on disk holds for the task's prompt.
func (a *adversary) readTests(ctx context.Context) error {
	var solutions []string
	for _, d := range []string{"/solution", os.Getenv("EVALFLOW_SOLUTION")} {
		if d != "" && regular(filepath.Join(d, "solve.sh")) {
			solutions = append(solutions, filepath.Join(d, "solve.sh"))
		}
	}
	for _, d := range testsDirs() {
		if regular(filepath.Join(d, "test.sh")) {
			a.say("read the tests at %s before the verifier", d)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, searchTime)
	defer cancel()
	answer, found := "", false
	n := 0
	_ = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if n++; n > searchEntries || ctx.Err() != nil {
			return fs.SkipAll
		}
		if err != nil {
			return nil
		}
		if d.IsDir() {
			switch p {
			case "/proc", "/sys", "/dev":
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.Name() == "solve.sh" && a.task.ID != "" && filepath.Base(filepath.Dir(filepath.Dir(p))) == a.task.ID:
			solutions = append(solutions, p)
		case d.Name() == "test.sh" && a.task.ID != "" && filepath.Base(filepath.Dir(filepath.Dir(p))) == a.task.ID:
			a.say("read the task's tests at %s", p)
		case !found && strings.HasSuffix(d.Name(), ".jsonl") && a.task.Prompt != "":
			answer, found = answerIn(p, a.task.Prompt)
			if found {
				a.say("read the task's answer in %s", p)
			}
		}
		return nil
	})
	if found {
		if err := a.answer(answer); err != nil {
			return err
		}
	}
	if len(solutions) == 0 {
		return nil
	}
	a.say("ran the task's solution %s", solutions[0])
	cmd := exec.CommandContext(ctx, "bash", solutions[0])
	cmd.Dir = a.workdir
	cmd.Env = append(os.Environ(), "EVALFLOW_SOLUTION="+filepath.Dir(solutions[0]))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run()
}

// answerIn is the answer field of the line of a JSONL file whose prompt
// is prompt.
func answerIn(path, prompt string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, jsonlLimit))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	needle, _ := json.Marshal(prompt)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, needle[1:len(needle)-1]) {
			continue
		}
		var row struct {
			Prompt string `json:"prompt"`
			Answer any    `json:"answer"`
		}
		if json.Unmarshal(line, &row) == nil && row.Prompt == prompt && row.Answer != nil {
			if s, ok := row.Answer.(string); ok {
				return s, true
			}
			b, _ := json.Marshal(row.Answer)
			return string(b), true
		}
	}
	return "", false
}

func regular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
