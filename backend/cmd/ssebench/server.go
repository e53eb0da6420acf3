package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	sse "github.com/r3labs/sse/v2"

	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

// serveMode is the child process: the real pipeline (embedded bbolt store →
// projections runner → memory read model) feeding either Slotkeeper's hub
// or r3labs' server in its default configuration. It reads commands on
// stdin and answers on stdout:
//
//	rate N   append N OccupancyExtended events per second (0 stops)
//	rss      garbage-collect, then print "RSS <kB> <goroutines>"
//	once     append one OccupancyExtended now
//	cpu      print "CPU <µs of user + system time so far>"
//	quit     exit
//
// and prints "ADDR host:port" when ready and "EVICT <unix ns> <reason>" for
// each client the hub disconnects.
func serveMode(impl, storeKind string, nslots, maxClients int) error {
	if p := os.Getenv("SSEBENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(fmt.Sprintf("%s.%s.%d", p, impl, os.Getpid()))
		if err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	dir, err := os.MkdirTemp("", "ssebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var store events.Store = memstore.New()
	if storeKind == "bolt" {
		bs, err := boltstore.Open(dir, boltstore.Options{})
		if err != nil {
			return err
		}
		store = bs
	}
	defer store.Close()
	rm := memory.New(store)
	runner := projections.NewRunner(store, rm, projections.RunnerOptions{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := make(chan string, 1024)
	go func() {
		for l := range out {
			fmt.Println(l)
		}
	}()

	var handler http.Handler
	switch impl {
	case "hub":
		hub := httpapi.NewHub(httpapi.HubOptions{MaxClients: maxClients, OnEvict: func(reason string) {
			select {
			case out <- fmt.Sprintf("EVICT %d %s", time.Now().UnixNano(), reason):
			default:
			}
		}}, nil, quiet)
		started := make(chan struct{})
		go hub.Follow(ctx, runner, rm, started)
		<-started
		e := echo.New()
		e.GET("/api/stream", hub.ServeStream)
		handler = e
	case "r3labs":
		s := sse.New() // the default configuration: AutoReplay on, 1024-event stream buffer
		s.CreateStream("changes")
		sub := runner.Subscribe(1 << 16)
		go func() {
			for ch := range sub.C {
				data, _ := json.Marshal(ch)
				s.Publish("changes", &sse.Event{ID: []byte(strconv.FormatUint(uint64(ch.Position), 10)), Event: []byte("change"), Data: data})
			}
		}()
		mux := http.NewServeMux()
		mux.Handle("/api/stream", s)
		handler = mux
	default:
		return fmt.Errorf("unknown --impl %q", impl)
	}
	go runner.Run(ctx)

	svc := slots.NewService(store, slots.Config{Logger: quiet})
	a := slots.Actor{Name: "bench", CorrelationID: "bench"}
	names := make([]string, nslots)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%d", i)
		err := svc.Register(ctx, a, slots.RegisterCmd{Name: names[i], ProjectUUID: "p" + strconv.Itoa(i), AppUUID: "a" + strconv.Itoa(i), DBUUID: "d" + strconv.Itoa(i),
			Repo: eventsRepo("SLOT", names[i]), TemplateRepo: eventsRepo("TPL", "template"), TemplateRef: "main"})
		if err != nil {
			return err
		}
		if err := svc.Occupy(ctx, a, names[i], slots.OccupyCmd{By: "bench", Until: time.Now().Add(time.Hour)}); err != nil {
			return err
		}
	}
	head, _ := store.Head(ctx)
	if err := runner.WaitFor(ctx, head); err != nil {
		return err
	}

	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// Both servers get the same socket send buffer (the hub also sets it
	// per stream), so a stalled client shows within seconds for both.
	ln := sndbufListener{tl}
	srv := &http.Server{Handler: handler, ConnContext: httpapi.ConnContext, ErrorLog: slog.NewLogLogger(quiet.Handler(), slog.LevelError)}
	go srv.Serve(ln)
	out <- "ADDR " + ln.Addr().String()

	var rate, appended atomic.Int64
	wake := make(chan struct{}, 1)
	go func() { // the appender
		n := 0
		for {
			r := rate.Load()
			if r <= 0 {
				select {
				case <-wake:
					continue
				case <-ctx.Done():
					return
				}
			}
			tick := time.NewTicker(time.Second / time.Duration(r))
			for rate.Load() == r {
				select {
				case <-tick.C:
				case <-wake:
					continue
				case <-ctx.Done():
					tick.Stop()
					return
				}
				n++
				if svc.Extend(ctx, a, names[n%len(names)], slots.ExtendCmd{Until: time.Now().Add(time.Hour + time.Duration(n)*time.Millisecond)}) == nil {
					appended.Add(1)
				}
			}
			tick.Stop()
		}
	}()

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "rate":
			n, _ := strconv.Atoi(f[1])
			rate.Store(int64(n))
			select {
			case wake <- struct{}{}:
			default:
			}
			// The answer counts the events appended since the last command.
			out <- fmt.Sprintf("OK %d", appended.Swap(0))
		case "rss":
			runtime.GC()
			debug.FreeOSMemory()
			out <- fmt.Sprintf("RSS %d %d", rssKB(), runtime.NumGoroutine())
		case "once":
			// One change, now: the idle test's "one change reaches all".
			if err := svc.Extend(ctx, a, names[0], slots.ExtendCmd{Until: time.Now().Add(2 * time.Hour)}); err != nil {
				out <- "ERR " + err.Error()
				continue
			}
			out <- "OK once"
		case "cpu":
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			out <- fmt.Sprintf("CPU %d", (ru.Utime.Nano()+ru.Stime.Nano())/1000)
		case "quit":
			return nil
		}
	}
	return nil
}

// rssKB reads this process's resident set size.
func rssKB() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return -1
}

// sndbufListener caps SO_SNDBUF of every accepted connection at 32 KiB.
type sndbufListener struct{ net.Listener }

func (l sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(32 << 10)
	}
	return c, err
}
