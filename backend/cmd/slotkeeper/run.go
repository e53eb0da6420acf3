package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a runtime failure, or verify found a difference
	exitUsage  = 2 // bad command line or configuration
)

const usage = `usage: slotkeeper <command> [flags]

commands:
  serve          run the server (the default when no command is given)
  replay         rebuild the read models from the event log and report
  verify         rebuild the read models and compare them with the live ones
  watch [slot]   follow a server's live stream, one line per event
  sim            the simulated Coolify, Bitbucket and git as their own process
  backup         write a consistent backup archive (stopped --data, or --server)
  restore        restore a backup archive into an empty --data, then verify it
  export         write the event log as NDJSON (resumable with --from)
  import         load an NDJSON export into an empty store
  admin          create-user / create-token on a stopped server's store
  doctor         read-only checks of the configured providers, each with its fix
  help           this text

Run "slotkeeper <command> -h" for the flags of a command.
`

// Run runs one command and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, osEnv, stdout, stderr, nil)
}

// runWith is Run with an injectable environment and, for serve, a channel
// told the listening address.
func runWith(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer, ready chan<- string) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		var c Config
		if c, err = parseServe(args, env, stderr); err == nil {
			err = serve(ctx, c, stdout, stderr, ready)
		}
	case "replay":
		err = replayCmd(ctx, args, env, stdout, stderr)
	case "verify":
		err = verifyCmd(ctx, args, env, stdout, stderr)
	case "watch":
		err = watchCmd(ctx, args, env, stdout, stderr)
	case "sim":
		err = simCmd(ctx, args, env, stdout, stderr, ready)
	case "backup":
		err = backupCmd(ctx, args, env, stdout, stderr)
	case "restore":
		err = restoreCmd(ctx, args, env, stdout, stderr)
	case "export":
		err = exportCmd(ctx, args, env, stdout, stderr)
	case "import":
		err = importCmd(ctx, args, env, stdout, stderr)
	case "admin":
		err = adminCmd(ctx, args, env, stdout, stderr)
	case "doctor":
		err = doctorCmd(ctx, args, env, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "slotkeeper: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	var ce *ConfigError
	var diff *diffError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "slotkeeper %s: %v\n", cmd, err)
		return exitUsage
	case errors.As(err, &diff):
		fmt.Fprintf(stderr, "slotkeeper %s: %v\n", cmd, err)
		return exitFailed
	case isUsage(err):
		fmt.Fprintf(stderr, "slotkeeper %s: %v\n", cmd, err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "slotkeeper %s: %v\n", cmd, err)
		return exitFailed
	}
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u) || strings.HasPrefix(err.Error(), "flag provided but not defined") ||
		strings.HasPrefix(err.Error(), "invalid value") || strings.Contains(err.Error(), "takes no arguments")
}
