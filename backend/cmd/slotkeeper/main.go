// Command slotkeeper runs the Slotkeeper server and its tools:
//
//	slotkeeper [serve] [flags]    the server (default command)
//	slotkeeper replay [flags]     rebuild the read models from the log
//	slotkeeper verify [flags]     prove a rebuild equals the live read model
//	slotkeeper watch [slot]       follow the live stream in a terminal
//
// main only installs signal handling; Run does the work so that tests can
// run the real thing on port 0 with a temporary data directory.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
