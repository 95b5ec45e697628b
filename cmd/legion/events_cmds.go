package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addEventsCommands adds legion events and legion describe.
func addEventsCommands(root *cobra.Command) {
	c := newClusterCLI()
	root.AddCommand(c.eventsCommand(), c.describeCommand())
}

func (c *clusterCLI) eventsCommand() *cobra.Command {
	var follow, all bool
	var since, kind, namespace, object, typ, output string
	cmd := &cobra.Command{
		Use:   "events [-f] [--since 10m] [--kind KIND] [-n NAMESPACE|-A] [--object KIND/NAME] [--type warning]",
		Short: "List what happened to tasks, services, jobs, cron jobs, nodes and volumes; -f follows",
		Long: `List the recent events, oldest first: tasks scheduled, started, failed,
restarted after a crash (BackOff) or failing their probes, updates started,
paused, rolled back or completed, nodes joining, ready, suspect, down or
drained, volumes moved, quota and placement refusals, jobs started,
succeeded or failed, and cron jobs' runs (JobCreated, RunSkipped). Each manager derives
them from the changes it applies and keeps the last 10,000 for an hour, so
any manager answers. A repeat of an object's last event is counted rather
than listed again. Without -n, every namespace you may read is shown;
nodes' events have no namespace and show only then. kubectl events' --for,
--types (Warning,Normal) and --watch are taken for --object, --type and
--follow.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			o := client.EventsOptions{Namespace: namespace}
			if all {
				if namespace != "" {
					return fmt.Errorf("-n %s and -A: choose one", namespace)
				}
				o.Namespace = ""
			}
			if since != "" {
				if o.SinceTime, err = parseSince(since, time.Now()); err != nil {
					return err
				}
			}
			if kind != "" {
				if o.Kind, err = resolveKind(kind); err != nil {
					return fmt.Errorf("--kind: %w", err)
				}
			}
			if object != "" {
				k, name, ok := strings.Cut(object, "/")
				if !ok || name == "" {
					return fmt.Errorf("--object %q: expected KIND/NAME", object)
				}
				ok2, err := resolveKind(k)
				if err != nil {
					return fmt.Errorf("--object: %w", err)
				}
				if o.Kind != "" && o.Kind != ok2 {
					return fmt.Errorf("--object %s is a %s, but --kind asks for %s", object, ok2, o.Kind)
				}
				o.Kind, o.Object = ok2, name
			}
			// kubectl's --types takes a list: both kinds is every event.
			types := map[string]bool{}
			for _, t := range strings.Split(strings.ToLower(typ), ",") {
				switch t {
				case "":
				case "warning", "normal":
					types[t] = true
				default:
					return fmt.Errorf("--type %q: expected normal or warning", typ)
				}
			}
			switch {
			case types["warning"] && types["normal"]:
			case types["warning"]:
				o.Type = legion.EventWarning
			case types["normal"]:
				o.Type = legion.EventNormal
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			var kept []legion.Event
			if err := cl.Events(ctxOf(cmd), o, func(e legion.Event) error { kept = append(kept, e); return nil }); err != nil {
				return err
			}
			p := &eventPrinter{w: cmd.OutOrStdout(), f: fm, withNamespace: o.Namespace == "", now: time.Now}
			if !follow {
				l := eventListing(kept, p.withNamespace, time.Now())
				l.scope = userScope(cl, p.withNamespace)
				return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
			}
			if err := p.print(kept); err != nil {
				return err
			}
			if n := len(kept); n > 0 {
				o.AfterSequence = kept[n-1].Sequence
			}
			o.Follow = true
			return cl.Events(ctxOf(cmd), o, func(e legion.Event) error { return p.print([]legion.Event{e}) })
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&follow, "follow", "f", false, "after the kept events, print new ones as they happen")
	fl.StringVar(&since, "since", "", "only events last seen within this long (10m) or since a time (RFC 3339)")
	fl.StringVar(&kind, "kind", "", "only events of objects of this kind")
	fl.StringVarP(&namespace, "namespace", "n", "", "only events of objects in this namespace")
	fl.BoolVarP(&all, "all-namespaces", "A", false, "every namespace you may read (the default)")
	fl.StringVar(&object, "object", "", "only events of this object, KIND/NAME (with -n for its namespace)")
	fl.StringVar(&typ, "type", "", "only normal or warning events")
	outputFlag(cmd, &output)
	// kubectl get events --sort-by=.lastTimestamp asks for the order they
	// come in; another field is refused.
	sortBy := fl.VarPF(&kubectlFlag{ok: func(v string) bool {
		return strings.Contains(v, "lastTimestamp") || strings.Contains(v, "creationTimestamp") || strings.Contains(v, "eventTime")
	}, why: "events are listed oldest first by when they were last seen, and sorted no other way"}, "sort-by", "", "kubectl's: events come sorted by when they were last seen")
	sortBy.Hidden = true
	// kubectl events' names for the same flags.
	fl.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		switch name {
		case "for":
			name = "object"
		case "types":
			name = "type"
		case "watch":
			name = "follow"
		}
		return pflag.NormalizedName(name)
	})
	return cmd
}

// eventView is one event as -o json and yaml print it.
type eventView struct {
	Sequence  uint64    `json:"sequence"`
	LastSeen  time.Time `json:"lastSeen"`
	FirstSeen time.Time `json:"firstSeen"`
	Count     int       `json:"count"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	UID       string    `json:"uid,omitempty"` // tells the object from one of its name before it
	Message   string    `json:"message,omitempty"`
}

func viewOf(e legion.Event) eventView {
	first := e.First
	if first.IsZero() {
		first = e.Time
	}
	return eventView{e.Sequence, e.Time.UTC(), first.UTC(), e.Count, string(e.Type), e.Reason, string(e.Object.Kind),
		e.Object.Namespace, e.Object.Name, e.Object.UID, e.Message}
}

// lastSeen is when, as kubectl says it: how long ago, and for a repeated
// event how many times over how long.
func lastSeen(e legion.Event, now time.Time) string {
	s := age(e.Time, now)
	if e.Count > 1 && !e.First.IsZero() {
		s += fmt.Sprintf(" (x%d over %s)", e.Count, age(e.First, now))
	}
	return s
}

func eventObject(r legion.ObjectRef) string {
	return strings.ToLower(string(r.Kind)) + "/" + r.Name
}

// eventListing is legion events' table, and describe's events.
func eventListing(evs []legion.Event, withNamespace bool, now time.Time) listing {
	names := []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", "+FIRST SEEN", "+COUNT"}
	if withNamespace {
		names = append([]string{"NAMESPACE"}, names...)
	}
	l := listing{columns: cols(names...), none: "events"}
	for _, e := range evs {
		cells := []string{lastSeen(e, now), string(e.Type), e.Reason, eventObject(e.Object), e.Message,
			age(viewOf(e).FirstSeen, now), fmt.Sprint(e.Count)}
		if withNamespace {
			cells = append([]string{e.Object.Namespace}, cells...)
		}
		l.add("event/"+fmt.Sprint(e.Sequence), viewOf(e), cells...)
	}
	return l
}

// eventPrinter prints events as they come: one JSON object a line, YAML
// documents, or table rows aligned by the first batch's widths.
type eventPrinter struct {
	w             io.Writer
	f             format
	withNamespace bool
	now           func() time.Time
	widths        []int
}

func (p *eventPrinter) print(evs []legion.Event) error {
	l := eventListing(evs, p.withNamespace, p.now())
	switch p.f.name {
	case "table", "wide":
	case "json":
		for _, it := range l.items {
			data, err := json.Marshal(it)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "%s\n", data); err != nil {
				return err
			}
		}
		return nil
	case "yaml":
		for _, it := range l.items {
			data, err := yamlOf(it)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "---\n%s", data); err != nil {
				return err
			}
		}
		return nil
	default:
		if len(evs) == 0 {
			return nil
		}
		return l.print(p.w, io.Discard, p.f)
	}
	wide := p.f.name == "wide"
	var head []string
	rows := make([][]string, len(l.rows))
	for j, c := range l.columns {
		if !wide && c.wide {
			continue
		}
		head = append(head, c.name)
		for i, r := range l.rows {
			rows[i] = append(rows[i], cell(r[j]))
		}
	}
	if p.widths == nil {
		p.widths = make([]int, len(head))
		for _, r := range append([][]string{head}, rows...) {
			for i, c := range r {
				p.widths[i] = max(p.widths[i], utf8.RuneCountInString(c))
			}
		}
		rows = append([][]string{head}, rows...)
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", max(p.widths[i]-utf8.RuneCountInString(c), 0)+2))
		}
		if _, err := fmt.Fprintln(p.w, b.String()); err != nil {
			return err
		}
	}
	return nil
}
