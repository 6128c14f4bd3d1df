package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const composeFile = "../docker-compose.yml"

// testFRPToken is FRP_TOKEN for tests that do not set their own: the file
// does not load without one.
const testFRPToken = "frp-compose-default-test-token"

// loadProject loads the compose file with the test's environment, and an
// FRP_TOKEN when the test set none.
func loadProject(t *testing.T, opts ...cli.ProjectOptionsFn) *types.Project {
	t.Helper()
	if _, ok := os.LookupEnv("FRP_TOKEN"); !ok {
		t.Setenv("FRP_TOKEN", testFRPToken)
	}
	p, err := tryLoadProject(opts...)
	require.NoError(t, err, "LoadProject(%s)", composeFile)
	return p
}

func tryLoadProject(opts ...cli.ProjectOptionsFn) (*types.Project, error) {
	opts = append([]cli.ProjectOptionsFn{cli.WithOsEnv, cli.WithName("evalflow")}, opts...)
	po, err := cli.NewProjectOptions([]string{composeFile}, opts...)
	if err != nil {
		return nil, err
	}
	return po.LoadProject(context.Background())
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	require.NoError(t, err, "service %q", name)
	return s
}

func env(s types.ServiceConfig, name string) string {
	if v := s.Environment[name]; v != nil {
		return *v
	}
	return ""
}

func script(s types.ServiceConfig) string {
	return strings.Join(append(append([]string{}, s.Entrypoint...), s.Command...), " ")
}

func TestComposeServices(t *testing.T) {
	p := loadProject(t)
	want := []string{"postgres", "evalflow-db", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui", "frps", "worker"}
	assert.ElementsMatch(t, want, p.ServiceNames())

	for _, s := range p.Services {
		if s.Build != nil {
			continue
		}
		image, tag, ok := strings.Cut(s.Image, ":")
		assert.True(t, ok && tag != "" && tag != "latest", "service %s image %q is not pinned", s.Name, s.Image)
		assert.NotEmpty(t, image)
	}
}

func TestComposeStartOrder(t *testing.T) {
	p := loadProject(t)
	tests := []struct {
		service, dependsOn, condition string
	}{
		{"temporal-schema", "postgres", types.ServiceConditionHealthy},
		{"temporal", "temporal-schema", types.ServiceConditionCompletedSuccessfully},
		{"temporal-namespace", "temporal", types.ServiceConditionStarted},
		{"temporal-ui", "temporal", types.ServiceConditionStarted},
		{"worker", "temporal-namespace", types.ServiceConditionCompletedSuccessfully},
		{"worker", "evalflow-db", types.ServiceConditionCompletedSuccessfully},
		{"worker", "frps", types.ServiceConditionStarted},
		{"evalflow-db", "postgres", types.ServiceConditionHealthy},
	}
	for _, tt := range tests {
		dep, ok := service(t, p, tt.service).DependsOn[tt.dependsOn]
		if assert.True(t, ok, "%s does not depend on %s", tt.service, tt.dependsOn) {
			assert.Equal(t, tt.condition, dep.Condition, "%s depends_on %s condition", tt.service, tt.dependsOn)
		}
	}
}

func TestComposePostgres(t *testing.T) {
	pg := service(t, loadProject(t), "postgres")
	assert.True(t, strings.HasPrefix(pg.Image, "postgres:16"), "postgres image %q", pg.Image)
	require.NotNil(t, pg.HealthCheck, "postgres has no healthcheck")
	assert.Contains(t, strings.Join(pg.HealthCheck.Test, " "), "pg_isready")
}

func TestComposeTemporal(t *testing.T) {
	p := loadProject(t)

	schema := service(t, p, "temporal-schema")
	assert.True(t, strings.HasPrefix(schema.Image, "temporalio/admin-tools:"), "schema image %q", schema.Image)
	assert.Equal(t, "postgres12", env(schema, "SQL_PLUGIN"))
	for _, step := range []string{"temporal-sql-tool", " create", "setup-schema", "update-schema", "temporal_visibility"} {
		assert.Contains(t, script(schema), step, "schema step")
	}

	server := service(t, p, "temporal")
	assert.True(t, strings.HasPrefix(server.Image, "temporalio/server:"), "server image %q", server.Image)
	for name, value := range map[string]string{
		"DB":             "postgres12",
		"POSTGRES_SEEDS": "postgres",
		"BIND_ON_IP":     "0.0.0.0",
	} {
		assert.Equal(t, value, env(server, name), "temporal env %s", name)
	}

	ns := service(t, p, "temporal-namespace")
	for _, step := range []string{"operator namespace create", "operator search-attribute create", "EvalflowRunId", "EvalflowModel", "EvalflowTaskset", "Keyword"} {
		assert.Contains(t, script(ns), step, "namespace step")
	}

	ui := service(t, p, "temporal-ui")
	assert.True(t, strings.HasPrefix(ui.Image, "temporalio/ui:"), "ui image %q", ui.Image)
	require.Len(t, ui.Ports, 1)
	assert.Equal(t, uint32(8080), ui.Ports[0].Target)
	assert.Equal(t, "8080", ui.Ports[0].Published)
}

func TestComposeWorker(t *testing.T) {
	p := loadProject(t)
	w := service(t, p, "worker")

	require.NotNil(t, w.Build, "worker is not built from this repository")
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	assert.Equal(t, root, w.Build.Context)
	assert.Equal(t, "Dockerfile", w.Build.Dockerfile)
	assert.FileExists(t, filepath.Join(root, w.Build.Dockerfile))

	// Workers share no volume: they write the PostgreSQL run store, a
	// database of its own on the PostgreSQL server.
	assert.Empty(t, w.Volumes, "workers share no volume")
	assert.NotContains(t, p.Volumes, "runs")
	store, err := url.Parse(env(w, "EVALFLOW_STORE"))
	require.NoError(t, err)
	assert.Equal(t, "postgres", store.Scheme)
	assert.Equal(t, "postgres:5432", store.Host)
	assert.Equal(t, "/evalflow", store.Path, "a database of its own, not Temporal's")
	db := service(t, p, "evalflow-db")
	assert.Contains(t, script(db), "CREATE DATABASE evalflow")

	assert.Equal(t, "temporal:7233", env(w, "EVALFLOW_ADDRESS"))
	require.NotNil(t, w.Deploy)
	require.NotNil(t, w.Deploy.Replicas)
	assert.Equal(t, 2, *w.Deploy.Replicas)
	assert.Empty(t, w.ContainerName, "a container_name would stop the worker from scaling")
}

func TestComposeDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	df := string(b)
	assert.Regexp(t, `(?m)^FROM golang:1\.26\S* AS build$`, df)
	assert.Regexp(t, `(?m)go build .* \./worker( \\)?$`, df)
	assert.Regexp(t, `(?m)go build .* \./cmd/evalflow-agent$`, df, "the lean built-in agent ships beside the worker")
	assert.Equal(t, 2, strings.Count(df, "\nFROM "), "want a builder and a runtime stage")
	assert.Contains(t, df, "COPY --from=build")
}

func TestComposeProviderKeyPassedThrough(t *testing.T) {
	const key = "sk-evalflow-compose-test-0123456789"
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
	w := service(t, loadProject(t), "worker")
	assert.Equal(t, key, env(w, "OPENAI_API_KEY"))
	assert.Equal(t, "http://127.0.0.1:9/v1", env(w, "OPENAI_BASE_URL"))

	// Unset on the host: unset in the container, not empty.
	t.Setenv("OPENAI_API_KEY", "")
	require.NoError(t, os.Unsetenv("OPENAI_API_KEY"))
	w = service(t, loadProject(t), "worker")
	assert.Nil(t, w.Environment["OPENAI_API_KEY"], "OPENAI_API_KEY without a host value")
}

// secretName matches environment variables that hold credentials.
var secretName = regexp.MustCompile(`(?i)(API_KEY|TOKEN|SECRET|PASSWORD|_PWD)$`)

// reference matches a value taken from the host: ${NAME},
// ${NAME:-default} or ${NAME:?error}.
var reference = regexp.MustCompile(`^\$\{[A-Z_][A-Z0-9_]*(:?[-?][^}]*)?\}$`)

func TestComposeNoLiteralSecrets(t *testing.T) {
	// Raw values, as written in the file.
	p := loadProject(t, cli.WithInterpolation(false), cli.WithoutEnvironmentResolution)
	checked := 0
	for _, s := range p.Services {
		for name, value := range s.Environment {
			if !secretName.MatchString(name) {
				continue
			}
			checked++
			if value == nil {
				continue
			}
			assert.Regexp(t, reference, *value, "service %s writes %s literally", s.Name, name)
		}
	}
	assert.Positive(t, checked, "no credential variables found: the pattern is broken")

	raw, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	assert.NotRegexp(t, `sk-[A-Za-z0-9_-]{8,}|sk-ant-|ghp_[A-Za-z0-9]{8,}`, string(raw))
}

func TestComposeConfigDocker(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker not installed")
	}
	if err := docker("info"); err != nil {
		t.Skipf("docker engine not available: %v", err)
	}
	if err := docker("compose", "version"); err != nil {
		t.Skipf("docker compose plugin not available: %v", err)
	}
	assert.NoError(t, docker("compose", "-f", composeFile, "config", "-q"), "docker compose config -q")
}

// docker runs the docker CLI; its error carries the first line of stderr.
func docker(args ...string) error {
	_, err := exec.Command("docker", args...).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		line, _, _ := strings.Cut(strings.TrimSpace(string(exit.Stderr)), "\n")
		return fmt.Errorf("%w: %s", err, line)
	}
	return err
}

func TestComposeFRPS(t *testing.T) {
	p := loadProject(t)
	frps := service(t, p, "frps")
	// The server's version is the embedded client's (go.mod).
	assert.Equal(t, "fatedier/frps:v0.68.1", frps.Image)
	for _, arg := range []string{"frps", "--bind_port 7000", `--token "$FRP_TOKEN"`, "--allow_ports 30000-30099"} {
		assert.Contains(t, script(frps), arg)
	}
	// Every port frps may hand out is published, on the same number.
	require.Len(t, frps.Ports, 100)
	for i, port := range frps.Ports {
		assert.Equal(t, uint32(30000+i), port.Target)
		assert.Equal(t, strconv.Itoa(30000+i), port.Published)
	}

	w := service(t, p, "worker")
	assert.Equal(t, "frps:7000", env(w, "EVALFLOW_FRP_SERVER"))
	assert.Equal(t, "frp", env(w, "EVALFLOW_INTERCEPTION_TYPE"))

	const token = "frp-compose-test-token"
	t.Setenv("FRP_TOKEN", token)
	p = loadProject(t)
	assert.Equal(t, token, env(service(t, p, "frps"), "FRP_TOKEN"))
	assert.Equal(t, token, env(service(t, p, "worker"), "EVALFLOW_FRP_TOKEN"), "the worker and frps share the token")
}

// TestComposeRequiresFRPToken: frps's ports are published on every
// interface, so without a token anyone who reaches the host could register
// proxies. The file does not load without FRP_TOKEN, unset or empty.
func TestComposeRequiresFRPToken(t *testing.T) {
	const want = "set FRP_TOKEN to the token your workers use"
	t.Setenv("FRP_TOKEN", "")
	_, err := tryLoadProject()
	require.Error(t, err, "LoadProject with FRP_TOKEN empty")
	assert.Contains(t, err.Error(), want)

	require.NoError(t, os.Unsetenv("FRP_TOKEN"))
	_, err = tryLoadProject()
	require.Error(t, err, "LoadProject without FRP_TOKEN")
	assert.Contains(t, err.Error(), want)

	// Both services that use the token insist on it, not just the first.
	raw, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(raw), "${FRP_TOKEN:?"+want+"}"), "frps and the worker require FRP_TOKEN")
	assert.NotContains(t, string(raw), "${FRP_TOKEN:-", "no default for FRP_TOKEN")

	t.Setenv("FRP_TOKEN", "frp-compose-test-token")
	p, err := tryLoadProject()
	require.NoError(t, err, "LoadProject with FRP_TOKEN")
	assert.Equal(t, "frp-compose-test-token", env(service(t, p, "frps"), "FRP_TOKEN"))
	// The server also refuses an empty token itself, should it be started
	// some other way.
	assert.Contains(t, script(service(t, p, "frps")), `if [ -z "$FRP_TOKEN" ]`)
}

func TestComposeServerDynamicConfig(t *testing.T) {
	srv := service(t, loadProject(t), "temporal")
	path := env(srv, "DYNAMIC_CONFIG_FILE_PATH")
	require.NotEmpty(t, path, "the server reads evalflow's dynamic config")
	var mounted bool
	for _, v := range srv.Volumes {
		if v.Target == path {
			mounted = true
			assert.True(t, strings.HasSuffix(v.Source, "deploy/temporal/dynamicconfig.yaml"), "mounted from %s", v.Source)
		}
	}
	assert.True(t, mounted, "%s is mounted into the server", path)
	b, err := os.ReadFile("temporal/dynamicconfig.yaml")
	require.NoError(t, err)
	assert.Contains(t, string(b), "history.maximumBufferedEventsBatch:", "the server takes the events of hundreds of rollouts in flight")
}
