// Package pullhttp serves the pull API over HTTP and JSON, so that a trainer
// in any language pulls work from a pull run the way the Go client (package
// pull) does, through the same Temporal updates and query:
//
//	POST /v1/pull/{run_id}/sample       {}                        → workflows.TaskRef
//	POST /v1/pull/{run_id}/run_rollout  {"position": p, "view"?}  → pull.Rollout (+ "samples")
//	POST /v1/pull/{run_id}/run_group    {"position": p, "n": n}   → pull.Group (+ "samples")
//	GET  /v1/pull/{run_id}/progress                               → workflows.PullProgress
//	POST /v1/pull/{run_id}/policy       {"version": v}            → workflows.PolicyResult
//	POST /v1/pull/{run_id}/close        {}                        → {"run_id", "closed"}
//
// run_group and run_rollout also take "max_off_policy_steps" and
// "on_stale" (workflows.RunGroupInput).
//
// Every request carries "Authorization: Bearer <token>". A call holds its
// request until the update finishes; a caller that goes away cancels the
// wait (the rollouts it started run on and are stored: calling again with
// the same position collects them). Errors are JSON,
// {"error": {"message", "type"}}, with the status saying what to do:
// 400 fix the request, 401 the token, 404 no such pull run, 409 the run is
// closed, has handed out all its positions, or is on a newer policy version
// than the one announced, 503 Temporal is unreachable
// (retry after Retry-After), 504 the call outlived the server's timeout.
package pullhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/trajectory"
	"github.com/evalflow/evalflow/workflows"
)

// Defaults of Config.
const (
	DefaultCallTimeout  = 30 * time.Minute
	DefaultReachTimeout = 5 * time.Second
)

// retryAfter is what a 503 asks the caller to wait, in seconds.
const retryAfter = 5

// maxBody bounds a request body: the API's bodies are a few numbers.
const maxBody = 64 << 10

// Config configures a Handler.
type Config struct {
	// Token is the bearer token every request must carry. It stays in the
	// serving process: no history, log line or answer holds it.
	Token string
	// CallTimeout bounds one call on the server side (run_group waits for
	// its rollouts); 0 is DefaultCallTimeout.
	CallTimeout time.Duration
	// ReachTimeout bounds the check that Temporal answers, made before each
	// call so that an unreachable server gets a quick 503; 0 is
	// DefaultReachTimeout.
	ReachTimeout time.Duration
	// Logger receives one line per failed call; nil discards.
	Logger *slog.Logger
	// Traces, when set, reads every rollout's trace from the run store for
	// run_group ("traces", by k) and run_rollout ("trace") answers; nil:
	// the answers carry summaries only.
	Traces pull.TraceReader
}

// Handler serves the pull API of every pull run in its client's namespace.
type Handler struct {
	temporal client.Client
	cfg      Config
	mux      *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// New returns the pull API over the Temporal client c.
func New(c client.Client, cfg Config) (*Handler, error) {
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("pull API: a token is required (EVALFLOW_PULL_TOKEN)")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ReachTimeout <= 0 {
		cfg.ReachTimeout = DefaultReachTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{temporal: c, cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("POST /v1/pull/{run_id}/sample", h.sample)
	h.mux.HandleFunc("POST /v1/pull/{run_id}/run_rollout", h.runRollout)
	h.mux.HandleFunc("POST /v1/pull/{run_id}/run_group", h.runGroup)
	h.mux.HandleFunc("GET /v1/pull/{run_id}/progress", h.progress)
	h.mux.HandleFunc("POST /v1/pull/{run_id}/policy", h.policy)
	h.mux.HandleFunc("POST /v1/pull/{run_id}/close", h.close)
	return h, nil
}

// ServeHTTP checks the token, then routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="evalflow pull"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong token: send Authorization: Bearer <EVALFLOW_PULL_TOKEN>")
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.notRouted(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// notRouted answers a request no route takes: a known action with the
// wrong method gets 405, anything else 404, both as JSON.
func (h *Handler) notRouted(w http.ResponseWriter, r *http.Request) {
	methods := map[string]string{"sample": http.MethodPost, "run_rollout": http.MethodPost,
		"run_group": http.MethodPost, "progress": http.MethodGet, "policy": http.MethodPost, "close": http.MethodPost}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/pull/")
	if ok {
		if i := strings.LastIndexByte(rest, '/'); i > 0 {
			if m, known := methods[rest[i+1:]]; known {
				w.Header().Set("Allow", m)
				writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
					fmt.Sprintf("%s takes %s, not %s", rest[i+1:], m, r.Method))
				return
			}
		}
	}
	writeError(w, http.StatusNotFound, "not_found",
		"no such route: the pull API is /v1/pull/{run_id}/ sample, run_rollout, run_group, progress, policy, close")
}

func (h *Handler) authorized(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return false
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(v[7:]))), sha256.Sum256([]byte(h.cfg.Token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func (h *Handler) sample(w http.ResponseWriter, r *http.Request) {
	if !decodeEmpty(w, r, "sample") {
		return
	}
	h.call(w, r, "sample", func(ctx context.Context, p *pull.Client) (any, error) {
		return p.Sample(ctx)
	})
}

// staleness is the staleness bound run_group and run_rollout take.
type staleness struct {
	MaxOffPolicySteps *int64 `json:"max_off_policy_steps"`
	OnStale           string `json:"on_stale"`
}

// check answers 400 when the bound is out of range.
func (s staleness) check(w http.ResponseWriter, action string) bool {
	switch {
	case s.MaxOffPolicySteps != nil && *s.MaxOffPolicySteps < 0:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf(
			"%s: field max_off_policy_steps = %d is negative (0 accepts only the current policy version; leave it out for no bound)", action, *s.MaxOffPolicySteps))
		return false
	case s.OnStale != "" && s.OnStale != workflows.OnStaleRerun && s.OnStale != workflows.OnStaleMark:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf(
			"%s: field on_stale = %q: want %q (run it again, the default) or %q (return it marked)", action, s.OnStale, workflows.OnStaleRerun, workflows.OnStaleMark))
		return false
	}
	return true
}

// options is the bound as the Go client's options.
func (s staleness) options() []pull.GroupOption {
	var opts []pull.GroupOption
	if s.MaxOffPolicySteps != nil {
		opts = append(opts, pull.MaxOffPolicySteps(*s.MaxOffPolicySteps))
	}
	if s.OnStale != "" {
		opts = append(opts, pull.OnStale(s.OnStale))
	}
	return opts
}

// rolloutRequest is run_rollout's body.
type rolloutRequest struct {
	Position *int64 `json:"position"`
	View     string `json:"view"`
	staleness
}

// rolloutAnswer is run_rollout's answer: the rollout, and its training
// samples as the request's view makes them, when the run traces tokens.
type rolloutAnswer struct {
	pull.Rollout
	Samples []trajectory.Sample `json:"samples,omitempty"`
}

func (h *Handler) runRollout(w http.ResponseWriter, r *http.Request) {
	var req rolloutRequest
	if !decode(w, r, "run_rollout", &req, "position", "view", "max_off_policy_steps", "on_stale") {
		return
	}
	if !checkPosition(w, "run_rollout", req.Position) || !checkView(w, "run_rollout", req.View) || !req.check(w, "run_rollout") {
		return
	}
	h.call(w, r, "run_rollout", func(ctx context.Context, p *pull.Client) (any, error) {
		ro, err := p.RunRollout(ctx, workflows.TaskRef{Position: *req.Position}, req.options()...)
		if err != nil || ro.Trajectory == nil {
			return ro, err
		}
		samples, err := ro.Trajectory.Samples(req.View)
		return rolloutAnswer{Rollout: ro, Samples: samples}, err
	})
}

// groupRequest is run_group's body.
type groupRequest struct {
	Position *int64 `json:"position"`
	N        *int   `json:"n"`
	View     string `json:"view"`
	staleness
}

// groupAnswer is run_group's answer: the group, and its training samples
// by k as the request's view makes them, when the run traces tokens.
type groupAnswer struct {
	pull.Group
	Samples [][]trajectory.Sample `json:"samples,omitempty"`
}

// checkView refuses a view the trajectory package does not make.
func checkView(w http.ResponseWriter, action, view string) bool {
	if _, err := (trajectory.Trajectory{}).Samples(view); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", action+": field "+err.Error())
		return false
	}
	return true
}

func (h *Handler) runGroup(w http.ResponseWriter, r *http.Request) {
	var req groupRequest
	if !decode(w, r, "run_group", &req, "position", "n", "view", "max_off_policy_steps", "on_stale") {
		return
	}
	if !checkPosition(w, "run_group", req.Position) || !checkView(w, "run_group", req.View) || !req.check(w, "run_group") {
		return
	}
	switch {
	case req.N == nil:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("run_group: field n is required (the group size, 1..%d)", workflows.MaxGroupSize))
		return
	case *req.N < 1 || *req.N > workflows.MaxGroupSize:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("run_group: field n = %d is outside 1..%d", *req.N, workflows.MaxGroupSize))
		return
	}
	h.call(w, r, "run_group", func(ctx context.Context, p *pull.Client) (any, error) {
		g, err := p.RunGroup(ctx, workflows.TaskRef{Position: *req.Position}, *req.N, req.options()...)
		if err != nil || g.Trajectories == nil {
			return g, err
		}
		samples, err := g.Samples(req.View)
		return groupAnswer{Group: g, Samples: samples}, err
	})
}

// policyRequest is policy's body.
type policyRequest struct {
	Version *int64 `json:"version"`
}

func (h *Handler) policy(w http.ResponseWriter, r *http.Request) {
	var req policyRequest
	if !decode(w, r, "policy", &req, "version") {
		return
	}
	switch {
	case req.Version == nil:
		writeError(w, http.StatusBadRequest, "bad_request", "policy: field version is required (the policy version now current, an integer from 0)")
		return
	case *req.Version < 0:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("policy: field version = %d is negative: versions count up from 0", *req.Version))
		return
	}
	h.call(w, r, "policy", func(ctx context.Context, p *pull.Client) (any, error) {
		v, err := p.SetPolicyVersion(ctx, *req.Version)
		if err != nil {
			return nil, err
		}
		return workflows.PolicyResult{RunID: r.PathValue("run_id"), Version: v}, nil
	})
}

func (h *Handler) progress(w http.ResponseWriter, r *http.Request) {
	h.call(w, r, "progress", func(ctx context.Context, p *pull.Client) (any, error) {
		// A query answers for any workflow: make sure it is a pull run's.
		runID := r.PathValue("run_id")
		desc, err := h.temporal.DescribeWorkflowExecution(ctx, runID, "")
		if err != nil {
			return nil, err
		}
		if name := desc.GetWorkflowExecutionInfo().GetType().GetName(); name != workflows.PullName {
			return nil, notPullRun{runID: runID, kind: name}
		}
		return p.Progress(ctx)
	})
}

// closed is close's answer.
type closed struct {
	RunID  string `json:"run_id"`
	Closed bool   `json:"closed"`
}

func (h *Handler) close(w http.ResponseWriter, r *http.Request) {
	if !decodeEmpty(w, r, "close") {
		return
	}
	h.call(w, r, "close", func(ctx context.Context, p *pull.Client) (any, error) {
		if err := p.Close(ctx); err != nil {
			return nil, err
		}
		return closed{RunID: r.PathValue("run_id"), Closed: true}, nil
	})
}

// call runs one call of the pull client on the path's run and writes its
// answer or its error.
func (h *Handler) call(w http.ResponseWriter, r *http.Request, action string, do func(context.Context, *pull.Client) (any, error)) {
	runID := r.PathValue("run_id")
	if !h.reachable(r.Context()) {
		if r.Context().Err() == nil {
			unavailable(w)
		}
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.CallTimeout)
	defer cancel()
	var opts []pull.Option
	if h.cfg.Traces != nil {
		opts = append(opts, pull.WithTraces(h.cfg.Traces))
	}
	out, err := do(ctx, pull.New(h.temporal, runID, opts...))
	if err == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	if r.Context().Err() != nil {
		// The caller went away: nobody reads an answer.
		h.cfg.Logger.Info("pull call abandoned by its caller", "action", action, "run_id", runID)
		return
	}
	if ctx.Err() != nil {
		// The server's timeout, whatever shape the error took on its way.
		err = errors.Join(context.DeadlineExceeded, err)
	}
	status, kind, msg := h.classify(r.Context(), runID, action, err)
	h.cfg.Logger.Warn("pull call failed", "action", action, "run_id", runID, "status", status, "error", err)
	if status == http.StatusServiceUnavailable {
		unavailable(w)
		return
	}
	writeError(w, status, kind, msg)
}

// reachable reports whether Temporal answers within ReachTimeout.
func (h *Handler) reachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ReachTimeout)
	defer cancel()
	_, err := h.temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err == nil
}

// notPullRun is the error of a run that is another kind of workflow.
type notPullRun struct{ runID, kind string }

func (e notPullRun) Error() string {
	return fmt.Sprintf("run %s is not a pull run (it is a %s): start one with starter train --pull", e.runID, e.kind)
}

// classify maps a failed call to a status, an error type and a message.
func (h *Handler) classify(ctx context.Context, runID, action string, err error) (int, string, string) {
	var notPull notPullRun
	var notFound *serviceerror.NotFound
	var app *temporal.ApplicationError
	// The run's own refusals (its update handlers' and validators' errors).
	refused := func(text string) bool { return app != nil && strings.Contains(app.Message(), text) }
	errors.As(err, &app)
	switch {
	case errors.As(err, &notPull):
		return http.StatusNotFound, "not_found", notPull.Error()
	case errors.Is(err, context.DeadlineExceeded) || isDeadline(err):
		if !h.reachable(ctx) {
			return http.StatusServiceUnavailable, "", ""
		}
		again := "call again"
		if action == "run_group" || action == "run_rollout" {
			again = "rollouts it started run on and are stored; call again with the same position to collect them"
		}
		return http.StatusGatewayTimeout, "timeout", fmt.Sprintf("%s on run %s did not finish within the server's %s: %s",
			action, runID, h.cfg.CallTimeout, again)
	case errors.As(err, &notFound):
		return h.missing(ctx, runID)
	case isUnavailable(err):
		return http.StatusServiceUnavailable, "", ""
	case strings.Contains(err.Error(), "unknown update"):
		return http.StatusNotFound, "not_found", fmt.Sprintf("run %s is not a pull run: start one with starter train --pull", runID)
	case refused(" is closed"):
		return http.StatusConflict, "closed", fmt.Sprintf("run %s is closed", runID)
	case refused("has handed out all"):
		return http.StatusConflict, "exhausted", app.Message()
	case refused("never sampled"):
		return http.StatusBadRequest, "bad_request", "field position: " + app.Message()
	case refused("group size"):
		return http.StatusBadRequest, "bad_request", "field n: " + app.Message()
	case refused("versions only go forward"):
		return http.StatusConflict, "version_behind", "field version: " + app.Message()
	case refused("versions count up"):
		return http.StatusBadRequest, "bad_request", "field version: " + app.Message()
	case refused("max_off_policy_steps"), refused("on_stale"):
		return http.StatusBadRequest, "bad_request", app.Message()
	case app != nil:
		return http.StatusInternalServerError, "failed", fmt.Sprintf("%s on run %s failed: %s", action, runID, app.Message())
	}
	return http.StatusInternalServerError, "failed", fmt.Sprintf("%s on run %s failed: %v", action, runID, err)
}

// missing tells a run that never existed (404) from one that has ended
// (409): Temporal answers both with NotFound.
func (h *Handler) missing(ctx context.Context, runID string) (int, string, string) {
	desc, err := h.temporal.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return http.StatusNotFound, "not_found", fmt.Sprintf("no run %s", runID)
		}
		if isUnavailable(err) {
			return http.StatusServiceUnavailable, "", ""
		}
		return http.StatusInternalServerError, "failed", fmt.Sprintf("look up run %s: %v", runID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != workflows.PullName {
		return http.StatusNotFound, "not_found", notPullRun{runID: runID, kind: info.GetType().GetName()}.Error()
	}
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		status := strings.ToLower(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))
		return http.StatusConflict, "closed", fmt.Sprintf("run %s is closed (%s)", runID, status)
	}
	return http.StatusNotFound, "not_found", fmt.Sprintf("no run %s", runID)
}

// isUnavailable reports whether err says Temporal could not be reached.
func isUnavailable(err error) bool {
	var unavailable *serviceerror.Unavailable
	return errors.As(err, &unavailable)
}

// isDeadline reports whether err is Temporal's own deadline.
func isDeadline(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &deadline)
}

// checkPosition answers 400 when the position is missing or negative.
func checkPosition(w http.ResponseWriter, action string, pos *int64) bool {
	switch {
	case pos == nil:
		writeError(w, http.StatusBadRequest, "bad_request", action+": field position is required (the position sample returned)")
		return false
	case *pos < 0:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s: field position = %d is negative", action, *pos))
		return false
	}
	return true
}

// decodeEmpty accepts an empty body or an empty JSON object.
func decodeEmpty(w http.ResponseWriter, r *http.Request, action string) bool {
	var none struct{}
	return decode(w, r, action, &none)
}

// decode reads a JSON object body into v, refusing anything else with a
// 400 that names what is wrong. An empty body is an empty object. fields
// are the names the body may hold, for the message.
func decode(w http.ResponseWriter, r *http.Request, action string, v any, fields ...string) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "bad_request", fmt.Sprintf("%s: body is larger than %d bytes", action, maxBody))
		} else {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s: read body: %v", action, err))
		}
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		return true
	}
	takes := "an empty object"
	if len(fields) > 0 {
		takes = "fields " + strings.Join(fields, ", ")
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var msg string
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		msg = fmt.Sprintf("field %s must be %s, not a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.As(err, &typ):
		msg = fmt.Sprintf("body must be a JSON object (%s), not a JSON %s", takes, typ.Value)
	case errors.As(err, &syntax):
		msg = fmt.Sprintf("body is not valid JSON (%v, at byte %d)", syntax, syntax.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		msg = fmt.Sprintf("unknown field %s (%s takes %s)", strings.TrimPrefix(err.Error(), "json: unknown field "), action, takes)
	default:
		msg = fmt.Sprintf("body is not valid JSON: %v", err)
	}
	writeError(w, http.StatusBadRequest, "bad_request", action+": "+msg)
	return false
}

// jsonKind names a Go kind as JSON calls it.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "a boolean"
	}
	return "a " + kind
}

func unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
		"message":             fmt.Sprintf("Temporal is unreachable from the pull API: retry in %d s", retryAfter),
		"type":                "unavailable",
		"retry_after_seconds": retryAfter,
	}})
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": kind}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
