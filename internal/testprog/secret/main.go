// Command secret is the job program of the capture tests
// (cluster_tls_test.go). The client writes the job's bus token, from its
// environment as the launcher gave it, to -token-file; reads a string
// from -arg-file (on this machine, so that it reaches the hosts by the
// bus alone); spawns a proc on every host and calls each proc's Echo with
// the string, which prints a line made from it ("logged <sha256 of the
// string>", a log line that goes to the launcher by the bus) and returns
// the string's length. It prints "ECHOED <n>" once every proc answered.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/monarch-go/monarch/actorrt"
)

type Echo struct{}

func (e *Echo) Echo(ctx *actorrt.Context, s string) (int, error) {
	fmt.Printf("logged %x\n", sha256.Sum256([]byte(s)))
	return len(s), nil
}

func main() {
	tokenFile := flag.String("token-file", "", "where the client writes the job's bus token")
	argFile := flag.String("arg-file", "", "the string to send")
	flag.Parse()
	if err := actorrt.Register[Echo](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *tokenFile != "" {
		// Before Main, which takes the token out of the environment.
		if err := os.WriteFile(*tokenFile, []byte(os.Getenv("MONARCH_BUS_TOKEN")), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	actorrt.Main(func(ctx context.Context) error {
		arg, err := os.ReadFile(*argFile)
		if err != nil {
			return err
		}
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"procs", 1}})
		if err != nil {
			return err
		}
		echo, err := actorrt.Spawn[Echo](ctx, procs, "echo")
		if err != nil {
			return err
		}
		got, err := actorrt.Method1((*Echo).Echo).Call(echo, strings.TrimSpace(string(arg))).Get(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("ECHOED %d\n", got.Len())
		return nil
	})
}
