// Command kurrentfake runs the test-only fake KurrentDB node as its own
// process, for trying `slotkeeper serve` against "KurrentDB" without Docker and
// for multi-process tests:
//
//	go run ./events/kurrent/kurrentfake/cmd/kurrentfake -addr 127.0.0.1:2113
//
// It prints "kurrentfake listening on esdb://ADDR?tls=false" once ready and
// serves until SIGINT or SIGTERM. Data is in memory and lost on exit. It is
// not a database; see package kurrentfake.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback host:port to listen on (port 0: any free port)")
	version := flag.String("version", "26.1", "the KurrentDB version whose append size limits it enforces: 26.1 (also 25.1+) or 25.0")
	flag.Parse()
	v := kurrentfake.V26_1
	switch *version {
	case "26.1", "25.1":
	case "25.0":
		v = kurrentfake.V25_0
	default:
		fmt.Fprintf(os.Stderr, "kurrentfake: -version %q: want 26.1 or 25.0\n", *version)
		os.Exit(2)
	}
	if host, _, _ := strings.Cut(*addr, ":"); host != "127.0.0.1" && host != "localhost" {
		fmt.Fprintf(os.Stderr, "kurrentfake: -addr %q: only loopback addresses are allowed (it has no auth)\n", *addr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := kurrentfake.StartOn(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer srv.Close()
	srv.SetVersion(v)
	fmt.Printf("kurrentfake listening on %s\n", srv.ConnString())
	<-ctx.Done()
}
