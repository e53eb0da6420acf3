package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// simCmd runs the simulated Coolify, Bitbucket and git as their own
// process, so several `serve` processes act on one simulated world:
//
//	slotkeeper sim [--addr localhost:9090] [--data ./simdata] [--coolify-token T] [--bitbucket-token T] …
//
// Everything is on one address: Coolify under /api/v1, the fault and
// request controls under /sim/, Bitbucket REST and git elsewhere. Tokens
// come from the flags (or their -file variants and variables); missing ones
// are generated and printed once on stdout. State lives under --data.
func simCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		addr, data, public, ctok, btok, ctokFile, btokFile string
		deleteDelay                                        time.Duration
	)
	fs.StringVar(&addr, "addr", "localhost:9090", "listen address of the simulators (all on one port)")
	fs.StringVar(&data, "data", "./simdata", "directory of the simulated state (state.json and the bare git repositories)")
	fs.StringVar(&public, "public-url", "", "base URL clients reach the simulators at (default http://<addr>)")
	fs.StringVar(&ctok, "coolify-token", "", "token the simulated Coolify accepts (empty: generated and printed)")
	fs.StringVar(&btok, "bitbucket-token", "", "token the simulated Bitbucket and git accept (empty: generated and printed)")
	fs.StringVar(&ctokFile, "coolify-token-file", "", "file holding --coolify-token")
	fs.StringVar(&btokFile, "bitbucket-token-file", "", "file holding --bitbucket-token")
	fs.DurationVar(&deleteDelay, "delete-delay", 300*time.Millisecond, "how long a queued delete takes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: slotkeeper sim [flags]\n\n")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("sim takes no arguments, got %q", fs.Args())}
	}
	if err := applyEnv(fs, env); err != nil {
		return err
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return cfgErr("addr", "not host:port")
	}
	if public != "" {
		if err := httpURL(public); err != nil {
			return cfgErr("public-url", "%v", err)
		}
	}
	for _, f := range []struct {
		name string
		path string
		v    *string
	}{{"coolify-token", ctokFile, &ctok}, {"bitbucket-token", btokFile, &btok}} {
		if f.path == "" {
			continue
		}
		if *f.v != "" {
			return cfgErr(f.name+"-file", "give either --%s or --%s-file, not both", f.name, f.name)
		}
		b, err := os.ReadFile(f.path)
		if err != nil || strings.TrimSpace(string(b)) == "" {
			return cfgErr(f.name+"-file", "cannot read a token from %s", f.path)
		}
		*f.v = strings.TrimRight(string(b), "\r\n")
	}
	s, err := sim.Start(ctx, sim.Options{
		Addr: addr, PublicURL: public, StateDir: data, DeleteDelay: deleteDelay,
		CoolifyToken: ctok, BitbucketToken: btok,
	})
	if err != nil {
		if errors.Is(err, sim.ErrBadState) {
			return cfgErr("data", "%v", err)
		}
		return fmt.Errorf("start the simulators: %w", err)
	}
	defer s.Close()
	fmt.Fprintf(stdout, "slotkeeper sim: coolify %s bitbucket %s control %s/sim/ (state: %s)\n",
		s.CoolifyURL(), s.BitbucketURL(), s.BitbucketURL(), data)
	// Generated tokens are shown once, here, so the serve processes can be
	// given them; given ones are never printed.
	if ctok == "" {
		fmt.Fprintf(stdout, "coolify token (generated): %s\n", s.CoolifyToken())
	}
	if btok == "" {
		fmt.Fprintf(stdout, "bitbucket token (generated): %s\n", s.BitbucketToken())
	}
	if ready != nil {
		ready <- strings.TrimPrefix(s.BitbucketURL(), "http://")
	}
	<-ctx.Done()
	return nil
}
