// Package promtest runs a real Prometheus server for tests: Start writes a
// scrape config for the given targets (every second, with a bearer token
// if one is given), starts Debian's prometheus on a loopback port of its
// own with a temporary store, and stops it when the test ends; Query and
// WaitFor ask it with PromQL through its HTTP API.
//
// Prometheus is installed, when missing, by the project's
// testdata/prometheus/setup.sh (root, apt-get). Where it cannot be, the
// test is skipped, or fails when MONARCH_REQUIRE_CLUSTER=1 (as CI runs).
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// Server is a running Prometheus.
type Server struct {
	// URL is where it serves, http://127.0.0.1:<port>.
	URL string
	// log is its output so far, for a failure's message.
	log *testenv.SyncBuffer
}

var (
	setupOnce sync.Once
	setupSkip string
)

// Require makes sure prometheus is installed (running the project's
// setup script once per test binary), else skips t, or fails it when
// MONARCH_REQUIRE_CLUSTER=1.
func Require(t testing.TB) {
	t.Helper()
	setupOnce.Do(func() {
		script, err := setupScript()
		if err != nil {
			setupSkip = err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, script).CombinedOutput(); err != nil {
			setupSkip = fmt.Sprintf("%s: %v\n%s", script, err, out)
		}
	})
	if setupSkip != "" {
		if os.Getenv("MONARCH_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("Prometheus required (MONARCH_REQUIRE_CLUSTER=1): %s", setupSkip)
		}
		t.Skipf("Prometheus cannot be installed here: %s", setupSkip)
	}
}

// setupScript is testdata/prometheus/setup.sh at the root of the module
// the test is in.
func setupScript() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("the test's module: go env GOMOD: %q, %v", mod, err)
	}
	return filepath.Join(filepath.Dir(mod), "testdata", "prometheus", "setup.sh"), nil
}

// Start starts a Prometheus that scrapes targets (host:port, path
// /metrics, over http) every second, sending token as a bearer token if
// it is not "", and returns once it is ready. It is killed when t ends.
func Start(t testing.TB, targets []string, token string) *Server {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config(targets, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir = dir
	log := &testenv.SyncBuffer{Limit: 1 << 20}
	cmd.Stdout, cmd.Stderr = log, log
	// It dies with this test binary, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	s := &Server{URL: "http://" + addr, log: log}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus ended before it was ready:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within a minute:\n%s", log)
		}
	}
}

// config is a Prometheus config that scrapes targets every second.
func config(targets []string, token string) string {
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n")
	b.WriteString("scrape_configs:\n  - job_name: monarch\n    metrics_path: /metrics\n")
	if token != "" {
		fmt.Fprintf(&b, "    authorization:\n      credentials: %s\n", strconv.Quote(token))
	}
	b.WriteString("    static_configs:\n      - targets: [")
	for i, t := range targets {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(t))
	}
	b.WriteString("]\n")
	return b.String()
}

// Sample is one series of a query's answer: its labels and value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query evaluates expr now (an instant query) and returns its series; a
// scalar answer is one Sample without labels.
func (s *Server) Query(t testing.TB, expr string) []Sample {
	t.Helper()
	out, err := s.query(expr)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	return out
}

func (s *Server) query(expr string) ([]Sample, error) {
	resp, err := http.Get(s.URL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("answer %q: %v", body, err)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("%s: %s", ans.Status, ans.Error)
	}
	switch ans.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(ans.Data.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]Sample, 0, len(vec))
		for _, v := range vec {
			f, err := value(v.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Labels: v.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var sc [2]any
		if err := json.Unmarshal(ans.Data.Result, &sc); err != nil {
			return nil, err
		}
		f, err := value(sc)
		if err != nil {
			return nil, err
		}
		return []Sample{{Value: f}}, nil
	}
	return nil, fmt.Errorf("result type %q: want a vector or a scalar", ans.Data.ResultType)
}

// value reads [time, "value"].
func value(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("value %v: not a string", v[1])
	}
	return strconv.ParseFloat(s, 64)
}

// WaitFor queries expr until ok holds of its answer, within the given
// time, and returns that answer; past it, t fails with the last answer and
// the scrape targets' health.
func (s *Server) WaitFor(t testing.TB, expr string, within time.Duration, ok func([]Sample) bool) []Sample {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := s.query(expr)
		if err == nil && ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: no answer as wanted within %v; the last: %v (%v)\ntargets: %s\nprometheus:\n%s", expr, within, got, err, s.targets(), s.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// targets is the scrape targets' health, as Prometheus says it.
func (s *Server) targets() string {
	resp, err := http.Get(s.URL + "/api/v1/targets?state=active")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return string(b)
}
