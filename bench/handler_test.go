package bench_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/targets"
	"github.com/evalflow/evalflow/bench/internal/upstream"
	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
)

// memUpstream answers every call from memory, in one dialect.
type memUpstream struct {
	dialect string
	ctype   string
	body    []byte
}

var _ interception.Upstream = (*memUpstream)(nil)

func (m *memUpstream) Dialect() string { return m.dialect }

func (m *memUpstream) Relay(context.Context, string, http.Header, dialects.Body) (*http.Response, int, error) {
	return m.response(), 1, nil
}

func (m *memUpstream) response() *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {m.ctype}},
		Body:   io.NopCloser(bytes.NewReader(m.body)), ContentLength: int64(len(m.body)),
	}
}

// RoundTrip lets the reverse proxy baseline use the same upstream.
func (m *memUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	resp := m.response()
	resp.Request = r
	return resp, nil
}

// answer is what the benchmark mock sends for a dialect: JSON of size
// bytes, or a stream of events content events.
func answer(tb testing.TB, dialect string, size, events int) (ctype string, body []byte) {
	tb.Helper()
	stream := events > 0
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, targets.Path(dialect), bytes.NewReader(targets.Body(dialect, 100, stream)))
	upstream.New(upstream.Config{BodyBytes: size, Events: events}).ServeHTTP(rec, req)
	require.Equal(tb, http.StatusOK, rec.Code)
	return rec.Header().Get("Content-Type"), rec.Body.Bytes()
}

// cpuPerOp reports the process's CPU time (user and system, GC included)
// per op when the returned function is called: unlike ns/op it does not
// grow when other processes take the cores.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discard is a ResponseWriter that keeps nothing and can flush. Like
// net/http's, it reads a body handed to io.Copy with a reused buffer.
type discard struct {
	h   http.Header
	buf [32 << 10]byte
}

func (d *discard) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	for {
		k, err := r.Read(d.buf[:])
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// serve runs handler b.N times on a request of dialect carrying body,
// rotating the rollout every 1024 requests (fewer for large bodies: at
// most about 64 MB of them) so that turns do not pile up. The rotation is
// not timed, but cpu-ns/op counts it: it parses the turns recorded.
func serve(b *testing.B, srv *interception.Server, dialect string, body []byte) {
	b.Helper()
	secret := ""
	rotate := func(i int) {
		if secret != "" {
			srv.Finish("bench/0/0/0")
			srv.Unregister("bench/0/0/0")
		}
		var err error
		secret, err = srv.Register(interception.Rollout{Key: "bench/0/0/0", Model: "bench"})
		require.NoError(b, err)
	}
	rotate(0)
	w := &discard{h: http.Header{}}
	rd := bytes.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, targets.Path(dialect), rd)
	req.Header.Set("Content-Type", "application/json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	defer cpuPerOp(b)()
	b.ResetTimer()
	every := max(1, min(1024, (64<<20)/len(body)))
	for i := range b.N {
		if i%every == every-1 {
			b.StopTimer()
			rotate(i)
			b.StartTimer()
		}
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		req.Header.Set("Authorization", "Bearer "+secret)
		clear(w.h)
		srv.ServeHTTP(w, req)
	}
}

func newServer(b *testing.B, up interception.Upstream) *interception.Server {
	b.Helper()
	srv, err := interception.Listen(interception.Config{Upstream: up, Multiplex: 1 << 20})
	require.NoError(b, err)
	b.Cleanup(func() { _ = srv.Close() })
	return srv
}

var sizes = []struct {
	name  string
	bytes int
}{{"4KB", 4 << 10}, {"64KB", 64 << 10}, {"1MB", 1 << 20}}

// BenchmarkRelay is the relay arm per dialect, body size and answer kind:
// the request and the JSON answer are of the size named; a stream carries
// 64 content events.
func BenchmarkRelay(b *testing.B) {
	for _, d := range []string{targets.Chat, targets.Responses, targets.Anthropic} {
		for _, sz := range sizes {
			b.Run(d+"/"+sz.name+"/json", func(b *testing.B) {
				ctype, ans := answer(b, d, sz.bytes, 0)
				srv := newServer(b, &memUpstream{dialect: d, ctype: ctype, body: ans})
				serve(b, srv, d, targets.Body(d, sz.bytes, false))
			})
		}
		b.Run(d+"/4KB/sse", func(b *testing.B) {
			ctype, ans := answer(b, d, 0, 64)
			srv := newServer(b, &memUpstream{dialect: d, ctype: ctype, body: ans})
			serve(b, srv, d, targets.Body(d, 4<<10, true))
		})
	}
}

// BenchmarkMaterialize is the cost the relay arm defers per turn: reading a
// rollout's recorded turns (Finish) parses each one's request and 4 KB
// JSON answer. An op is one turn; the calls that record them are not timed,
// and cpu-ns/op counts only the reads.
func BenchmarkMaterialize(b *testing.B) {
	for _, d := range []string{targets.Chat, targets.Responses, targets.Anthropic} {
		b.Run(d+"/4KB/json", func(b *testing.B) {
			ctype, ans := answer(b, d, 4<<10, 0)
			srv := newServer(b, &memUpstream{dialect: d, ctype: ctype, body: ans})
			body := targets.Body(d, 4<<10, false)
			w := &discard{h: http.Header{}}
			rd := bytes.NewReader(body)
			req := httptest.NewRequest(http.MethodPost, targets.Path(d), rd)
			req.Header.Set("Content-Type", "application/json")
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			for done := 0; done < b.N; {
				b.StopTimer()
				secret, err := srv.Register(interception.Rollout{Key: "bench/0/0/0", Model: "bench"})
				require.NoError(b, err)
				req.Header.Set("Authorization", "Bearer "+secret)
				n := min(b.N-done, 1024) // turns per rollout, as serve rotates
				for range n {
					rd.Reset(body)
					req.Body = io.NopCloser(rd)
					clear(w.h)
					srv.ServeHTTP(w, req)
				}
				b.StartTimer()
				start := cpuTime()
				turns, _ := srv.Finish("bench/0/0/0")
				srv.Unregister("bench/0/0/0")
				cpu += cpuTime() - start
				require.Len(b, turns, n)
				done += n
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkTranslate is the translate arm: a chat caller, an Anthropic
// upstream; and, streamed (64 content events, converted event by event),
// both ways between chat and Anthropic, to set against BenchmarkRelay's
// sse rows of the upstream's dialect.
func BenchmarkTranslate(b *testing.B) {
	for _, sz := range sizes {
		b.Run("chat-anthropic/"+sz.name, func(b *testing.B) {
			ctype, ans := answer(b, targets.Anthropic, sz.bytes, 0)
			srv := newServer(b, &memUpstream{dialect: targets.Anthropic, ctype: ctype, body: ans})
			serve(b, srv, targets.Chat, targets.Body(targets.Chat, sz.bytes, false))
		})
	}
	for _, p := range []struct{ caller, up string }{{targets.Chat, targets.Anthropic}, {targets.Anthropic, targets.Chat}} {
		b.Run(p.caller+"-"+p.up+"/4KB/sse", func(b *testing.B) {
			ctype, ans := answer(b, p.up, 0, 64)
			srv := newServer(b, &memUpstream{dialect: p.up, ctype: ctype, body: ans})
			serve(b, srv, p.caller, targets.Body(p.caller, 4<<10, true))
		})
	}
}

// BenchmarkReverseProxy is the baseline: httputil.ReverseProxy on the same
// in-memory upstream.
func BenchmarkReverseProxy(b *testing.B) {
	for _, sz := range sizes {
		b.Run("chat/"+sz.name+"/json", func(b *testing.B) {
			ctype, ans := answer(b, targets.Chat, sz.bytes, 0)
			u, _ := url.Parse("http://upstream.invalid")
			rp := &httputil.ReverseProxy{
				Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
				Transport: &memUpstream{dialect: targets.Chat, ctype: ctype, body: ans},
			}
			body := targets.Body(targets.Chat, sz.bytes, false)
			w := &discard{h: http.Header{}}
			rd := bytes.NewReader(body)
			req := httptest.NewRequest(http.MethodPost, targets.Path(targets.Chat), rd)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			b.ResetTimer()
			for range b.N {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				clear(w.h)
				rp.ServeHTTP(w, req)
			}
		})
	}
}
