package hostsconfig

import (
	"os"
	"path/filepath"
	"testing"
)

// TestShip reads [ship] tables that are right: the values and the
// defaults. The wrong ones are testdata/bad/hosts-ship-*.toml.
func TestShip(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		want       Ship
	}{
		{"defaults", "scheduler = \"ssh\"\n[ssh]\nhosts = [\"h1\"]\n", Ship{}},
		{"empty table", "scheduler = \"slurm\"\n[ship]\n", Ship{}},
		{"auto", "scheduler = \"slurm\"\n[ship]\nsend = \"auto\"\n", Ship{Send: SendAuto}},
		{"always", "scheduler = \"ssh\"\n[ssh]\nhosts = [\"h1\"]\n[ship]\nsend = true\ncache = \"/scratch/monarch\"\n",
			Ship{Send: SendAlways, Cache: "/scratch/monarch"}},
		{"never", "scheduler = \"slurm\"\n[ship]\nsend = false\n", Ship{Send: SendNever}},
		{"home", "scheduler = \"slurm\"\nship.cache = \"~/bin-cache\"\n", Ship{Cache: "~/bin-cache"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "hosts.toml")
			if err := os.WriteFile(p, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := LoadHosts(p)
			if err != nil {
				t.Fatal(err)
			}
			if h.Ship != tt.want {
				t.Errorf("ship = %+v, want %+v", h.Ship, tt.want)
			}
		})
	}
}

// TestShipInline: a job file's [hosts] table takes [hosts.ship], and its
// errors name the key from the file's root.
func TestShipInline(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "job.toml")
	src := "program = \"/bin/sh\"\n[hosts]\nscheduler = \"ssh\"\nssh.hosts = [\"h1\"]\n[hosts.ship]\nsend = \"sometimes\"\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadJob(p)
	want := p + `:6: hosts.ship.send: want true (always send), false (never) or "auto" (send to hosts that lack a binary), got string "sometimes"`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}
