// Command secret is the job program of the capture tests
// (cluster_tls_test.go). The client writes the job's bus token, from its
// environment as the launcher gave it, to -token-file; reads a string
// from -arg-file (on this machine, so that it reaches the hosts by the
// bus alone); spawns a proc on every host and calls each proc's Echo with
// the string, which prints a line made from it ("logged <sha256 of the
// string>", a log line that goes to the launcher by the bus) and returns
// the string's length. It prints "ECHOED <n>" once every proc answered.
// Then the first proc fills a one-sided buffer with "buffer <sha256 of
// "buffer" and the string>" and every proc reads it (across hosts, by
// the buffer's TCP path when MONARCH_RDMA_BACKEND=tcp), answering only
// the sha256 of what it read and the backend: the buffer's bytes cross
// between hosts by that path alone. It prints "READ <n> <backends>" once
// every proc read the right bytes.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/ibverbs"
)

type Echo struct{ buf *ibverbs.Buffer }

func (e *Echo) Echo(ctx *actorrt.Context, s string) (int, error) {
	fmt.Printf("logged %x\n", sha256.Sum256([]byte(s)))
	return len(s), nil
}

// BufferText is what the first proc's buffer holds for s.
func BufferText(s string) string { return fmt.Sprintf("buffer %x", sha256.Sum256([]byte("buffer"+s))) }

func (e *Echo) Hold(ctx *actorrt.Context, s string) (ibverbs.Handle, error) {
	text := BufferText(s)
	b, err := ibverbs.NewBuffer(len(text))
	if err != nil {
		return ibverbs.Handle{}, err
	}
	copy(b.Bytes(), text)
	e.buf = b
	return b.Handle(), nil
}

func (e *Echo) Read(ctx *actorrt.Context, h ibverbs.Handle) (string, error) {
	got := make([]byte, h.Size)
	if err := h.ReadAt(ctx, got, 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x %s", sha256.Sum256(got), h.Backend()), nil
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
		first, err := actorrt.Method1((*Echo).Hold).CallOne(echo.Slice("hosts", 0, 1), strings.TrimSpace(string(arg))).Get(ctx)
		if err != nil {
			return err
		}
		read, err := actorrt.Method1((*Echo).Read).Call(echo, first).Get(ctx)
		if err != nil {
			return err
		}
		want := fmt.Sprintf("%x", sha256.Sum256([]byte(BufferText(strings.TrimSpace(string(arg))))))
		var backends []string
		for p, r := range read.Items() {
			sum, backend, _ := strings.Cut(r, " ")
			if sum != want {
				return fmt.Errorf("proc %v read other bytes from the buffer", p)
			}
			backends = append(backends, backend)
		}
		fmt.Printf("READ %d %s\n", read.Len(), strings.Join(backends, ","))
		return nil
	})
}
