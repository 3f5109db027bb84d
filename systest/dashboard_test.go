package systest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The dashboard's tests run a real job (testprogs/feed, as
// TestFeed) and look at its dashboard with a real browser: headless
// Chromium, driven by chromedp. Debian's chromium is installed by
// testdata/browser/setup.sh when missing (root); where it cannot be, the
// browser test skips, or fails under MONARCH_REQUIRE_CLUSTER=1.

var (
	browserOnce sync.Once
	browserPath string
	browserSkip string
)

// requireBrowser returns the path of a Chromium that runs here.
func requireBrowser(t *testing.T) string {
	t.Helper()
	browserOnce.Do(func() {
		var stderr bytes.Buffer
		cmd := exec.Command("testdata/browser/setup.sh")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		lines := strings.Fields(string(out))
		switch {
		case err != nil:
			browserSkip = fmt.Sprintf("testdata/browser/setup.sh: %v\n%s", err, stderr.String())
		case len(lines) == 0:
			browserSkip = "testdata/browser/setup.sh named no browser"
		default:
			browserPath = lines[len(lines)-1]
		}
	})
	if browserSkip != "" {
		if os.Getenv("MONARCH_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("Chromium required (MONARCH_REQUIRE_CLUSTER=1): %s", browserSkip)
		}
		t.Skipf("Chromium cannot be installed here: %s", browserSkip)
	}
	return browserPath
}

// startBrowser starts headless Chromium, 1280x800, with a profile of its
// own in a temporary dir, and returns a chromedp context of one tab. At
// the test's end the browser is closed, every process it started is
// killed (they share a process group) and the test fails if one is left.
func startBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	profile := t.TempDir()
	var cmd *exec.Cmd
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 800),
		chromedp.ModifyCmdFunc(func(c *exec.Cmd) {
			if c.SysProcAttr == nil {
				c.SysProcAttr = &syscall.SysProcAttr{}
			}
			c.SysProcAttr.Setpgid = true
			c.SysProcAttr.Pdeathsig = syscall.SIGKILL
			cmd = c
		}))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		closed, done := context.WithTimeout(ctx, 10*time.Second)
		chromedp.Cancel(closed)
		done()
		cancel()
		cancelAlloc()
		if cmd != nil && cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := processesWith(profile)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("browser processes %v outlived the test by 10s", left)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The first run starts the browser: without a timeout, which would
	// end the browser with it; later steps are bounded (see step).
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting %s: %v", path, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start within a minute", path)
	}
	return ctx
}

// processesWith lists the processes whose command line holds s.
func processesWith(s string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && bytes.Contains(b, []byte(s)) {
			var pid int
			fmt.Sscanf(d, "/proc/%d/cmdline", &pid)
			pids = append(pids, pid)
		}
	}
	return pids
}

// step runs a browser action, bounded by d.
func step[T any](t *testing.T, ctx context.Context, d time.Duration, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// pageText is the text of the first element sel selects, "" if none.
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return step(t, ctx, 10*time.Second, "text of "+sel,
		chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel)))
}

// waitPage waits until the JavaScript expression cond holds in the page
// (bounded by a minute), and fails saying what with the page's text.
func waitPage(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the page did not show %s within a minute (%v); it shows:\n%s", what, err, pageText(t, ctx, "body"))
	}
}

var dashboardURL = regexp.MustCompile(`monarch: dashboard (http://\S+)`)

// member is the selector of a member's row, proc the one of a proc's.
func member(mesh string, rank int) string {
	return fmt.Sprintf(`tr.member[data-mesh=%q][data-rank="%d"]`, mesh, rank)
}
func proc(mesh string, rank int) string {
	return fmt.Sprintf(`tr.proc[data-mesh=%q][data-rank="%d"]`, mesh, rank)
}

// TestDashboardBrowser: the dashboard of a real job (2 hosts of 2 procs,
// the feed program), in a real browser. monarch dashboard and monarch
// status give the URL the client printed; without the token, a request
// and the browser are refused; with it, the browser gets a cookie and
// the page without the token, which shows the proc mesh workers and the
// actor mesh pingers with their members; member 0's counts grow while
// the program calls it, member 1 shows failed with its reason; a proc
// killed turns failed, proc and member, without a reload; a member's
// stack button shows its proc's stacks; the log tail takes filters. A
// screenshot is saved (MONARCH_DASHBOARD_SCREENSHOT names where: make
// docs-dashboard writes docs/dashboard.png so). Once the job ends,
// monarch dashboard says so and points to monarch logs.
func TestDashboardBrowser(t *testing.T) {
	browser := requireBrowser(t)
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	run, pids := startFeedJob(t)
	m := dashboardURL.FindStringSubmatch(run.stderr.String())
	if m == nil {
		t.Fatalf("the job printed no dashboard URL on stderr:\n%s", run.stderr.String())
	}
	withToken := m[1]
	u, err := url.Parse(withToken)
	if err != nil || u.Query().Get("token") == "" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("dashboard URL %q: %v; want a loopback address and a token", withToken, err)
	}
	base := "http://" + u.Host + "/"
	if !regexp.MustCompile(`^/[0-9a-f]{32}/$`).MatchString(u.Path) {
		t.Fatalf("dashboard URL %q: its path is not a random prefix", withToken)
	}
	page := "http://" + u.Host + u.Path

	// The commands give the same URL.
	for _, args := range [][]string{{"dashboard", run.job}, {"dashboard"}} {
		if out, stderr, code := monarch(t, args...); code != 0 || out != withToken+"\n" {
			t.Errorf("monarch %v: exit %d, %q, %s; want %s", args, code, out, stderr, withToken)
		}
	}
	if out, _, code := monarch(t, "status", run.job); code != 0 || !regexp.MustCompile(`(?m)^dashboard: +`+regexp.QuoteMeta(withToken)+`$`).MatchString(out) {
		t.Errorf("monarch status %s: exit %d, no dashboard line with the URL:\n%s", run.job, code, out)
	}

	// No token: refused.
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "monarch dashboard JOB") {
		t.Errorf("GET %s without the token: %s %q; want 401 naming monarch dashboard JOB", base, resp.Status, body)
	}

	ctx := startBrowser(t, browser)
	step(t, ctx, 30*time.Second, "open without the token", chromedp.Navigate(base))
	if text := pageText(t, ctx, "body"); !strings.Contains(text, "needs its job's token") {
		t.Errorf("the browser without the token shows %q; want the refusal", text)
	}

	// With the token: the cookie, and the page without the token.
	step(t, ctx, 30*time.Second, "open "+withToken, chromedp.Navigate(withToken))
	if loc := step(t, ctx, 10*time.Second, "location", chromedp.Location()); loc != page {
		t.Errorf("the page is at %s; want %s (the token taken out)", loc, page)
	}
	waitPage(t, ctx, "the members of pingers", fmt.Sprintf(`document.querySelectorAll('tr.member[data-mesh="pingers"]').length === 4 && !!document.querySelector(%q)`, proc("workers", 3)))
	step(t, ctx, 10*time.Second, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	if h := pageText(t, ctx, `#procmeshes h3[data-mesh="workers"]`); !strings.HasPrefix(h, "workers") || !strings.Contains(h, "gpus: 2") {
		t.Errorf("proc mesh heading %q; want workers and its extent", h)
	}
	if h := pageText(t, ctx, `#actormeshes h3[data-mesh="pingers"]`); !strings.HasPrefix(h, "pingers") || !strings.Contains(h, "Pinger") {
		t.Errorf("actor mesh heading %q; want pingers, of type Pinger", h)
	}
	if live := pageText(t, ctx, "#live"); live != "live" {
		t.Errorf("the feed's state shows %q; want live", live)
	}

	// Member 0's counts grow; member 1 failed, with its reason.
	count := func(col string) int {
		var n int
		fmt.Sscan(pageText(t, ctx, member("pingers", 0)+" td."+col), &n)
		return n
	}
	sent, handled := count("sent"), count("handled")
	waitPage(t, ctx, "member 0's counts growing", fmt.Sprintf(
		`+document.querySelector('%[1]s td.sent').textContent > %[2]d && +document.querySelector('%[1]s td.handled').textContent > %[3]d`,
		member("pingers", 0), sent, handled))
	if sent2, handled2 := count("sent"), count("handled"); sent2 <= sent || handled2 <= handled || sent == 0 {
		t.Errorf("member 0: sent %d then %d, handled %d then %d; want them to grow", sent, sent2, handled, handled2)
	}
	if st, reason := pageText(t, ctx, member("pingers", 1)+" td.state"), pageText(t, ctx, member("pingers", 1)+" td.reason"); st != "failed" || !strings.Contains(reason, "feedTestFailure") {
		t.Errorf("member 1: %q, %q; want failed, feedTestFailure", st, reason)
	}
	// The endpoints of pingers: Fail's one error, Ping's calls.
	fail := `tr.endpoint[data-mesh="pingers"][data-endpoint="Fail"]`
	if handled, errs := pageText(t, ctx, fail+" td:nth-child(2)"), pageText(t, ctx, fail+" td:nth-child(4)"); handled != "1" || errs != "1" {
		t.Errorf("endpoint Fail of pingers: handled %q, errors %q; want 1 and 1", handled, errs)
	}
	waitPage(t, ctx, "Ping's calls in its endpoint row", `+document.querySelector('tr.endpoint[data-mesh="pingers"][data-endpoint="Ping"] td:nth-child(2)').textContent > 0`)
	for _, sel := range []string{member("pingers", 0), proc("workers", 0), proc("workers", 3)} {
		if st := pageText(t, ctx, sel+" td.state"); st != "running" {
			t.Errorf("%s: %q; want running", sel, st)
		}
	}

	// A proc killed turns failed in the page, without a reload.
	if err := syscall.Kill(pids[3], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "workers 3 and pingers 3 failed", fmt.Sprintf(
		`document.querySelector('%s td.state').textContent === "failed" && document.querySelector('%s td.state').textContent === "failed"`,
		proc("workers", 3), member("pingers", 3)))
	if reloaded := !step(t, ctx, 10*time.Second, "was the page reloaded", chromedp.Evaluate[bool](`window.notReloaded === true`)); reloaded {
		t.Errorf("the page was reloaded")
	}
	if ev := pageText(t, ctx, "#events"); !strings.Contains(ev, "proc_ended") || !strings.Contains(ev, "feedTestFailure") {
		t.Errorf("events %q; want the failure of member 1 and the end of the killed proc", ev)
	}
	waitPage(t, ctx, "the log tail", `document.querySelector("#logtext").textContent.includes("READY")`)

	// The picture: the page as it is now.
	png := step(t, ctx, 30*time.Second, "screenshot", chromedp.CaptureScreenshot())
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if p := os.Getenv("MONARCH_DASHBOARD_SCREENSHOT"); p != "" {
		shot = p
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// The log tail's filters.
	step(t, ctx, 10*time.Second, "filter the log", chromedp.Evaluate[chromedp.Void](
		`document.querySelector("#logform [name=grep]").value = "PID rank=[02]"; document.querySelector("#logform button").click()`))
	waitPage(t, ctx, "the log filtered", `(t => t.includes("PID rank=0") && t.includes("PID rank=2") && !t.includes("READY") && !t.includes("PID rank=1"))(document.querySelector("#logtext").textContent)`)

	// A member's stack button.
	step(t, ctx, 20*time.Second, "press member 0's stack button", chromedp.Click(chromedp.CSS(member("pingers", 0)+" button.stacks")))
	waitPage(t, ctx, "the stacks of workers 0", `(t => t.includes("stacks of 1 of 1 procs") && t.includes("== workers 0") && t.includes("goroutine"))(document.querySelector("#stacktext").textContent)`)
	if title := pageText(t, ctx, "#stacktitle"); !strings.Contains(title, "pingers[0]") {
		t.Errorf("stack panel title %q; want pingers[0]", title)
	}

	// The job ends: the page says it lost the feed; monarch dashboard says
	// the job ended.
	if _, stderr, code := monarch(t, "stop", run.job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	run.wait(t)
	waitPage(t, ctx, "the feed lost", `document.querySelector("#live").className === "off"`)
	if _, stderr, code := monarch(t, "dashboard", run.job); code != 1 || !strings.Contains(stderr, "has ended") || !strings.Contains(stderr, "monarch logs "+run.job) {
		t.Errorf("monarch dashboard of an ended job: exit %d, %q; want 1, that it ended, monarch logs", code, stderr)
	}
	if out, _, _ := monarch(t, "status", run.job); strings.Contains(out, "dashboard:") {
		t.Errorf("monarch status of an ended job shows a dashboard:\n%s", out)
	}

	// A server of another user on another port of the same host, which
	// the browser opens: it gets none of the dashboard's cookies (the
	// browser holds one: it showed the page after the redirect).
	cookies := make(chan string, 8)
	other := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cookies <- r.URL.Path + " " + r.Header.Get("Cookie")
		io.WriteString(w, "<html><body>another user's page</body></html>")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go other.Serve(ln)
	defer other.Close()
	step(t, ctx, 30*time.Second, "open another port's page", chromedp.Navigate("http://"+ln.Addr().String()+"/"))
	if len(cookies) == 0 {
		t.Error("the server on another port got no request")
	}
	for len(cookies) > 0 {
		if got := <-cookies; strings.Contains(got, "monarch_dashboard") {
			t.Errorf("the server on another port got %q", got)
		}
	}
}

// TestDashboardConfig: a dashboard address that is taken fails the job's
// start, naming the address and where it was given ($MONARCH_DASHBOARD,
// or the job file's line); MONARCH_DASHBOARD=off leaves the job without
// one, which monarch dashboard says, naming why.
func TestDashboardConfig(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	hold := holdArgv(t)
	bin := filepath.Join(build(t), "monarch")

	run := func(env []string, args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("monarch %v did not end within 2 minutes: %s", args, stderr.String())
		}
		return stderr.String(), cmd.ProcessState.ExitCode()
	}
	stderr, code := run([]string{"MONARCH_DASHBOARD=" + taken}, append([]string{"local", "--"}, hold...)...)
	if code == 0 || !strings.Contains(stderr, "dashboard cannot listen on "+taken+" (set by $MONARCH_DASHBOARD)") || !strings.Contains(stderr, "address already in use") {
		t.Errorf("MONARCH_DASHBOARD=%s, taken: exit %d; want a failure naming it:\n%s", taken, code, stderr)
	}
	dir := t.TempDir()
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("%s\n[dashboard]\naddress = %q\n", holdLines(t), taken))
	stderr, code = run(nil, "local", job)
	if code == 0 || !strings.Contains(stderr, "dashboard cannot listen on "+taken+" (set by "+job+":5)") {
		t.Errorf("job file with [dashboard] address = %s, taken: exit %d; want a failure naming it and the file's line:\n%s", taken, code, stderr)
	}
	stderr, code = run([]string{"MONARCH_DASHBOARD=nowhere"}, append([]string{"local", "--"}, hold...)...)
	if code == 0 || !strings.Contains(stderr, `$MONARCH_DASHBOARD="nowhere": want an address host:port or off`) {
		t.Errorf("MONARCH_DASHBOARD=nowhere: exit %d; want a failure saying what it wants:\n%s", code, stderr)
	}

	h := startHold(t, []string{"MONARCH_DASHBOARD=off"}, append([]string{bin, "local", "--hosts", "1", "--"}, hold...)...)
	if strings.Contains(h.stderr.String(), "monarch: dashboard") {
		t.Errorf("MONARCH_DASHBOARD=off, yet the job printed a dashboard:\n%s", h.stderr.String())
	}
	if _, stderr, code := monarch(t, "dashboard", h.job); code != 1 || !strings.Contains(stderr, "has no dashboard: it is turned off by $MONARCH_DASHBOARD") {
		t.Errorf("monarch dashboard of a job without one: exit %d, %q", code, stderr)
	}
	if _, stderr, code := monarch(t, "stop", h.job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	h.wait(t)
}
