package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	sse "github.com/r3labs/sse/v2"

	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/projections"
)

// watchCmd follows GET /api/stream with r3labs' client and prints one line
// per event (optionally only those of one slot). It resumes after drops
// with Last-Event-ID, so no step is missed or printed twice.
func watchCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://localhost:8080", "the slotkeeper server to follow")
	retry := fs.Duration("retry", time.Second, "wait between reconnects")
	token := fs.String("token", "", "API token (slotkeeper admin create-token; or SLOTKEEPER_TOKEN)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: slotkeeper watch [flags] [slot]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyEnv(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return &usageError{"watch takes at most one slot name"}
	}
	slot := fs.Arg(0)
	if err := httpURL(*server); err != nil {
		return cfgErr("server", "%v", err)
	}
	if *retry <= 0 {
		return cfgErr("retry", "must be positive")
	}
	u := strings.TrimRight(*server, "/") + "/api/stream"
	if _, err := url.Parse(u); err != nil {
		return cfgErr("server", "%v", err)
	}
	p := &printer{out: stdout, slot: slot}
	client := httpapi.NewStreamClient(ctx, u, &http.Client{}, *retry)
	if *token != "" {
		client.Headers["Authorization"] = "Bearer " + *token
	}
	client.ReconnectNotify = func(err error, wait time.Duration) {
		fmt.Fprintf(stderr, "watch: %v; reconnecting in %s\n", err, wait)
	}
	err := client.SubscribeWithContext(ctx, "", p.handle)
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("stream ended")
	}
	return err
}

// printer renders frames as lines.
type printer struct {
	out  io.Writer
	slot string
}

func (p *printer) handle(ev *sse.Event) {
	switch string(ev.Event) {
	case "snapshot":
		var s struct {
			Position uint64                 `json:"position"`
			Slots    []projections.SlotView `json:"slots"`
		}
		if json.Unmarshal(ev.Data, &s) != nil {
			return
		}
		fmt.Fprintf(p.out, "snapshot at position %d: %d slots\n", s.Position, len(s.Slots))
		for _, v := range s.Slots {
			if p.slot == "" || v.Name == p.slot {
				fmt.Fprintln(p.out, "  "+slotLine(v))
			}
		}
	case "change":
		var ch projections.Change
		if json.Unmarshal(ev.Data, &ch) != nil {
			return
		}
		if ch.Audit == nil {
			return
		}
		a := ch.Audit
		if p.slot != "" && a.Slot != p.slot {
			return
		}
		who := a.Actor
		if who == "" {
			who = "-"
		}
		fmt.Fprintf(p.out, "%s #%d %-10s %-18s %s (%s)\n", a.Time.Local().Format("15:04:05"), a.Position, orDash(a.Slot), a.Type, a.Summary, who)
	}
}

func slotLine(v projections.SlotView) string {
	s := fmt.Sprintf("%-10s %s", v.Name, v.Lifecycle)
	if v.Occupant != "" {
		s += " by " + v.Occupant
	}
	if v.Deadline != nil {
		s += " until " + v.Deadline.Local().Format("15:04:05")
	}
	if v.ActiveJob != nil {
		s += fmt.Sprintf(" · %s job %s %s (%d/%d)", v.ActiveJob.Kind, short(v.ActiveJob.ID), v.ActiveJob.State, v.ActiveJob.StepsDone, v.ActiveJob.StepsTotal)
	}
	return s
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
