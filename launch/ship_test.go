package launch

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/monarch-go/monarch/hostsconfig"
)

// TestNewShipment: what a job sends, by [ship] send, the scheduler, the
// monarch key and the kind of job.
func TestNewShipment(t *testing.T) {
	dir := t.TempDir()
	self, program := filepath.Join(dir, "monarch"), filepath.Join(dir, "train")
	for _, p := range []string{self, program} {
		if err := os.WriteFile(p, []byte(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ssh := func(ship hostsconfig.Ship, monarch string) *hostsconfig.Hosts {
		return &hostsconfig.Hosts{Scheduler: hostsconfig.SchedulerSSH, SSH: &hostsconfig.SSH{Hosts: []string{"h1"}, Monarch: monarch}, Ship: ship}
	}
	sdk := &hostsconfig.Job{Program: program}
	spmd := &hostsconfig.Job{SPMD: &hostsconfig.SPMD{Command: []string{"python3", "train.py"}}}
	for _, tt := range []struct {
		name  string
		hosts *hostsconfig.Hosts
		job   *hostsconfig.Job
		want  []string // roles, in order; nil: nothing sent
	}{
		{"auto", ssh(hostsconfig.Ship{}, ""), sdk, []string{"monarch", "program"}},
		{"never", ssh(hostsconfig.Ship{Send: hostsconfig.SendNever}, ""), sdk, nil},
		{"monarch on the hosts", ssh(hostsconfig.Ship{}, "/opt/monarch"), sdk, []string{"program"}},
		{"always sends monarch anyway", ssh(hostsconfig.Ship{Send: hostsconfig.SendAlways}, "/opt/monarch"), sdk, []string{"monarch", "program"}},
		{"spmd: the command is the hosts'", ssh(hostsconfig.Ship{}, ""), spmd, []string{"monarch"}},
		{"spmd, monarch on the hosts", ssh(hostsconfig.Ship{}, "/opt/monarch"), spmd, nil},
		{"local", &hostsconfig.Hosts{Scheduler: hostsconfig.SchedulerLocal, Local: &hostsconfig.Local{Hosts: 2}}, sdk, nil},
		{"no hosts file", nil, sdk, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			monarch := self
			if tt.hosts != nil && tt.hosts.SSH != nil && tt.hosts.SSH.Monarch != "" {
				monarch = tt.hosts.SSH.Monarch
			}
			s, err := newShipment(&RunConfig{Hosts: tt.hosts, Job: tt.job, Self: self, Monarch: monarch}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var roles []string
			if s != nil {
				roles = s.roles
			}
			if !slices.Equal(roles, tt.want) {
				t.Fatalf("sends %v, want %v", roles, tt.want)
			}
			for i, role := range roles {
				want := map[string][2]string{"monarch": {self, monarch}, "program": {program, program}}[role]
				if s.bins[i].Path != want[0] || s.paths[i] != want[1] {
					t.Errorf("%s: from %s to %s, want from %s to %s", role, s.bins[i].Path, s.paths[i], want[0], want[1])
				}
			}
		})
	}
	_, err := newShipment(&RunConfig{Hosts: ssh(hostsconfig.Ship{}, ""), Job: &hostsconfig.Job{Program: filepath.Join(dir, "gone")}, Self: self, Monarch: self}, io.Discard)
	if err == nil {
		t.Error("a program that is not there was taken")
	}
}

// TestShipmentUse: each host runs the paths shipping found for it; one
// row serves all hosts (Slurm); nothing shipped leaves the paths.
func TestShipmentUse(t *testing.T) {
	s := &shipment{roles: []string{"monarch", "program"}}
	m, p := "/opt/monarch", "/x/train"
	s.use(0, &m, &p)
	if m != "/opt/monarch" || p != "/x/train" {
		t.Errorf("before shipping: %s %s", m, p)
	}
	s.at = [][]string{{"/c/1/monarch", "/x/train"}, {"/c/1/monarch", "/c/2/train"}}
	s.use(1, &m, &p)
	if m != "/c/1/monarch" || p != "/c/2/train" {
		t.Errorf("host 1: %s %s", m, p)
	}
	s.at = s.at[:1]
	m, p = "", ""
	s.use(5, &m, &p)
	if m != "/c/1/monarch" || p != "/x/train" {
		t.Errorf("one row: %s %s", m, p)
	}
	var none *shipment
	none.use(0, &m, &p)
}
