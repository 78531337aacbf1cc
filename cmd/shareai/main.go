// Command shareai is ShareAI's one binary: the coordinator, the provider agent, a whole local
// network, and the tools around them.
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
	_ "time/tzdata" // providers' time zones on machines without a zone database (Windows)
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"up", "run a whole network on this machine: a coordinator and simulated providers", runUp},
	{"coordinator", "run the coordinator: the buyers' OpenAI-compatible API and the agents' hub", runCoordinator},
	{"provider", "run the provider agent next to a GPU and its inference engine", runProvider},
	{"keys", "create, list and revoke buyers' API keys and providers' tokens", runKeys},
	{"admin", "credit buyers, pay providers out, set spend caps, list accounts", runAdmin},
	{"bench", "load a network with requests and report throughput, latency and errors", runBench},
	{"simulate", "simulate the market in virtual time, or forecast a provider's earnings", runSimulate},
	{"receipt", "check the signed receipts of your requests, offline", runReceipt},
	{"version", "print the version", runVersion},
}

func usage(w io.Writer) {
	fmt.Fprint(w, `ShareAI: a decentralized GPU network for AI inference.

Usage: shareai <command> [flags]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'shareai <command> --help' for a command's flags.\n")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		}
		fmt.Fprintf(stderr, "shareai %s: %v\n", c.name, err)
		return 1
	}
	fmt.Fprintf(stderr, "shareai: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage means the flags were wrong and the flag package has said so.
var errUsage = errors.New("usage")

// parse parses a subcommand's flags, taking defaults from the environment first.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer, about string) error {
	fs.SetOutput(stderr)
	if err := bindEnv(fs); err != nil {
		return err
	}
	return parseArgs(fs, args, stderr, about)
}

// parseArgs parses a subcommand's flags, without the environment.
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer, about string) error {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage: shareai %s [flags]\n\nFlags:\n", about, fs.Name())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parse(fs, args, stderr, "Print the version of this shareai binary."); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "shareai %s\n", version)
	return nil
}
