package hostsconfig

import (
	"strings"
	"testing"
)

// TestDescribeDashboard: a job file's [dashboard] is described with the
// line that sets it; a file without one says nothing of it.
func TestDescribeDashboard(t *testing.T) {
	for file, want := range map[string]string{
		"job-dashboard.toml":     "\ndashboard: served on 0.0.0.0:8080, behind the job's token (testdata/good/job-dashboard.toml:5)",
		"job-dashboard-off.toml": "\ndashboard: off (testdata/good/job-dashboard-off.toml:4)",
		"job-minimal.toml":       "",
	} {
		j, err := LoadJob("testdata/good/" + file)
		if err != nil {
			t.Fatal(err)
		}
		d := j.Describe()
		if want == "" && strings.Contains(d, "dashboard") || want != "" && !strings.HasSuffix(d, want) {
			t.Errorf("%s: described as\n%s\nwant it to end with %q", file, d, want)
		}
	}
}

// TestCheckDashboardAddress: what $MONARCH_DASHBOARD and [dashboard]
// address take.
func TestCheckDashboardAddress(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:0": true, "0.0.0.0:8080": true, ":8080": true, "[::1]:9000": true, "node-3.cluster:80": true,
		"localhost": false, "127.0.0.1:": false, "127.0.0.1:65536": false, "127.0.0.1:-1": false, "a b:80": false,
		"127.0.0.1:http": false, "": false, "x/y:80": false,
	} {
		if err := CheckDashboardAddress(addr); (err == nil) != ok {
			t.Errorf("%q: %v; want ok %v", addr, err, ok)
		}
	}
}
