package hostsconfig

import (
	"fmt"
	"net"
	"strconv"
)

// Dashboard is a job's [dashboard] table: where the job's client serves
// the job's live dashboard (a web page behind the job's token).
type Dashboard struct {
	// Address is the host:port the dashboard listens on (port 0: a free
	// one), DashboardOff when the file turns it off (enabled = false), or
	// "" when the file says nothing: then $MONARCH_DASHBOARD, or
	// DefaultDashboardAddress.
	Address string
	// At is where the file sets it, as "job.toml:12"; "" when it does not.
	At string
}

// DashboardOff is Dashboard.Address (and the value of $MONARCH_DASHBOARD)
// that turns the dashboard off.
const DashboardOff = "off"

// DefaultDashboardAddress is where a job's dashboard listens unless told:
// a free port on the loopback interface.
const DefaultDashboardAddress = "127.0.0.1:0"

// CheckDashboardAddress checks a dashboard address: host:port, the host
// a name or an IP address (empty: every interface), the port a number
// from 0 (a free one) to 65535.
func CheckDashboardAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, such as %s or 0.0.0.0:8080, got %q", DefaultDashboardAddress, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("want a port from 0 (a free one) to 65535, got %q", port)
	}
	if len(host) > 255 || !validHostChars(host) {
		return fmt.Errorf("want a host name or IP address, got %q", host)
	}
	return nil
}

func validHostChars(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(isBareKeyByte(c) || c == '.' || c == ':' || c == '%') {
			return false
		}
	}
	return true
}

// readDashboard reads a job's [dashboard] table.
func readDashboard(t *table) Dashboard {
	t.unknown("enabled", "address")
	var d Dashboard
	on := true
	if t.boolean("enabled", &on) && !on {
		if t.has("address") {
			t.fail("address", "the dashboard is turned off (enabled = false): remove one of the two")
		}
		return Dashboard{Address: DashboardOff, At: t.where("enabled")}
	}
	var addr string
	if t.str("address", &addr) {
		if err := CheckDashboardAddress(addr); err != nil {
			t.fail("address", "%v", err)
			return d
		}
		d = Dashboard{Address: addr, At: t.where("address")}
	}
	return d
}
