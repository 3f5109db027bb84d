// Package cli is the monarch command: run, local, status, stop, clean,
// logs, stacks, dashboard, profile, exec, top, config, and the hidden
// agent and spmd that launchers start. The repository's main.go is a
// few lines calling Main.
//
// It is internal: the command line is monarch's interface to users, not
// an API for other programs; they import actorrt and launch. Its unit
// tests run the app in-process (runCLI); the tests that run the built
// binary as users do are in systest. Inside the package, cli names
// urfave/cli/v2, the library the command is built on.
package cli
