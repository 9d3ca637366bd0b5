// Package storetest is the conformance suite of store implementations: every
// rule of the store interfaces as a test that any implementation (the file
// store now, a distributed one later) must pass, under -race: teams and
// rosters, the board's dependency and claim rules (also under concurrent
// clients), inboxes, the journal read from cursors that outlive their
// client, transcripts, and archives.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/troupe-dev/troupe/internal/store"
)

// Factory creates fresh, empty backing state for one test and returns a
// function that opens a client on it. Each call must open a new client, as
// another process would; the suite closes what it opens.
type Factory func(t *testing.T) (open func() store.Store)

// Damage breaks stored state on purpose, as a crash, a bad disk or a hand
// edit would, so that the suite can check that broken state is reported
// and never hidden. Each backend knows how its state can break.
type Damage interface {
	// CorruptTask makes the stored task id of team unreadable.
	CorruptTask(t *testing.T, s store.Store, team, id string)
	// CorruptRoster makes the stored roster of team unreadable.
	CorruptRoster(t *testing.T, s store.Store, team string)
}

// Options add to the suite what only a backend can provide.
type Options struct {
	// Damage enables the tests of broken state; without it they are
	// skipped, saying why.
	Damage Damage
}

// Run runs the whole suite.
func Run(t *testing.T, newBackend Factory) { RunWith(t, newBackend, Options{}) }

// RunWith runs the whole suite with the backend's options.
func RunWith(t *testing.T, newBackend Factory, opts Options) {
	groups := []struct {
		name  string
		tests map[string]func(*testing.T, Factory)
	}{
		{"Teams", teamTests},
		{"Roster", rosterTests},
		{"Tasks", taskTests},
		{"BoardConcurrency", boardConcurrencyTests},
		{"Mailbox", mailboxTests},
		{"Journal", journalTests},
		{"JournalCursor", journalCursorTests},
		{"Transcripts", transcriptTests},
		{"Archives", archiveTests},
		{"Damage", damageTests(opts.Damage)},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			names := make([]string, 0, len(g.tests))
			for n := range g.tests {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				t.Run(n, func(t *testing.T) { g.tests[n](t, newBackend) })
			}
		})
	}
}

// liveness bounds waits for things that must happen (a wake-up, a
// delivery). It is not a performance assertion: the slowest legal path (the
// 1 s poll) is far inside it.
const liveness = 30 * time.Second

func open(t *testing.T, f Factory) (func() store.Store, store.Store) {
	t.Helper()
	o := f(t)
	s := o()
	t.Cleanup(func() { s.Close() })
	return func() store.Store {
		s := o()
		t.Cleanup(func() { s.Close() })
		return s
	}, s
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	t.Cleanup(cancel)
	return ctx
}

// newTeam creates team "t1" with the given members.
func newTeam(t *testing.T, s store.Store, members ...string) store.Team {
	t.Helper()
	r := store.Roster{Name: "t1", Description: "test team", Pattern: "default"}
	for _, m := range members {
		r.Members = append(r.Members, store.Member{Name: m, Role: "worker", Status: store.StatusIdle})
	}
	tm, err := s.CreateTeam(ctxFor(t), r)
	if err != nil {
		t.Fatalf("CreateTeam: %v", err)
	}
	return tm
}

func reopen(t *testing.T, o func() store.Store, name string) store.Team {
	t.Helper()
	tm, err := o().Team(ctxFor(t), name)
	if err != nil {
		t.Fatalf("Team(%s): %v", name, err)
	}
	return tm
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func waitWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: watch channel closed", what)
		}
	case <-time.After(liveness):
		t.Fatalf("%s: no wake-up", what)
	}
}

var teamTests = map[string]func(*testing.T, Factory){
	"CreateGetList": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		newTeam(t, s, "alice", "Bob")
		if _, err := s.CreateTeam(ctx, store.Roster{Name: "a0"}); err != nil {
			t.Fatal(err)
		}
		got := must[[]store.Roster](t)(o().ListTeams(ctx))
		var names []string
		for _, r := range got {
			names = append(names, r.Name)
		}
		if diff := cmp.Diff([]string{"a0", "t1"}, names); diff != "" {
			t.Errorf("ListTeams names (-want +got):\n%s", diff)
		}
		r := must[store.Roster](t)(reopen(t, o, "T1").ReadRoster(ctx))
		want := store.Roster{Name: "t1", Description: "test team", Lead: store.LeadName, Pattern: "default",
			Members: []store.Member{{Name: "alice", Role: "worker", Status: "idle"}, {Name: "bob", Role: "worker", Status: "idle"}}}
		if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(store.Roster{}, "CreatedAt")); diff != "" {
			t.Errorf("roster (-want +got):\n%s", diff)
		}
		if r.CreatedAt.IsZero() {
			t.Error("CreatedAt not set")
		}
	},
	"Errors": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		newTeam(t, s)
		_, err := s.CreateTeam(ctx, store.Roster{Name: "t1"})
		wantErr(t, err, store.ErrTeamExists)
		_, err = s.CreateTeam(ctx, store.Roster{Name: "../x"})
		wantErr(t, err, store.ErrInvalidName)
		_, err = s.CreateTeam(ctx, store.Roster{Name: "x", Members: []store.Member{{Name: "a"}, {Name: "A"}}})
		wantErr(t, err, store.ErrMemberExists)
		_, err = s.Team(ctx, "nope")
		wantErr(t, err, store.ErrTeamNotFound)
		wantErr(t, s.DeleteTeam(ctx, "nope"), store.ErrTeamNotFound)
	},
	"Delete": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		tm := newTeam(t, s, "alice")
		must[store.Task](t)(tm.Tasks().Create(ctx, store.Task{Subject: "x"}))
		must[store.Message](t)(tm.Mailbox().Send(ctx, store.Message{From: "human", To: "alice", Content: "hi"}))
		if err := o().DeleteTeam(ctx, "t1"); err != nil {
			t.Fatal(err)
		}
		_, err := s.Team(ctx, "t1")
		wantErr(t, err, store.ErrTeamNotFound)
		if got := must[[]store.Roster](t)(s.ListTeams(ctx)); len(got) != 0 {
			t.Errorf("ListTeams after delete = %v", got)
		}
		// The name can be used again, with nothing left over.
		tm = newTeam(t, s, "alice")
		if got := must[[]store.Task](t)(tm.Tasks().List(ctx)); len(got) != 0 {
			t.Errorf("tasks of the new team: %v", got)
		}
		if got := must[[]store.Message](t)(tm.Mailbox().Peek(ctx, "alice")); len(got) != 0 {
			t.Errorf("inbox of the new team: %v", got)
		}
	},
}

var rosterTests = map[string]func(*testing.T, Factory){
	"Heartbeats": func(t *testing.T, f Factory) {
		// A change of heartbeats alone (a backend may keep them apart from
		// the roster) is read back by this client at once and by another
		// soon; a later change of status keeps it; a heartbeat moved back
		// (a member marked stale) is read as moved back.
		o, s := open(t, f)
		ctx := ctxFor(t)
		tm := newTeam(t, s, "alice", "bob")
		other := reopen(t, o, "t1")
		base := time.Now().UTC().Truncate(time.Millisecond)
		beatAt := func(at time.Time) func(*store.Roster) error {
			return func(r *store.Roster) error {
				m, _ := r.Member("alice")
				m.HeartbeatAt = at
				return nil
			}
		}
		heartbeat := func(c store.Team) time.Time {
			r := must[store.Roster](t)(c.ReadRoster(ctx))
			m, _ := r.Member("alice")
			return m.HeartbeatAt
		}
		// eventually waits until the other client reads want.
		eventually := func(want time.Time, what string) {
			t.Helper()
			for got := heartbeat(other); !got.Equal(want); got = heartbeat(other) {
				select {
				case <-ctx.Done():
					t.Fatalf("%s: another client reads alice's heartbeat %v, want %v", what, got, want)
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		t1 := base.Add(time.Second)
		must[store.Roster](t)(tm.UpdateRoster(ctx, beatAt(t1)))
		if got := heartbeat(tm); !got.Equal(t1) {
			t.Fatalf("after a beat this client reads %v, want %v", got, t1)
		}
		eventually(t1, "after a beat")
		r := must[store.Roster](t)(tm.ReadRoster(ctx))
		if m, _ := r.Member("bob"); !m.HeartbeatAt.IsZero() {
			t.Errorf("bob's heartbeat moved with alice's: %v", m.HeartbeatAt)
		}
		must[store.Roster](t)(tm.UpdateRoster(ctx, func(r *store.Roster) error {
			m, _ := r.Member("alice")
			if !m.HeartbeatAt.Equal(t1) {
				return fmt.Errorf("the update sees alice's heartbeat %v, want %v", m.HeartbeatAt, t1)
			}
			m.Status = store.StatusWorking
			return nil
		}))
		r = must[store.Roster](t)(other.ReadRoster(ctx))
		if m, _ := r.Member("alice"); m.Status != store.StatusWorking || !m.HeartbeatAt.Equal(t1) {
			t.Errorf("after a change of status another client reads alice %s at %v, want working at %v", m.Status, m.HeartbeatAt, t1)
		}
		stale := base.Add(-time.Hour)
		must[store.Roster](t)(tm.UpdateRoster(ctx, beatAt(stale)))
		if got := heartbeat(tm); !got.Equal(stale) {
			t.Fatalf("after a heartbeat moved back this client reads %v, want %v", got, stale)
		}
		eventually(stale, "after a heartbeat moved back")
		t2 := base.Add(2 * time.Second)
		must[store.Roster](t)(other.UpdateRoster(ctx, beatAt(t2)))
		if got := heartbeat(other); !got.Equal(t2) {
			t.Fatalf("after a second beat the beating client reads %v, want %v", got, t2)
		}
		for got := heartbeat(tm); !got.Equal(t2); got = heartbeat(tm) {
			select {
			case <-ctx.Done():
				t.Fatalf("after a second beat the first client reads %v, want %v", got, t2)
			case <-time.After(10 * time.Millisecond):
			}
		}
	},
	"UpdateMember": func(t *testing.T, f Factory) {
		// A change of one member's entry keeps the others, is read back
		// by another client, cannot rename the member, and writes nothing
		// when fn fails or the member does not exist.
		o, s := open(t, f)
		ctx := ctxFor(t)
		tm := newTeam(t, s, "alice", "bob")
		m, ok, err := tm.UpdateMember(ctx, "alice", func(m *store.Member) error {
			m.Status, m.Name, m.MCPServers = store.StatusWorking, "mallory", []string{"github"}
			return nil
		})
		if err != nil || !ok || m.Name != "alice" || m.Status != store.StatusWorking || !slices.Equal(m.MCPServers, []string{"github"}) {
			t.Fatalf("UpdateMember = %+v, %v, %v", m, ok, err)
		}
		called := false
		if _, ok, err := tm.UpdateMember(ctx, "nobody", func(*store.Member) error { called = true; return nil }); ok || err != nil || called {
			t.Errorf("UpdateMember of nobody = %v, %v (fn called: %v)", ok, err, called)
		}
		boom := errors.New("boom")
		if _, _, err := tm.UpdateMember(ctx, "bob", func(m *store.Member) error { m.Role = "changed"; return boom }); !errors.Is(err, boom) {
			t.Errorf("UpdateMember with a failing fn: %v", err)
		}
		for _, c := range []store.Team{tm, reopen(t, o, "t1")} {
			r := must[store.Roster](t)(c.ReadRoster(ctx))
			var got []string
			for _, m := range r.Members {
				got = append(got, m.Name+":"+m.Status+":"+m.Role+":"+strings.Join(m.MCPServers, ","))
			}
			if diff := cmp.Diff([]string{"alice:working:worker:github", "bob:idle:worker:"}, got); diff != "" {
				t.Errorf("members (-want +got):\n%s", diff)
			}
		}
	},
	"ReadMember": func(t *testing.T, f Factory) {
		// One member's entry reads as it does in the whole roster, its
		// heartbeat included, by this client and by another.
		o, s := open(t, f)
		ctx := ctxFor(t)
		tm := newTeam(t, s, "alice", "bob")
		beat := time.Now().UTC().Truncate(time.Millisecond).Add(time.Minute)
		must[store.Roster](t)(tm.UpdateRoster(ctx, func(r *store.Roster) error {
			m, _ := r.Member("bob")
			m.Status, m.MCPServers = store.StatusWorking, []string{"github"}
			return nil
		}))
		must[store.Roster](t)(tm.UpdateRoster(ctx, func(r *store.Roster) error {
			m, _ := r.Member("bob")
			m.HeartbeatAt = beat // a change of heartbeat alone
			return nil
		}))
		for _, c := range []store.Team{tm, reopen(t, o, "t1")} {
			r := must[store.Roster](t)(c.ReadRoster(ctx))
			for _, name := range []string{"alice", "bob", "BOB"} {
				got, ok, err := c.ReadMember(ctx, name)
				want, _ := r.Member(strings.ToLower(name))
				if err != nil || !ok {
					t.Fatalf("ReadMember(%s) = %v, %v", name, ok, err)
				}
				if diff := cmp.Diff(*want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("ReadMember(%s) differs from the roster's entry (-roster +member):\n%s", name, diff)
				}
			}
			if m, _, _ := c.ReadMember(ctx, "bob"); !m.HeartbeatAt.Equal(beat) {
				t.Errorf("bob's heartbeat reads %v, want %v", m.HeartbeatAt, beat)
			}
			if _, ok, err := c.ReadMember(ctx, "nobody"); ok || err != nil {
				t.Errorf("ReadMember(nobody) = %v, %v", ok, err)
			}
		}
	},
	"UpdateMemberWithRosterUpdates": func(t *testing.T, f Factory) {
		// Changes of single members and of the whole roster made at once
		// are all kept, and the roster an UpdateRoster returns is the one
		// its fn made: a member's change that comes after it does not
		// show in it.
		_, s := open(t, f)
		ctx := ctxFor(t)
		names := []string{"m0", "m1", "m2", "m3", "m4", "m5"}
		tm := newTeam(t, s, names...)
		const rounds = 15
		var wg sync.WaitGroup
		for _, name := range names {
			wg.Go(func() {
				for k := range rounds {
					want := fmt.Sprint(k)
					m, ok, err := tm.UpdateMember(ctx, name, func(m *store.Member) error { m.Role = want; return nil })
					if err != nil || !ok || m.Role != want {
						t.Errorf("UpdateMember(%s) = %+v, %v, %v", name, m, ok, err)
						return
					}
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				for k := range rounds {
					var made store.Roster
					got, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
						r.Description = fmt.Sprint(k)
						made = r.Clone()
						return nil
					})
					if err != nil {
						t.Errorf("UpdateRoster: %v", err)
						return
					}
					if diff := cmp.Diff(made.Members, got.Members, cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("UpdateRoster returned another roster than its fn made (-made +got):\n%s", diff)
						return
					}
				}
			})
		}
		wg.Wait()
		r := must[store.Roster](t)(tm.ReadRoster(ctx))
		for _, name := range names {
			if m, ok := r.Member(name); !ok || m.Role != fmt.Sprint(rounds-1) {
				t.Errorf("%s = %+v, want role %d", name, m, rounds-1)
			}
		}
	},
	"InPlaceEditsKept": func(t *testing.T, f Factory) {
		// An update that edits the roster's slices in place (a persona
		// cast to a member, a member's MCP servers) is kept like any
		// other, by this client and by another.
		o, s := open(t, f)
		ctx := ctxFor(t)
		tm := newTeam(t, s, "alice")
		must[store.Roster](t)(tm.UpdateRoster(ctx, func(r *store.Roster) error {
			r.Theme = "crew"
			r.Personas = []store.Persona{{Name: "Oswin"}, {Name: "Wren"}}
			r.Members[0].MCPServers = []string{"github"}
			return nil
		}))
		must[store.Roster](t)(tm.UpdateRoster(ctx, func(r *store.Roster) error {
			r.Personas[1].Member = "alice"
			r.Members[0].MCPServers[0] = "jira"
			r.Members = append(r.Members, store.Member{Name: "bob"})
			return nil
		}))
		must[store.Roster](t)(tm.UpdateRoster(ctx, func(r *store.Roster) error {
			r.Personas[0].Member = "bob"
			return nil
		}))
		for _, c := range []store.Team{tm, reopen(t, o, "t1")} {
			r := must[store.Roster](t)(c.ReadRoster(ctx))
			if p, ok := r.PersonaOf("alice"); !ok || p.Name != "Wren" {
				t.Errorf("alice plays %+v (%v), want Wren", p, ok)
			}
			if p, ok := r.PersonaOf("bob"); !ok || p.Name != "Oswin" {
				t.Errorf("bob plays %+v (%v), want Oswin", p, ok)
			}
			if m, ok := r.Member("alice"); !ok || !slices.Equal(m.MCPServers, []string{"jira"}) {
				t.Errorf("alice's MCP servers = %+v", m)
			}
		}
	},
	"ConcurrentUpdatesNoneLost": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		newTeam(t, s)
		teams := []store.Team{reopen(t, o, "t1"), reopen(t, o, "t1")}
		const workers, each = 8, 5
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					_, err := teams[w%2].UpdateRoster(ctx, func(r *store.Roster) error {
						r.Members = append(r.Members, store.Member{Name: fmt.Sprintf("w%d-%d", w, i)})
						return nil
					})
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		r := must[store.Roster](t)(teams[0].ReadRoster(ctx))
		if len(r.Members) != workers*each {
			t.Fatalf("%d members after %d concurrent adds", len(r.Members), workers*each)
		}
	},
	"UpdateRules": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tm := newTeam(t, s, "alice")
		before := must[store.Roster](t)(tm.ReadRoster(ctx))
		boom := errors.New("boom")
		_, err := tm.UpdateRoster(ctx, func(r *store.Roster) error {
			r.Members = nil
			return boom
		})
		wantErr(t, err, boom)
		_, err = tm.UpdateRoster(ctx, func(r *store.Roster) error {
			r.Members = append(r.Members, store.Member{Name: "Bad Name"})
			return nil
		})
		wantErr(t, err, store.ErrInvalidName)
		_, err = tm.UpdateRoster(ctx, func(r *store.Roster) error {
			r.Members = append(r.Members, store.Member{Name: "human"})
			return nil
		})
		wantErr(t, err, store.ErrInvalidName)
		if diff := cmp.Diff(before, must[store.Roster](t)(tm.ReadRoster(ctx))); diff != "" {
			t.Errorf("refused updates changed the roster (-want +got):\n%s", diff)
		}
		got := must[store.Roster](t)(tm.UpdateRoster(ctx, func(r *store.Roster) error {
			r.Name, r.Lead = "other", "alice" // fixed fields: ignored
			m, _ := r.Member("alice")
			m.Status = store.StatusWorking
			m.PID = 42
			r.Members = append(r.Members, store.Member{Name: "CAROL"})
			return nil
		}))
		if got.Name != "t1" || got.Lead != store.LeadName {
			t.Errorf("name/lead changed: %q %q", got.Name, got.Lead)
		}
		if diff := cmp.Diff(got, must[store.Roster](t)(tm.ReadRoster(ctx))); diff != "" {
			t.Errorf("ReadRoster differs from UpdateRoster's result (-want +got):\n%s", diff)
		}
		if m, ok := got.Member("alice"); !ok || m.Status != store.StatusWorking || m.PID != 42 {
			t.Errorf("alice = %+v", m)
		}
		if _, ok := got.Member("carol"); !ok {
			t.Error("carol (case-folded) not added")
		}
	},
}

func ids(ts []store.Task) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func createN(t *testing.T, tasks store.Tasks, n int) {
	t.Helper()
	for i := range n {
		must[store.Task](t)(tasks.Create(ctxFor(t), store.Task{Subject: fmt.Sprintf("task %d", i+1)}))
	}
}

func setDeps(blockedBy ...string) func(*store.Task) error {
	return func(t *store.Task) error { t.BlockedBy = blockedBy; return nil }
}

var taskTests = map[string]func(*testing.T, Factory){
	"CreateNumericOrder": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		createN(t, tasks, 11)
		want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}
		if diff := cmp.Diff(want, ids(must[[]store.Task](t)(tasks.List(ctx)))); diff != "" {
			t.Errorf("List order (-want +got):\n%s", diff)
		}
		got := must[store.Task](t)(tasks.Get(ctx, "10"))
		wantTask := store.Task{ID: "10", Subject: "task 10", Status: store.TaskPending, BlockedBy: []string{}, Blocks: []string{}, Metadata: map[string]any{}}
		if diff := cmp.Diff(wantTask, got, cmpopts.IgnoreFields(store.Task{}, "CreatedAt", "UpdatedAt")); diff != "" {
			t.Errorf("Get (-want +got):\n%s", diff)
		}
		_, err := tasks.Get(ctx, "12")
		wantErr(t, err, store.ErrTaskNotFound)
		_, err = tasks.Get(ctx, "../1")
		wantErr(t, err, store.ErrTaskNotFound)
		_, err = tasks.Create(ctx, store.Task{})
		wantErr(t, err, store.ErrInvalidTask)
	},
	"CreateAll": func(t *testing.T, f Factory) {
		// Tasks made together get the next ids in order, may depend on
		// each other, and are all made or none; another client reads them.
		o, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		b, ok := tasks.(store.TaskBatch)
		if !ok {
			t.Skip("this backend creates tasks one at a time (no store.TaskBatch)")
		}
		createN(t, tasks, 1)
		got, err := b.CreateAll(ctx, []store.Task{{Subject: "a"}, {Subject: "b", BlockedBy: []string{"2"}}, {Subject: "c", BlockedBy: []string{"1", "3"}}})
		if err != nil {
			t.Fatal(err)
		}
		var made []string
		for _, tk := range got {
			made = append(made, tk.ID+":"+tk.Subject+":"+strings.Join(tk.BlockedBy, ","))
		}
		if diff := cmp.Diff([]string{"2:a:", "3:b:2", "4:c:1,3"}, made); diff != "" {
			t.Errorf("CreateAll (-want +got):\n%s", diff)
		}
		_, err = b.CreateAll(ctx, []store.Task{{Subject: "d"}, {Subject: "e", BlockedBy: []string{"99"}}})
		wantErr(t, err, store.ErrTaskNotFound)
		_, err = b.CreateAll(ctx, []store.Task{{Subject: "f"}, {}})
		wantErr(t, err, store.ErrInvalidTask)
		for _, c := range []store.Tasks{tasks, reopen(t, o, "t1").Tasks()} {
			list := must[[]store.Task](t)(c.List(ctx))
			var all []string
			for _, tk := range list {
				all = append(all, tk.ID+":"+tk.Subject+":"+strings.Join(tk.Blocks, ","))
			}
			if diff := cmp.Diff([]string{"1:task 1:4", "2:a:3", "3:b:4", "4:c:"}, all); diff != "" {
				t.Errorf("board (-want +got):\n%s", diff)
			}
		}
		next := must[store.Task](t)(tasks.Create(ctx, store.Task{Subject: "g"}))
		if next.ID != "5" {
			t.Errorf("the next task after failed batches is #%s, want #5", next.ID)
		}
	},
	"ConcurrentCreatesDistinctIDs": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		newTeam(t, s)
		boards := []store.Tasks{reopen(t, o, "t1").Tasks(), reopen(t, o, "t1").Tasks()}
		const workers, each = 8, 6
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			ids = map[string]string{}
		)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					subject := fmt.Sprintf("w%d-%d", w, i)
					tk, err := boards[w%2].Create(ctx, store.Task{Subject: subject})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if other, dup := ids[tk.ID]; dup {
						t.Errorf("id %s given to %s and to %s", tk.ID, other, subject)
					}
					ids[tk.ID] = subject
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		list := must[[]store.Task](t)(boards[0].List(ctx))
		if len(list) != workers*each {
			t.Fatalf("%d tasks on the board after %d concurrent creates", len(list), workers*each)
		}
		for i, tk := range list {
			if want := fmt.Sprint(i + 1); tk.ID != want || ids[tk.ID] != tk.Subject {
				t.Errorf("task %d: %s %q, want id %s (%q)", i, tk.ID, tk.Subject, want, ids[want])
			}
		}
	},
	"IDsNotReused": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		createN(t, tasks, 3)
		must[store.Task](t)(tasks.Update(ctx, "3", func(t *store.Task) error { t.Status = store.TaskDeleted; return nil }))
		if got := must[store.Task](t)(tasks.Create(ctx, store.Task{Subject: "again"})); got.ID != "4" {
			t.Errorf("id after deleting the highest = %s, want 4", got.ID)
		}
	},
	"UpdateAtomicAndRules": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		createN(t, tasks, 1)
		boom := errors.New("boom")
		_, err := tasks.Update(ctx, "1", func(t *store.Task) error { t.Subject = "changed"; return boom })
		wantErr(t, err, boom)
		_, err = tasks.Update(ctx, "1", func(t *store.Task) error { t.Status = "done"; return nil })
		wantErr(t, err, store.ErrInvalidTask)
		if got := must[store.Task](t)(tasks.Get(ctx, "1")); got.Subject != "task 1" || got.Status != store.TaskPending {
			t.Errorf("refused updates changed the task: %+v", got)
		}
		_, err = tasks.Update(ctx, "9", func(*store.Task) error { return nil })
		wantErr(t, err, store.ErrTaskNotFound)
		// Concurrent read-modify-writes from two clients: none lost.
		other := reopen(t, o, "t1").Tasks()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for range 5 {
					_, err := []store.Tasks{tasks, other}[w%2].Update(ctx, "1", func(t *store.Task) error {
						n, _ := t.Metadata["n"].(float64)
						t.Metadata["n"] = n + 1
						return nil
					})
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if got := must[store.Task](t)(tasks.Get(ctx, "1")); got.Metadata["n"] != float64(40) {
			t.Errorf("counter = %v after 40 concurrent increments", got.Metadata["n"])
		}
	},
	"DependencyRules": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		createN(t, tasks, 4)
		must[store.Task](t)(tasks.Update(ctx, "3", setDeps("1", "2")))
		must[store.Task](t)(tasks.Update(ctx, "4", func(t *store.Task) error { t.Blocks = []string{"1"}; return nil }))
		type deps struct{ BlockedBy, Blocks []string }
		board := func() map[string]deps {
			got := map[string]deps{}
			for _, tk := range must[[]store.Task](t)(tasks.List(ctx)) {
				got[tk.ID] = deps{tk.BlockedBy, tk.Blocks}
			}
			return got
		}
		want := map[string]deps{
			"1": {[]string{"4"}, []string{"3"}},
			"2": {[]string{}, []string{"3"}},
			"3": {[]string{"1", "2"}, []string{}},
			"4": {[]string{}, []string{"1"}},
		}
		if diff := cmp.Diff(want, board()); diff != "" {
			t.Fatalf("links (-want +got):\n%s", diff)
		}
		// Cycles, direct and indirect, and self-dependencies are refused.
		_, err := tasks.Update(ctx, "1", setDeps("4", "3"))
		wantErr(t, err, store.ErrCycle)
		_, err = tasks.Update(ctx, "4", setDeps("3"))
		wantErr(t, err, store.ErrCycle)
		_, err = tasks.Update(ctx, "2", func(t *store.Task) error { t.Blocks = []string{"3", "2"}; return nil })
		wantErr(t, err, store.ErrCycle)
		_, err = tasks.Create(ctx, store.Task{Subject: "c", BlockedBy: []string{"3"}, Blocks: []string{"4"}})
		wantErr(t, err, store.ErrCycle)
		_, err = tasks.Update(ctx, "2", setDeps("99"))
		wantErr(t, err, store.ErrTaskNotFound)
		if diff := cmp.Diff(want, board()); diff != "" {
			t.Fatalf("refused changes altered links (-want +got):\n%s", diff)
		}
		// Removing a link removes both sides.
		must[store.Task](t)(tasks.Update(ctx, "3", setDeps("1")))
		want["3"] = deps{[]string{"1"}, []string{}}
		want["2"] = deps{[]string{}, []string{}}
		if diff := cmp.Diff(want, board()); diff != "" {
			t.Fatalf("after unlinking (-want +got):\n%s", diff)
		}
		// Completing 4 unblocks 1; completing 1 unblocks 3.
		must[store.Task](t)(tasks.Update(ctx, "4", func(t *store.Task) error { t.Status = store.TaskCompleted; return nil }))
		if got := must[store.Task](t)(tasks.Get(ctx, "1")); len(got.BlockedBy) != 0 {
			t.Errorf("1 still blocked by %v after 4 completed", got.BlockedBy)
		}
		// A completed task as a new blocker blocks nothing.
		got := must[store.Task](t)(tasks.Update(ctx, "2", setDeps("4")))
		if len(got.BlockedBy) != 0 {
			t.Errorf("blocked by a completed task: %v", got.BlockedBy)
		}
		// Deleting 1 unlinks it from 3; it is gone from Get and List.
		must[store.Task](t)(tasks.Update(ctx, "1", func(t *store.Task) error { t.Status = store.TaskDeleted; return nil }))
		_, err = tasks.Get(ctx, "1")
		wantErr(t, err, store.ErrTaskNotFound)
		want = map[string]deps{
			"2": {[]string{}, []string{}},
			"3": {[]string{}, []string{}},
			"4": {[]string{}, []string{}},
		}
		if diff := cmp.Diff(want, board()); diff != "" {
			t.Fatalf("after delete (-want +got):\n%s", diff)
		}
	},
	"ClaimFirstInOrder": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		createN(t, tasks, 5)
		must[store.Task](t)(tasks.Update(ctx, "2", setDeps("1")))
		must[store.Task](t)(tasks.Update(ctx, "3", func(t *store.Task) error { t.Owner = "carol"; return nil }))
		// Gone, owned, blocked: the first claimable in the order given is
		// 5, not the lowest (4).
		got := must[store.Task](t)(tasks.ClaimFirst(ctx, "bob", []string{"9", "3", "2", "5", "4"}))
		if got.ID != "5" || got.Owner != "bob" || got.Status != store.TaskInProgress {
			t.Errorf("ClaimFirst = %+v, want task 5 for bob", got)
		}
		if got := must[store.Task](t)(tasks.Get(ctx, "5")); got.Owner != "bob" || got.Status != store.TaskInProgress {
			t.Errorf("task 5 = %+v", got)
		}
		for _, id := range []string{"2", "3", "4"} {
			if got := must[store.Task](t)(tasks.Get(ctx, id)); got.Owner == "bob" || got.Status == store.TaskInProgress {
				t.Errorf("task %s changed: %+v", id, got)
			}
		}
		_, err := tasks.ClaimFirst(ctx, "bob", []string{"5", "3", "2"})
		wantErr(t, err, store.ErrNoTask)
		_, err = tasks.ClaimFirst(ctx, "bob", nil)
		wantErr(t, err, store.ErrNoTask)
		_, err = tasks.ClaimFirst(ctx, "", []string{"4"})
		wantErr(t, err, store.ErrInvalidName)
		if got := must[store.Task](t)(tasks.ClaimFirst(ctx, "dave", []string{"1", "4"})); got.ID != "1" {
			t.Errorf("ClaimFirst = %+v, want task 1", got)
		}
	},
	"ClaimIsCompareAndSet": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		createN(t, tasks, 3)
		must[store.Task](t)(tasks.Update(ctx, "2", setDeps("1")))
		got := must[store.Task](t)(tasks.Claim(ctx, "1", "alice"))
		if got.Owner != "alice" || got.Status != store.TaskInProgress {
			t.Errorf("claimed task = %+v", got)
		}
		_, err := tasks.Claim(ctx, "1", "bob")
		wantErr(t, err, store.ErrNotPending)
		_, err = tasks.Claim(ctx, "2", "bob")
		wantErr(t, err, store.ErrBlocked)
		must[store.Task](t)(tasks.Update(ctx, "3", func(t *store.Task) error { t.Owner = "carol"; return nil }))
		_, err = tasks.Claim(ctx, "3", "bob")
		wantErr(t, err, store.ErrClaimed)
		_, err = tasks.Claim(ctx, "7", "bob")
		wantErr(t, err, store.ErrTaskNotFound)
		_, err = tasks.ClaimNext(ctx, "bob")
		wantErr(t, err, store.ErrNoTask)
		must[store.Task](t)(tasks.Update(ctx, "1", func(t *store.Task) error { t.Status = store.TaskCompleted; return nil }))
		if got := must[store.Task](t)(tasks.ClaimNext(ctx, "bob")); got.ID != "2" || got.Owner != "bob" {
			t.Errorf("ClaimNext = %+v, want task 2 for bob", got)
		}
		if got := must[store.Task](t)(tasks.Get(ctx, "1")); got.Owner != "alice" || got.Status != store.TaskCompleted {
			t.Errorf("task 1 = %+v", got)
		}
	},
	"ConcurrentClaimsExactlyOnce": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		const n = 40
		createN(t, tasks, n)
		clients := []store.Tasks{tasks, reopen(t, o, "t1").Tasks()}
		var mu sync.Mutex
		wins := map[string][]string{}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				owner := fmt.Sprintf("w%d", w)
				for i := range n {
					id := fmt.Sprint((i+w*5)%n + 1)
					got, err := clients[w%2].Claim(ctx, id, owner)
					if err != nil {
						if !errors.Is(err, store.ErrNotPending) {
							t.Errorf("claim %s: %v", id, err)
						}
						continue
					}
					mu.Lock()
					wins[got.ID] = append(wins[got.ID], owner)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, tk := range must[[]store.Task](t)(tasks.List(ctx)) {
			if w := wins[tk.ID]; len(w) != 1 || w[0] != tk.Owner {
				t.Errorf("task %s: winners %v, owner %q", tk.ID, w, tk.Owner)
			}
		}
	},
	"HandedOutTasksAreCopies": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		createN(t, tasks, 1)
		must[store.Task](t)(tasks.Create(ctx, store.Task{Subject: "b", BlockedBy: []string{"1"}, Metadata: map[string]any{"tags": []any{"x"}, "m": map[string]any{"k": "v"}}}))
		want := must[store.Task](t)(tasks.Get(ctx, "2"))
		for range 2 { // the second time from what a backend may have kept of the first
			for _, got := range []store.Task{must[store.Task](t)(tasks.Get(ctx, "2")), must[[]store.Task](t)(tasks.List(ctx))[1]} {
				got.BlockedBy[0] = "99"
				got.Metadata["tags"].([]any)[0] = "changed"
				got.Metadata["m"].(map[string]any)["k"] = "changed"
				got.Metadata["new"] = true
			}
		}
		if diff := cmp.Diff(want, must[store.Task](t)(tasks.Get(ctx, "2"))); diff != "" {
			t.Errorf("changing handed-out tasks changed the board (-want +got):\n%s", diff)
		}
	},
	"BoardIsListWhenNothingIsBroken": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		b := must[store.Board](t)(tasks.Board(ctx))
		if len(b.Tasks) != 0 || len(b.Corrupt) != 0 {
			t.Errorf("Board of an empty board = %+v", b)
		}
		createN(t, tasks, 3)
		must[store.Task](t)(tasks.Update(ctx, "2", func(t *store.Task) error { t.Status = store.TaskDeleted; return nil }))
		b = must[store.Board](t)(tasks.Board(ctx))
		if diff := cmp.Diff(must[[]store.Task](t)(tasks.List(ctx)), b.Tasks); diff != "" {
			t.Errorf("Board.Tasks differs from List (-list +board):\n%s", diff)
		}
		if len(b.Corrupt) != 0 {
			t.Errorf("Board.Corrupt of a sound board = %v", b.Corrupt)
		}
	},
	"WatchWakes": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		tasks := newTeam(t, s).Tasks()
		ctx, cancel := context.WithCancel(ctxFor(t))
		ch := must[<-chan struct{}](t)(tasks.Watch(ctx))
		must[store.Task](t)(tasks.Create(ctxFor(t), store.Task{Subject: "same client"}))
		waitWake(t, ch, "create by the same client")
		drain(ch)
		must[store.Task](t)(reopen(t, o, "t1").Tasks().Claim(ctxFor(t), "1", "bob"))
		waitWake(t, ch, "claim by another client")
		cancel()
		for range ch {
		} // closed when ctx ends
	},
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func send(t *testing.T, mb store.Mailbox, from, to, content string) store.Message {
	t.Helper()
	m, err := mb.Send(ctxFor(t), store.Message{From: from, To: to, Content: content})
	if err != nil {
		t.Fatalf("send %s->%s: %v", from, to, err)
	}
	return m
}

func contents(ms []store.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Content)
	}
	return out
}

var mailboxTests = map[string]func(*testing.T, Factory){
	"SendValidation": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		mb := newTeam(t, s, "alice", "bob").Mailbox()
		_, err := mb.Send(ctx, store.Message{From: "human", To: "mallory", Content: "x"})
		wantErr(t, err, store.ErrUnknownMember)
		for _, name := range []string{"team-lead", "alice", "bob"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not list %s", err, name)
			}
		}
		_, err = mb.Send(ctx, store.Message{From: "mallory", To: "alice", Content: "x"})
		wantErr(t, err, store.ErrUnknownMember)
		_, err = mb.Send(ctx, store.Message{From: "alice", To: "bob", Type: "gossip"})
		wantErr(t, err, store.ErrInvalidMessage)
		m := send(t, mb, "Human", "LEAD", "hello")
		if m.To != store.LeadName || m.From != store.HumanName || m.Type != store.TypeMessage || m.ID == "" || m.Timestamp.IsZero() {
			t.Errorf("sent message = %+v", m)
		}
		m2 := send(t, mb, "alice", "team-lead", "second")
		if m2.ID == m.ID {
			t.Error("two messages with one id")
		}
		got := must[[]store.Message](t)(mb.Peek(ctx, "lead"))
		if diff := cmp.Diff([]store.Message{m, m2}, got, cmpopts.EquateApproxTime(0)); diff != "" {
			t.Errorf("Peek (-want +got):\n%s", diff)
		}
	},
	"ReceiveAckPeek": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		mb := newTeam(t, s, "alice").Mailbox()
		for i := range 3 {
			send(t, mb, "human", "alice", fmt.Sprint(i))
		}
		got := must[[]store.Message](t)(mb.Receive(ctx, "alice"))
		if diff := cmp.Diff([]string{"0", "1", "2"}, contents(got)); diff != "" {
			t.Fatalf("Receive (-want +got):\n%s", diff)
		}
		// Received but not acked: still in the inbox, not handed out again.
		if n := len(must[[]store.Message](t)(mb.Peek(ctx, "alice"))); n != 3 {
			t.Errorf("Peek after Receive: %d messages, want 3", n)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if again, err := mb.Receive(done, "alice"); len(again) != 0 || !errors.Is(err, context.Canceled) {
			t.Errorf("second Receive = %v, %v; want nothing, context.Canceled", contents(again), err)
		}
		if err := mb.Ack(ctx, "alice", got[1].ID); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"2"}, contents(must[[]store.Message](t)(mb.Peek(ctx, "alice")))); diff != "" {
			t.Errorf("Peek after acking 2 of 3 (-want +got):\n%s", diff)
		}
		wantErr(t, mb.Ack(ctx, "alice", "no-such-id"), store.ErrNotReceived)
		if err := mb.Ack(ctx, "alice", got[2].ID); err != nil {
			t.Fatal(err)
		}
		if n := len(must[[]store.Message](t)(mb.Peek(ctx, "alice"))); n != 0 {
			t.Errorf("Peek after acking all: %d messages", n)
		}
		// After the inbox was cleared, new messages still arrive.
		send(t, mb, "human", "alice", "3")
		if diff := cmp.Diff([]string{"3"}, contents(must[[]store.Message](t)(mb.Receive(ctx, "alice")))); diff != "" {
			t.Errorf("Receive after clearing (-want +got):\n%s", diff)
		}
		_, err := mb.Receive(ctx, "mallory")
		wantErr(t, err, store.ErrUnknownMember)
	},
	"ReceiveBlocksUntilSend": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		mb := newTeam(t, s, "alice").Mailbox()
		other := reopen(t, o, "t1").Mailbox()
		for _, sender := range []store.Mailbox{mb, other} {
			got := make(chan []store.Message)
			go func() {
				ms, err := mb.Receive(ctx, "alice")
				if err != nil {
					t.Error(err)
				}
				got <- ms
			}()
			m := send(t, sender, "human", "alice", "wake up")
			ms := <-got
			if len(ms) != 1 || ms[0].ID != m.ID {
				t.Fatalf("Receive = %+v", ms)
			}
			if err := mb.Ack(ctx, "alice", m.ID); err != nil {
				t.Fatal(err)
			}
		}
		// A Receive with nothing to hand out ends with its context.
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error)
		go func() {
			_, err := mb.Receive(cctx, "alice")
			errc <- err
		}()
		cancel()
		wantErr(t, <-errc, context.Canceled)
	},
	"RedeliveryAfterRestart": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		mb := newTeam(t, s, "alice").Mailbox()
		for i := range 4 {
			send(t, mb, "human", "alice", fmt.Sprint(i))
		}
		got := must[[]store.Message](t)(mb.Receive(ctx, "alice"))
		if err := mb.Ack(ctx, "alice", got[1].ID); err != nil {
			t.Fatal(err)
		}
		// A new client (a restarted reader) gets the unacked ones again,
		// never the acked ones.
		s.Close()
		mb2 := reopen(t, o, "t1").Mailbox()
		again := must[[]store.Message](t)(mb2.Receive(ctx, "alice"))
		if diff := cmp.Diff([]string{"2", "3"}, contents(again)); diff != "" {
			t.Errorf("after restart (-want +got):\n%s", diff)
		}
	},
	"Broadcast": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		mb := newTeam(t, s, "alice", "bob", "carol").Mailbox()
		sent := must[[]store.Message](t)(mb.Broadcast(ctx, store.Message{From: "alice", Content: "all"}))
		var to []string
		for _, m := range sent {
			to = append(to, m.To)
			if m.Type != store.TypeBroadcast {
				t.Errorf("type %q", m.Type)
			}
		}
		if diff := cmp.Diff([]string{"team-lead", "bob", "carol"}, to); diff != "" {
			t.Errorf("broadcast recipients (-want +got):\n%s", diff)
		}
		if n := len(must[[]store.Message](t)(mb.Peek(ctx, "alice"))); n != 0 {
			t.Errorf("sender got its own broadcast")
		}
		if n := len(must[[]store.Message](t)(mb.Peek(ctx, "carol"))); n != 1 {
			t.Errorf("carol has %d messages", n)
		}
	},
	"ConcurrentSendersDrainingReader": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		newTeam(t, s, "alice", "bob")
		reader := reopen(t, o, "t1").Mailbox()
		const senders, each = 6, 60
		var wg sync.WaitGroup
		for w := range senders {
			mb := reopen(t, o, "t1").Mailbox()
			wg.Go(func() {
				for i := range each {
					if _, err := mb.Send(ctx, store.Message{From: "bob", To: "alice", Content: fmt.Sprintf("%d/%d", w, i)}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		seen := map[string]int{}
		last := make([]int, senders)
		for i := range last {
			last[i] = -1
		}
		for len(seen) < senders*each && !t.Failed() {
			ms, err := reader.Receive(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				seen[m.Content]++
				var w, i int
				fmt.Sscanf(m.Content, "%d/%d", &w, &i)
				if i <= last[w] {
					t.Errorf("sender %d: message %d after %d", w, i, last[w])
				}
				last[w] = i
			}
			if err := reader.Ack(ctx, "alice", ms[len(ms)-1].ID); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		for c, n := range seen {
			if n != 1 {
				t.Errorf("%s delivered %d times", c, n)
			}
		}
		if rest := must[[]store.Message](t)(reader.Peek(ctx, "alice")); len(rest) != 0 {
			t.Errorf("%d messages left after all were acked", len(rest))
		}
	},
	// Ids are unique per inbox: a message that repeats the id of one already
	// handed out is not handed out again, whether it is the same message
	// sent twice (a retried send) or a different one reusing the id.
	"DuplicateIDHandedOutOnce": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		mb := newTeam(t, s, "alice").Mailbox()
		first := must[store.Message](t)(mb.Send(ctx, store.Message{ID: "dup-1", From: "human", To: "alice", Content: "first"}))
		must[store.Message](t)(mb.Send(ctx, first))
		must[store.Message](t)(mb.Send(ctx, store.Message{ID: "dup-1", From: "human", To: "alice", Content: "forged"}))
		last := send(t, mb, "human", "alice", "last")
		var got []store.Message
		for len(got) == 0 || got[len(got)-1].ID != last.ID {
			ms := must[[]store.Message](t)(mb.Receive(ctx, "alice"))
			got = append(got, ms...)
		}
		if diff := cmp.Diff([]string{"first", "last"}, contents(got)); diff != "" {
			t.Errorf("handed out (-want +got):\n%s", diff)
		}
		if err := mb.Ack(ctx, "alice", last.ID); err != nil {
			t.Fatal(err)
		}
		if rest := must[[]store.Message](t)(mb.Peek(ctx, "alice")); len(rest) != 0 {
			t.Errorf("left after acking the last: %v", contents(rest))
		}
	},
	"WatchWakes": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		mb := newTeam(t, s, "alice").Mailbox()
		ctx, cancel := context.WithCancel(ctxFor(t))
		ch := must[<-chan struct{}](t)(mb.Watch(ctx, "alice"))
		send(t, mb, "human", "alice", "1")
		waitWake(t, ch, "send by the same client")
		drain(ch)
		send(t, reopen(t, o, "t1").Mailbox(), "human", "alice", "2")
		waitWake(t, ch, "send by another client")
		cancel()
		for range ch {
		}
		if _, err := mb.Watch(ctx, "nobody"); !errors.Is(err, store.ErrUnknownMember) {
			t.Errorf("Watch of an unknown member: %v", err)
		}
	},
}

func damageTests(d Damage) map[string]func(*testing.T, Factory) {
	needs := func(test func(*testing.T, Factory)) func(*testing.T, Factory) {
		return func(t *testing.T, f Factory) {
			if d == nil {
				t.Skip("the backend gave no storetest.Damage to break its state with")
			}
			test(t, f)
		}
	}
	return map[string]func(*testing.T, Factory){
		// A task that cannot be read is on the board as corrupt, never
		// silently gone; the rest of the board keeps working around it.
		"CorruptTaskIsReported": needs(func(t *testing.T, f Factory) {
			o, s := open(t, f)
			ctx := ctxFor(t)
			tasks := newTeam(t, s).Tasks()
			createN(t, tasks, 3)
			d.CorruptTask(t, s, "t1", "2")
			for _, client := range []store.Tasks{tasks, reopen(t, o, "t1").Tasks()} {
				b := must[store.Board](t)(client.Board(ctx))
				if diff := cmp.Diff([]string{"1", "3"}, ids(b.Tasks)); diff != "" {
					t.Errorf("Board.Tasks (-want +got):\n%s", diff)
				}
				if len(b.Corrupt) != 1 || b.Corrupt[0].ID != "2" || b.Corrupt[0].Err == "" {
					t.Errorf("Board.Corrupt = %+v, want task 2 with a reason", b.Corrupt)
				}
				if diff := cmp.Diff([]string{"1", "3"}, ids(must[[]store.Task](t)(client.List(ctx)))); diff != "" {
					t.Errorf("List (-want +got):\n%s", diff)
				}
			}
			if _, err := tasks.Get(ctx, "2"); err == nil || errors.Is(err, store.ErrTaskNotFound) {
				t.Errorf("Get of a corrupt task = %v, want an error other than not found", err)
			}
			for _, want := range []string{"1", "3"} {
				if got := must[store.Task](t)(tasks.ClaimNext(ctx, "alice")); got.ID != want {
					t.Errorf("ClaimNext = task %s, want %s", got.ID, want)
				}
			}
			_, err := tasks.ClaimNext(ctx, "alice")
			wantErr(t, err, store.ErrNoTask)
			if got := must[store.Task](t)(tasks.Create(ctx, store.Task{Subject: "after"})); got.ID != "4" {
				t.Errorf("Create next to a corrupt task 2 = id %s, want 4", got.ID)
			}
		}),
		// One team whose roster cannot be read does not hide the others.
		"CorruptRosterIsReported": needs(func(t *testing.T, f Factory) {
			o, s := open(t, f)
			ctx := ctxFor(t)
			newTeam(t, s, "alice")
			must[store.Team](t)(s.CreateTeam(ctx, store.Roster{Name: "t2"}))
			must[store.Team](t)(s.CreateTeam(ctx, store.Roster{Name: "t3"}))
			d.CorruptRoster(t, s, "t2")
			for _, client := range []store.Store{s, o()} {
				l := must[store.TeamList](t)(client.Teams(ctx))
				var names []string
				for _, r := range l.Rosters {
					names = append(names, r.Name)
				}
				if diff := cmp.Diff([]string{"t1", "t3"}, names); diff != "" {
					t.Errorf("Teams rosters (-want +got):\n%s", diff)
				}
				if len(l.Corrupt) != 1 || l.Corrupt[0].ID != "t2" || l.Corrupt[0].Err == "" {
					t.Errorf("Teams corrupt = %+v, want t2 with a reason", l.Corrupt)
				}
				if _, err := client.ListTeams(ctx); err == nil || !strings.Contains(err.Error(), "t2") {
					t.Errorf("ListTeams with a corrupt roster = %v, want an error naming t2", err)
				}
			}
		}),
	}
}

var journalTests = map[string]func(*testing.T, Factory){
	"AppendReadTail": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		j := newTeam(t, s).Journal()
		j2 := reopen(t, o, "t1").Journal()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 10 {
					err := []store.Journal{j, j2}[w%2].Append(ctx, store.Event{Type: "send", Agent: fmt.Sprintf("a%d", w), Fields: map[string]any{"n": i}})
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		all := must[[]store.Event](t)(j.Read(ctx))
		if len(all) != 40 {
			t.Fatalf("%d events, want 40", len(all))
		}
		for _, e := range all {
			if e.Team != "t1" || e.Type != "send" || e.TS.IsZero() || e.Fields["n"] == nil {
				t.Errorf("event %+v", e)
			}
		}
		tail := must[[]store.Event](t)(j2.Tail(ctx, 3))
		if diff := cmp.Diff(all[37:], tail); diff != "" {
			t.Errorf("Tail (-want +got):\n%s", diff)
		}
		if err := j.Append(ctx, store.Event{}); err == nil {
			t.Error("event without type accepted")
		}
	},
}
