package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/logagg"
)

// fixedJob is a job of one proc and one member whose log is a real log
// file, written by the test: the access rules and the API's bounds need
// no running job (systest's TestDashboard has one).
type fixedJob struct{ dir string }

func (j fixedJob) State(ctx context.Context) (*jobctl.JobState, error) {
	return &jobctl.JobState{Version: jobctl.StateVersion, Job: "j1", At: time.Now(),
		ProcMeshes:  []jobctl.ProcMeshState{{Name: "workers", Procs: []jobctl.ProcState{{Proc: "h0.c-1", State: "running"}}}},
		ActorMeshes: []jobctl.ActorMeshState{{Name: "pingers", Members: []jobctl.MemberState{{Proc: "h0.c-1", State: "running"}}}}}, nil
}

func (j fixedJob) Stacks(ctx context.Context, req jobctl.StacksRequest) (*jobctl.StacksAnswer, error) {
	if len(req.Meshes) != 1 || req.Meshes[0] != "workers" {
		return nil, errors.New("no proc mesh " + strings.Join(req.Meshes, ","))
	}
	return &jobctl.StacksAnswer{Job: "j1", Procs: []jobctl.ProcStacks{{ProcInfo: jobctl.ProcInfo{Proc: "h0.c-1", Mesh: "workers"},
		Goroutines: "goroutine 1 [select]:\nmain.fixedStackHere()\n\t/x.go:1 +0x1\n"}}}, nil
}

func (j fixedJob) Logs(ctx context.Context, f logagg.Filter, emit func(logagg.Line) error) error {
	return logagg.Read(ctx, j.dir, "j1", f, false, emit)
}

const testToken = "0123456789abcdef0123456789abcdef"

// start starts a dashboard of a fixedJob with a log of lines "line 0" to
// "line 9" (odd ones on stderr, rank i%2), and closes it at the end.
func start(t *testing.T, metrics http.Handler) *Server {
	t.Helper()
	dir := t.TempDir()
	w, err := logagg.NewWriter(dir, "j1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		w.Write(logagg.Line{Time: time.Now(), Host: "h0", Proc: "h0.c-1", Mesh: "workers", Rank: i % 2,
			Stream: logagg.Stream(1 + i%2), Text: "line " + string(rune('0'+i))})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Start(Options{Token: testToken, Job: fixedJob{dir}, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client follows no redirect: each answer is seen as it is.
var client = &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, u string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestDashboardAccess: without the token, with a wrong one (query,
// cookie, Bearer, another dashboard's cookie, the raw token as the
// cookie, the cookie outside the page's path) a request is refused with
// one line saying what is needed; the token in the query sets the cookie,
// scoped to the page's random path and derived from the token and the
// port, and redirects to the URL without it; the cookie is taken under
// that path, Bearer anywhere; /metrics is served behind the same check.
func TestDashboardAccess(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "monarch_up 1\n") })
	s := start(t, metrics)
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != s.Addr().String() || u.Query().Get("token") != testToken || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("URL %s; want the token, on loopback (%s)", s.URL(), s.Addr())
	}
	if !regexp.MustCompile(`^/[0-9a-f]{32}/$`).MatchString(u.Path) {
		t.Fatalf("URL %s: its path is not a random prefix", s.URL())
	}
	base := "http://" + u.Host
	page := base + u.Path
	port := u.Port()
	value := session(testToken, port)
	cookie := "monarch_dashboard_" + port + "=" + value
	if strings.Contains(value, testToken) {
		t.Fatalf("the cookie's value %q holds the token", value)
	}

	refused := []struct {
		name, path string
		hdr        map[string]string
	}{
		{"no token", "/", nil},
		{"no token, the page", u.Path, nil},
		{"no token, state", u.Path + "api/state", nil},
		{"no token, events", "/events", nil},
		{"no token, metrics", "/metrics", nil},
		{"wrong token", "/?token=" + strings.Repeat("0", len(testToken)), nil},
		{"short token", "/?token=0123", nil},
		{"empty token", "/?token=", nil},
		{"wrong cookie", u.Path, map[string]string{"Cookie": "monarch_dashboard_" + port + "=" + strings.Repeat("1", 64)}},
		{"the token as the cookie", u.Path, map[string]string{"Cookie": "monarch_dashboard_" + port + "=" + testToken}},
		{"another port's cookie", u.Path, map[string]string{"Cookie": "monarch_dashboard_1=" + session(testToken, "1")}},
		{"the cookie outside the page's path", "/", map[string]string{"Cookie": cookie}},
		{"the cookie under another prefix", "/" + strings.Repeat("0", 32) + "/", map[string]string{"Cookie": cookie}},
		{"wrong bearer", "/api/state", map[string]string{"Authorization": "Bearer x" + testToken}},
		{"basic, not bearer", "/api/state", map[string]string{"Authorization": "Basic " + testToken}},
		{"token in a header of another name", "/api/state", map[string]string{"X-Token": testToken}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, base+tt.path, tt.hdr)
			if resp.StatusCode != http.StatusUnauthorized || body != denied || resp.Header.Get("Set-Cookie") != "" {
				t.Errorf("%s: %s %q, cookie %q; want 401 %q", tt.path, resp.Status, body, resp.Header.Get("Set-Cookie"), denied)
			}
			if !strings.Contains(body, "monarch dashboard JOB") || strings.Count(body, "\n") != 1 {
				t.Errorf("the refusal is not one line naming monarch dashboard JOB: %q", body)
			}
		})
	}

	// The token: a cookie, and the same URL without it.
	resp, _ := get(t, s.URL(), nil)
	set := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != u.Path {
		t.Errorf("with the token: %s, Location %q; want 303 to %s", resp.Status, resp.Header.Get("Location"), u.Path)
	}
	for _, want := range []string{cookie, "HttpOnly", "SameSite=Strict", "Path=" + u.Path} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	for from, to := range map[string]string{
		page + "api/logs?n=3&token=" + testToken + "&stream=stderr":    u.Path + "api/logs?n=3&stream=stderr",
		base + "/?token=" + testToken:                                  u.Path, // a link without the prefix
		base + "/api/state?token=" + testToken:                         u.Path + "api/state",
		base + strings.TrimSuffix(u.Path, "/") + "?token=" + testToken: u.Path,
	} {
		resp, _ = get(t, from, nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != to {
			t.Errorf("%s: %s, Location %q; want %s", from, resp.Status, loc, to)
		}
	}

	// The cookie under the page's path, and Bearer anywhere.
	resp, body := get(t, page, map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<title>monarch job</title>") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("with the cookie: %s, %.80q", resp.Status, body)
	}
	var st jobctl.JobState
	for _, path := range []string{"/api/state", u.Path + "api/state"} {
		resp, body = get(t, base+path, map[string]string{"Authorization": "Bearer " + testToken})
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.Job != "j1" {
			t.Errorf("state with Bearer at %s: %s, %q", path, resp.Status, body)
		}
	}
	resp, body = get(t, page+"api/state", map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Errorf("state with the cookie: %s, %q", resp.Status, body)
	}
	resp, body = get(t, base+"/metrics", map[string]string{"Authorization": "bearer " + testToken})
	if resp.StatusCode != http.StatusOK || body != "monarch_up 1\n" {
		t.Errorf("metrics with Bearer: %s, %q", resp.Status, body)
	}
	resp, _ = get(t, page+"nothing", map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown path: %s; want 404", resp.Status)
	}
}

// TestDashboardCookieStaysHome: a client that keeps cookies as browsers
// do (by host, whatever the port) opens the dashboard's URL, then a
// server of another user on another port of the same host: that server
// receives no cookie of the dashboard.
func TestDashboardCookieStaysHome(t *testing.T) {
	s := start(t, nil)
	got := make(chan string, 4)
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Cookie")
	}), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go other.Serve(ln)
	t.Cleanup(func() { other.Close() })
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	resp, err := browser.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<title>monarch job</title>") {
		t.Fatalf("the dashboard: %s", resp.Status)
	}
	u, _ := url.Parse(s.URL())
	for _, path := range []string{"/", "/events", "/api/state"} {
		resp, err := browser.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if c := <-got; c != "" {
			t.Errorf("the server on another port got %q at %s", c, path)
		}
	}
	// The jar does send it back to the dashboard: the path is its own.
	if cs := jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: u.Path + "api/state"}); len(cs) != 1 {
		t.Errorf("cookies for the dashboard's page: %v", cs)
	}
}

// TestDashboardNoMetrics: without a metrics handler, /metrics is not
// there (for those with the token).
func TestDashboardNoMetrics(t *testing.T) {
	s := start(t, nil)
	resp, _ := get(t, "http://"+s.Addr().String()+"/metrics", map[string]string{"Authorization": "Bearer " + testToken})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("metrics: %s; want 404", resp.Status)
	}
}

// TestDashboardAPI: stacks by proc id and by proc mesh and rank; a proc
// the job does not have; the log's last lines with the filters of
// monarch logs, and bad filters refused.
func TestDashboardAPI(t *testing.T) {
	s := start(t, nil)
	base := "http://" + s.Addr().String()
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	for _, q := range []string{"proc=h0.c-1", "mesh=workers&rank=0"} {
		resp, body := get(t, base+"/api/stacks?"+q, auth)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "main.fixedStackHere(") || !strings.Contains(body, "== workers 0: 1 goroutine each [select]") {
			t.Errorf("stacks %s: %s\n%s", q, resp.Status, body)
		}
	}
	for q, want := range map[string]int{"proc=nope": 404, "mesh=nope": 400, "rank=x": 400} {
		if resp, body := get(t, base+"/api/stacks?"+q, auth); resp.StatusCode != want {
			t.Errorf("stacks %s: %s %q; want %d", q, resp.Status, body, want)
		}
	}

	logs := func(q string) (int, logsAnswer, string) {
		resp, body := get(t, base+"/api/logs?"+q, auth)
		var a logsAnswer
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &a); err != nil {
				t.Fatalf("logs %s: %v: %q", q, err, body)
			}
		}
		return resp.StatusCode, a, body
	}
	texts := func(a logsAnswer) string {
		var out []string
		for _, l := range a.Lines {
			out = append(out, l.Text)
		}
		return strings.Join(out, ",")
	}
	for q, want := range map[string]string{
		"":                           "line 0,line 1,line 2,line 3,line 4,line 5,line 6,line 7,line 8,line 9",
		"n=3":                        "line 7,line 8,line 9",
		"stream=stderr&n=2":          "line 7,line 9",
		"rank=0&grep=[2-5]":          "line 2,line 4",
		"host=h0&mesh=workers&n=1":   "line 9",
		"host=h1":                    "",
		"since=1h&rank=1&rank=0&n=1": "line 9",
		"since=2999-01-01T00:00:00Z": "",
	} {
		code, a, body := logs(q)
		if code != http.StatusOK || texts(a) != want {
			t.Errorf("logs %q: %d %q; want %q", q, code, texts(a), want)
		} else if !strings.Contains(body, `"matched"`) {
			t.Errorf("logs %q: no count of lines matched: %s", q, body)
		}
	}
	for _, q := range []string{"n=0", "n=100000", "n=x", "rank=-1", "rank=a", "stream=both", "grep=(", "since=yesterday"} {
		if code, _, body := logs(q); code != http.StatusBadRequest || !strings.HasPrefix(body, "monarch: ") {
			t.Errorf("logs %q: %d %q; want 400 saying why", q, code, body)
		}
	}
}

// TestDashboardEvents: the event stream sends the state at once, then
// only what changed (a fixedJob's At alone changes: nothing more), and
// ends when the server closes; the server's goroutines end with it.
func TestDashboardEvents(t *testing.T) {
	before := runtime.NumGoroutine()
	s := start(t, nil)
	req, _ := http.NewRequest("GET", "http://"+s.Addr().String()+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %s, %q", resp.Status, ct)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var data []string
	timeout := time.After(20 * time.Second)
	closed := false
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break wait
			}
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				data = append(data, d)
				if !closed {
					time.Sleep(2500 * time.Millisecond) // two intervals: nothing changes
					s.Close()
					closed = true
				}
			}
		case <-timeout:
			t.Fatal("the event stream did not end within 20s of its first state and the server's Close")
		}
	}
	if len(data) != 1 {
		t.Fatalf("%d states sent; want 1 (nothing changed): %q", len(data), data)
	}
	var st jobctl.JobState
	if err := json.Unmarshal([]byte(data[0]), &st); err != nil || st.Job != "j1" || st.At.IsZero() {
		t.Errorf("the state sent: %v, %+v", err, st)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestDashboardStart: an address taken is an error that says so; a
// token too short and no job are refused; Close twice is fine.
func TestDashboardStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(Options{Addr: ln.Addr().String(), Token: testToken, Job: fixedJob{}})
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("an address taken: %v; want EADDRINUSE naming it", err)
	}
	if _, err := Start(Options{Token: "short", Job: fixedJob{}}); !errors.Is(err, ErrNoToken) {
		t.Errorf("a short token: %v", err)
	}
	if _, err := Start(Options{Token: testToken}); !errors.Is(err, ErrNoJob) {
		t.Errorf("no job: %v", err)
	}
	s, err := Start(Options{Token: testToken, Job: fixedJob{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Errorf("%s still listens after Close", s.Addr())
	}
	tok, err := NewToken()
	if err != nil || len(tok) != 64 {
		t.Errorf("NewToken: %q, %v", tok, err)
	}
}

// TestDashboardStreamsBounded: at most MaxStreams event streams are
// served at once, the next is refused (503); a stream whose browser goes
// away frees its slot.
func TestDashboardStreamsBounded(t *testing.T) {
	s := start(t, nil)
	open := func() *http.Response {
		req, _ := http.NewRequest("GET", "http://"+s.Addr().String()+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var streams []*http.Response
	for range MaxStreams {
		resp := open()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %s", len(streams), resp.Status)
		}
		streams = append(streams, resp)
	}
	resp := open()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many event streams") {
		t.Errorf("stream %d: %s %q; want 503", MaxStreams+1, resp.Status, body)
	}
	for _, r := range streams {
		r.Body.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s.streams) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still held 10s after their browsers went", len(s.streams))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp := open(); resp.StatusCode != http.StatusOK {
		t.Errorf("a stream after the others went: %s", resp.Status)
	} else {
		resp.Body.Close()
	}
}

// FuzzAccess: whatever a request's path, query, cookie and
// Authorization, it is let through (or given the cookie) only when it
// shows the token (query, Bearer) or the cookie under the page's path;
// never a panic.
func FuzzAccess(f *testing.F) {
	const prefix = "/0123456789abcdef0123456789abcdef"
	value := session(testToken, "1")
	f.Add(prefix+"/", "", "")
	f.Add(prefix+"/api/state", "monarch_dashboard_1="+value, "")
	f.Add("/api/state", "monarch_dashboard_1="+value, "")
	f.Add(prefix+"x/", "monarch_dashboard_1="+value, "")
	f.Add(prefix, "monarch_dashboard_1="+value, "")
	f.Add("/metrics", "", "Bearer "+testToken)
	f.Add("/?token="+testToken, "", "")
	f.Add(prefix[:10], "", "")
	f.Fuzz(func(t *testing.T, target, cookie, auth string) {
		s := &Server{o: Options{Token: testToken}, prefix: prefix, cookie: "monarch_dashboard_1", session: value}
		served := false
		h := s.access(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
		req, err := http.NewRequest("GET", "http://127.0.0.1:1"+target, nil)
		if err != nil || req.URL.Host != "127.0.0.1:1" {
			return
		}
		req.Header.Set("Cookie", cookie)
		req.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if !served && w.Code != http.StatusSeeOther {
			return
		}
		rest, under := s.underPrefix(req.URL.Path)
		c, cerr := req.Cookie("monarch_dashboard_1")
		scheme, tok, _ := strings.Cut(auth, " ")
		shown := req.URL.Query().Get("token") == testToken ||
			strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) == testToken ||
			under && cerr == nil && c.Value == value
		if !shown {
			t.Fatalf("%q (cookie %q, auth %q): %d, served %v, without the token (under %v, %q)", target, cookie, auth, w.Code, served, under, rest)
		}
	})
}
