// Package dashboard serves a running job's live dashboard: one web page
// that shows the job as its client sees it (its hosts, proc meshes and
// actor meshes, each member's state, message counts and rates, its last
// error, the supervision events), the goroutine stacks of a member's proc
// on request, and the tail of the job's log with the filters of
// `monarch logs`.
//
// # Usage
//
// The job's client (its view of the job, internal/jobview) starts it
// beside its control socket, with a Job that answers from the client's
// own model of the job (internal/jobctl's JobState), and prints the URL
// it gives once:
//
//	tok, err := dashboard.NewToken()
//	...
//	srv, err := dashboard.Start(dashboard.Options{Addr: "127.0.0.1:0", Token: tok, Job: job})
//	...
//	fmt.Fprintln(os.Stderr, "monarch: dashboard", srv.URL())
//	...
//	srv.Close() // when the job ends
//
// # What it serves
//
// The page and its feeds live under a random path prefix P ("/" and 32
// hex digits, made at Start; URL includes it):
//
//   - P/ the page (page.html, embedded: a hand-written script and style,
//     no library, no build step), which asks for the others by relative
//     paths;
//   - P/events the job's state as Server-Sent Events: a JobState as JSON
//     at once, then one each time it changes, at most every Interval,
//     until the browser goes or the server closes;
//   - P/api/state one JobState as JSON;
//   - P/api/stacks?proc=ID (or ?mesh=M&rank=R, the proc mesh and rank)
//     the goroutine stacks of procs, grouped as `monarch stacks` prints
//     them, as text;
//   - P/api/logs?host=&mesh=&rank=&stream=&grep=&since=&n= the last n
//     (at most MaxLogLines) lines of the job's log that pass the filters
//     of `monarch logs` (logagg.Filter), as JSON;
//   - P/metrics, when Options.Metrics is set: that handler.
//
// Programs may ask for the same paths without the prefix (/api/state,
// /metrics for a Prometheus scrape), with the token as Bearer.
//
// # Access
//
// Every path needs the job's token, a secret the client makes at start
// (NewToken): the URL printed is http://ADDR/P/?token=T. A request bearing
// a valid token in its query, on any path, gets a cookie and is
// redirected to the same page under P without the token; later requests
// under P show the cookie, and requests on any path may show an
// Authorization: Bearer T header (a Prometheus scrape). Anything else is
// refused (401) with one line saying that the job's token is needed and
// that `monarch dashboard JOB` prints the address with it.
//
// The cookie is useless to any other server of the host. A browser sends
// a host's cookies to every port of it, and SameSite counts another port
// of the same host as the same site, so a cookie of path / would reach a
// server that another user runs on another port, once the browser opens
// it. The cookie's path is P, which only holders of the token learn, so
// the browser sends it to no other path on no port; and its value is an
// HMAC of the port under the token, not the token, so that a cookie that
// leaks anyway opens this dashboard's pages only. It is HttpOnly and
// SameSite=Strict, and named after the port, so that two jobs'
// dashboards on one host keep theirs. Tokens, cookies and the prefix are
// compared in constant time. The default address is loopback; an address
// on other interfaces still needs the token, and the traffic is plain
// HTTP: a tunnel (ssh -L) is the way to see a remote job's dashboard
// without sending the token in the clear.
//
// # Bounds
//
// Every wait is bounded: the server's read, header and idle timeouts;
// each write of the event stream has its own deadline; at most MaxStreams
// event streams and MaxHeavy stack or log requests run at once (more are
// refused: 503); a state is asked with StateTimeout, stacks with
// StacksTimeout, a log read with LogsTimeout. Close ends the event
// streams, stops the server and waits for it. A Server is safe for
// concurrent use.
package dashboard
