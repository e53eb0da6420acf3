package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slotkeeper/slotkeeper/events"
)

// sharedSettings are the settings that decide what a command may do; every
// process sharing a store must have the same (issue 24: one process refused
// a register and a promote the others accepted). Flag name → canonical
// value.
func sharedSettings(c Config) map[string]string {
	list := func(s string) string {
		l := splitList(s)
		slices.Sort(l)
		return strings.Join(slices.Compact(l), ",")
	}
	return map[string]string{
		"demo":               strconv.FormatBool(c.Demo),
		"coolify-projects":   list(c.CoolifyProjects),
		"bitbucket-projects": list(c.BitbucketProjects),
		"grace":              c.Grace.String(),
	}
}

// recordedSettings reads the newest SettingsRecorded; ok is false when the
// log has none.
func recordedSettings(ctx context.Context, store events.Store) (rec events.SettingsRecorded, rev events.Revision, ok bool, err error) {
	evs, err := store.ReadStream(ctx, events.SettingsStream, math.MaxUint64, 1, events.Backward)
	if errors.Is(err, events.ErrStreamNotFound) || (err == nil && len(evs) == 0) {
		return rec, 0, false, nil
	}
	if err != nil {
		return rec, 0, false, err
	}
	p, err := events.Decode(evs[0])
	if err != nil {
		return rec, 0, false, err
	}
	rec, _ = p.(events.SettingsRecorded)
	return rec, evs[0].Revision, true, nil
}

// settingsDiffer names the first shared setting (in flag order) whose value
// here is not the recorded one, "" when all agree.
func settingsDiffer(mine, recorded map[string]string) (name string) {
	for _, n := range []string{"demo", "coolify-projects", "bitbucket-projects", "grace"} {
		if mine[n] != recorded[n] {
			return n
		}
	}
	return ""
}

// checkSettings compares this process's shared settings with the log's.
// None recorded: record them. Equal: nothing to do. Different: with the
// embedded store only one process can hold the log, so its settings are
// the new shared ones (recorded, and logged); on a shared store
// (KurrentDB) the process refuses to start naming the setting, unless
// --change-settings says this process's values are the new ones for all
// (the others then fail readiness until restarted with them).
func checkSettings(ctx context.Context, c Config, store events.Store, log *slog.Logger) error {
	mine := sharedSettings(c)
	var rec events.SettingsRecorded
	diff := ""
	// A lost race means another process recorded first: compare with theirs.
	_, err := events.Decide(ctx, store, events.SettingsStream, func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		got, rev, ok, err := recordedSettings(ctx, store)
		if err != nil {
			return events.ExpectedRevision{}, nil, fmt.Errorf("read the shared settings: %w", err)
		}
		rec, diff = got, ""
		if ok {
			if diff = settingsDiffer(mine, rec.Settings); diff == "" {
				return events.ExpectedRevision{}, nil, nil
			}
			if c.Events != "" && !c.ChangeSettings {
				return events.ExpectedRevision{}, nil, &ConfigError{Setting: setting(diff), Problem: fmt.Sprintf(
					"is %q here but %q on the processes sharing this event store (recorded in its %s stream); start every process with the same value, or start one with --change-settings to make this process's values everyone's",
					mine[diff], rec.Settings[diff], events.SettingsStream)}
			}
		}
		return events.Expect(ok, rev), []events.EventData{events.New(events.SettingsRecorded{Settings: mine}, events.Metadata{Actor: "system:settings"})}, nil
	})
	var ae *events.AppendError
	var ce *events.ContendedError
	switch {
	case errors.As(err, &ae):
		return fmt.Errorf("record the shared settings: %w", ae.Err)
	case errors.As(err, &ce):
		return errors.New("the shared settings keep changing under this process; try again")
	case err != nil:
		return err
	}
	if diff != "" {
		log.Warn("shared settings changed: this process's values are recorded for every process sharing the store",
			slog.String("first_changed", diff), slog.String("was", rec.Settings[diff]), slog.String("now", mine[diff]))
	}
	return nil
}

// settingsProbe fails readiness once the log's shared settings are not
// this process's any more (another process started with
// --change-settings), naming the setting.
func settingsProbe(c Config, store events.Store) probe {
	mine := sharedSettings(c)
	return probe{name: "shared settings", check: func(ctx context.Context) error {
		rec, _, ok, err := recordedSettings(ctx, store)
		if err != nil || !ok {
			return err
		}
		if n := settingsDiffer(mine, rec.Settings); n != "" {
			return fmt.Errorf("--%s is %q here but %q in the log (changed by another process): restart with the shared value", n, mine[n], rec.Settings[n])
		}
		return nil
	}}
}
