package main

import (
	"context"
	"flag"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/lifecycle"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
)

// WaitlistConfig holds the waitlist's flags.
type WaitlistConfig struct {
	OfferTTL   time.Duration
	WarnBefore string // comma-separated lead times
	ExtendBy   time.Duration
	leads      []time.Duration
}

func waitlistFlags(fs *flag.FlagSet, c *WaitlistConfig) {
	fs.DurationVar(&c.OfferTTL, "offer-ttl", 15*time.Minute, "how long a slot offered to the head of the waitlist is held for them")
	fs.StringVar(&c.WarnBefore, "warn-before", "60m,10m", "lead times of the warnings before an occupancy deadline, comma-separated (empty: none)")
	fs.DurationVar(&c.ExtendBy, "warn-extend", time.Hour, "how much the extend link in a deadline warning adds")
}

func (c *WaitlistConfig) validate() error {
	if c.OfferTTL < time.Minute || c.OfferTTL > 24*time.Hour {
		return cfgErr("offer-ttl", "%s: use 1m..24h", c.OfferTTL)
	}
	if c.ExtendBy < time.Minute {
		return cfgErr("warn-extend", "%s: at least 1m", c.ExtendBy)
	}
	c.leads = []time.Duration{}
	for _, f := range strings.Split(c.WarnBefore, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < time.Minute || d%time.Second != 0 {
			return cfgErr("warn-before", "%q: durations of at least 1m, whole seconds (e.g. 60m,10m)", f)
		}
		c.leads = append(c.leads, d)
	}
	return nil
}

// newWaitlist builds the waitlist the API serves and the service that runs
// its consumer (offers, holds, expiries, warnings; its stop waits for the
// warnings being sent).
func newWaitlist(c Config, store events.Store, svc *slots.Service, base string, reg *prometheus.Registry, log *slog.Logger, health *consumer.Health) (*waitlist.Service, lifecycle.Service) {
	cfg := waitlist.Config{OfferTTL: c.Waitlist.OfferTTL, WarnLeads: c.Waitlist.leads, Logger: log, Health: health}
	var sends sync.WaitGroup
	if c.WebhookURL != "" {
		h := &waitlist.Webhook{URL: c.WebhookURL, Secret: c.WebhookSecret, BaseURL: base, ExtendBy: c.Waitlist.ExtendBy, Logger: log}
		cfg.OnWarning = func(ctx context.Context, w events.DeadlineWarning) {
			sends.Add(1)
			go func() { defer sends.Done(); h.Send(ctx, w) }()
		}
	}
	wl := waitlist.New(store, svc, cfg)
	registerWaitlistMetrics(reg, wl)
	return wl, &lifecycle.Loop{Run: func(ctx context.Context) error {
		err := wl.Run(ctx)
		sends.Wait()
		return err
	}}
}

// registerWaitlistMetrics exposes the waitlist's figures (read from its
// fold at scrape time).
func registerWaitlistMetrics(reg *prometheus.Registry, wl *waitlist.Service) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slotkeeper_waitlist_length", Help: "People on the waitlist."},
			func() float64 { return float64(wl.Stats().Length) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slotkeeper_waitlist_open_offers", Help: "Offers waiting for an answer."},
			func() float64 { return float64(wl.Stats().OpenOffers) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "slotkeeper_waitlist_offers_total", Help: "Offers made (log since start of the fold)."},
			func() float64 { return float64(wl.Stats().OffersMade) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "slotkeeper_waitlist_offers_expired_total", Help: "Offers that expired unanswered."},
			func() float64 { return float64(wl.Stats().OffersExpired) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "slotkeeper_waitlist_offers_accepted_total", Help: "Offers accepted (hand-overs)."},
			func() float64 { return float64(wl.Stats().OffersAccepted) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slotkeeper_waitlist_handover_median_seconds", Help: "Median time from a reset's success to the offer's acceptance (last 50)."},
			func() float64 { return wl.Stats().HandOver.Seconds() }),
	)
}
