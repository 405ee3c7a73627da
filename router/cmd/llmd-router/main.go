// Command llmd-router is the prefix-cache-aware router for vLLM fleets, with
// two companions that share its code: a simulated vLLM fleet (sim) and the A/B
// benchmark that compares routing policies on it (bench).
//
//	llmd-router serve [flags]   route OpenAI-compatible requests to the fleet
//	llmd-router sim [flags]     serve simulated vLLM replicas (HTTP + KV events)
//	llmd-router bench [flags]   run the A/B benchmark of routing policies
//	llmd-router version         print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmd-dev/terraform-provider-llmd/internal/bench"
	"github.com/llmd-dev/terraform-provider-llmd/internal/buildinfo"
	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"serve": {"route OpenAI-compatible requests to the fleet by cached prefix and load", serveCommand},
	"sim":   {"serve simulated vLLM replicas (OpenAI HTTP, /metrics, KV events over ZeroMQ)", sim.Command},
	"bench": {"run the A/B benchmark of routing policies on the simulated fleet", bench.Command},
	"version": {"print the version, commit and Go release of this build", func(_ context.Context, _ []string, stdout, _ io.Writer) error {
		_, err := fmt.Fprintln(stdout, buildinfo.Program("llmd-router"))
		return err
	}},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and maps its outcome to an exit code:
// 0 success, 2 usage error, 1 any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "llmd-router: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0 // the flag set has printed the subcommand's usage
	default:
		fmt.Fprintf(stderr, "llmd-router %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: llmd-router <command> [flags]\n\ncommands:")
	for _, name := range []string{"serve", "sim", "bench", "version"} {
		fmt.Fprintf(w, "  %-8s %s\n", name, commands[name].summary)
	}
}
