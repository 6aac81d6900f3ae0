// Command edictkv is the replicated key-value server built on edictlog,
// and its client.
//
//	edictkv dev                      a local 3-node cluster in one process
//	edictkv serve --id 1 ...         one server process
//	edictkv get|put|del|cas|watch .. client subcommands (see docs/edictkv.md)
//
// Every flag can also be set with an environment variable: EDICTKV_ and
// the flag's name in upper case with '-' as '_' (--data-dir is
// EDICTKV_DATA_DIR). A flag on the command line wins.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
)

type command struct {
	name, args, help string
	run              func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "[flags]", "run one server process", runServe},
		{"dev", "[flags]", "run a local 3-node cluster in this process, data in a temporary folder", runDev},
		{"get", "<key>", "read a key", runGet},
		{"put", "<key> [value]", "write a key (the value from stdin if not given)", runPut},
		{"del", "<key>", "delete a key", runDel},
		{"cas", "<key> <value> (--index N | --prev V)", "compare-and-swap", runCAS},
		{"watch", "<key> [--prefix] [--rev N]", "print a key's changes as they come; resumes through another --addr", runWatch},
		{"members", "", "show the cluster's members, leader and indexes", runMembers},
		{"status", "", "show one node's own status", runStatus},
		{"transfer-leader", "[--to id]", "hand leadership to another member", runTransfer},
		{"add-learner", "--id N --raft-addr A --http-addr B", "add a process as a learner", runAddLearner},
		{"promote", "--id N", "make a caught-up learner a member", runPromote},
		{"remove", "--id N", "take a member or learner out of the cluster", runRemove},
		{"recover", "--survivors 1,2 --confirm", "UNSAFE forced recovery after a quorum is lost for good", runRecover},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage reports a usage error already explained to the user.
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			}
			fmt.Fprintf(stderr, "edictkv %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "edictkv: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: edictkv <command> [flags] [args]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %-40s %s\n", c.name, c.args, c.help)
	}
	fmt.Fprintln(w, "\nEvery flag may be set as EDICTKV_<FLAG> (e.g. EDICTKV_ADDR, EDICTKV_DATA_DIR). 'edictkv <command> -h' lists a command's flags.")
}

// newFlags returns a flag set whose flags, once defined, take defaults
// from EDICTKV_* variables (applyEnv).
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("edictkv "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func envName(flagName string) string {
	return "EDICTKV_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse applies the environment, then the command line, so that a flag
// given on the command line wins over its variable.
func parse(fs *flag.FlagSet, args []string) error {
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				bad = append(bad, fmt.Sprintf("%s=%q: %v", envName(f.Name), v, err))
			}
		}
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("bad environment: %s", strings.Join(bad, "; "))
	}
	// Flags may come before, between or after the positional arguments
	// (edictkv cas k v --prev old): parse, set aside one positional
	// argument, parse the rest again. After "--" everything is positional.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// newLogger builds the slog logger of --log-format and --log-level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
