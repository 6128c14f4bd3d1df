package container

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/evalflow/evalflow/harness"
)

// Labels every sandbox carries.
const (
	labelSandbox  = "evalflow.sandbox"
	labelRun      = "evalflow.run"
	labelRollout  = "evalflow.rollout"
	labelAttempt  = "evalflow.attempt"
	labelWorker   = "evalflow.worker"
	labelHost     = "evalflow.host"
	labelPID      = "evalflow.pid"
	labelPIDStart = "evalflow.pid-start"
)

// LabelRun is the label naming a sandbox's run, for finding a run's
// sandboxes on the engine.
const LabelRun = labelRun

// owner is the worker process that owns a sandbox: its host, its pid and
// the pid's start time (a pid reused by another process is not the owner).
type owner struct {
	host, pid, start string
}

func self() owner {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return owner{host: host, pid: strconv.Itoa(pid), start: processStart(pid)}
}

// processStart is the start time of process pid in clock ticks since boot
// (/proc/PID/stat's 22nd field), "" when unknown.
func processStart(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name may hold spaces; the fields after it do not.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// alive reports whether o is a running process of this host.
func (o owner) alive() bool {
	pid, err := strconv.Atoi(o.pid)
	if err != nil || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	return o.start == "" || processStart(pid) == o.start
}

// owner is this worker process, as its sandboxes' labels name it.
func (r *Runtime) owner() owner {
	r.hostOnce.Do(func() { r.host = self() })
	return r.host
}

// Kinds of container (labelSandbox): an attempt's sandbox, where the
// agent works, and its verifier's, which joins the sandbox's network and
// so goes first when both are removed; a multi-container task's services
// (kindService) go after the sandbox, and their network (kindNetwork)
// last.
const (
	kindRollout  = "rollout"
	kindVerifier = "verifier"
)

// labels are the labels of a rollout attempt's container of kind.
func (r *Runtime) labels(spec harness.Spec, kind string) map[string]string {
	o := r.owner()
	run, _, _ := strings.Cut(spec.Key, "/")
	return map[string]string{
		labelSandbox: kind, labelRun: run, labelRollout: spec.Key, labelAttempt: strconv.Itoa(spec.Attempt),
		labelWorker: r.Worker, labelHost: o.host, labelPID: o.pid, labelPIDStart: o.start,
	}
}

// RemoveOrphans removes the sandboxes that a worker of this host which no
// longer runs left behind (killed before it could remove them), and
// returns how many.
func (r *Runtime) RemoveOrphans(ctx context.Context) (int, error) {
	n := 0
	for _, kind := range []string{kindVerifier, kindRollout, kindService} {
		list, err := r.Engine.ListContainers(ctx, labelSandbox+"="+kind, labelHost+"="+r.owner().host)
		if err != nil {
			return n, fmt.Errorf("list sandboxes: %w", err)
		}
		for _, c := range list {
			o := owner{host: c.Labels[labelHost], pid: c.Labels[labelPID], start: c.Labels[labelPIDStart]}
			if o.alive() {
				continue
			}
			if err := r.Engine.RemoveContainer(ctx, c.ID); err != nil {
				return n, fmt.Errorf("remove orphaned sandbox %s: %w", c.ID, err)
			}
			if kind == kindRollout {
				n++
			}
		}
	}
	if err := r.removeNetworks(ctx, owner.alive, labelHost+"="+r.owner().host); err != nil {
		return n, err
	}
	return n, r.removeOrphanedSnapshots(ctx)
}

// removeNetworks removes the rollouts' networks that carry the labels
// given, but those whose owner keep keeps (nil: none).
func (r *Runtime) removeNetworks(ctx context.Context, keep func(owner) bool, labels ...string) error {
	list, err := r.Engine.ListNetworks(ctx, append([]string{labelSandbox + "=" + kindNetwork}, labels...)...)
	if err != nil {
		return fmt.Errorf("list the rollouts' networks: %w", err)
	}
	for _, n := range list {
		o := owner{host: n.Labels[labelHost], pid: n.Labels[labelPID], start: n.Labels[labelPIDStart]}
		if keep != nil && keep(o) {
			continue
		}
		if err := r.Engine.RemoveNetwork(ctx, n.ID); err != nil {
			return fmt.Errorf("remove the rollout's network %s: %w", n.Name, err)
		}
	}
	return nil
}

// Close removes the sandboxes this worker process still has: a worker
// that stops leaves none.
func (r *Runtime) Close(ctx context.Context) error {
	o := r.owner()
	for _, kind := range []string{kindVerifier, kindRollout, kindService} {
		list, err := r.Engine.ListContainers(ctx, labelSandbox+"="+kind, labelHost+"="+o.host, labelPID+"="+o.pid)
		if err != nil {
			return fmt.Errorf("list sandboxes: %w", err)
		}
		for _, c := range list {
			if err := r.Engine.RemoveContainer(ctx, c.ID); err != nil {
				return fmt.Errorf("remove sandbox %s: %w", c.ID, err)
			}
		}
	}
	if err := r.removeNetworks(ctx, nil, labelHost+"="+o.host, labelPID+"="+o.pid); err != nil {
		return err
	}
	return r.removeOrphanedSnapshots(ctx)
}
