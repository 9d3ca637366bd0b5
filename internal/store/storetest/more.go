package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/store"
)

// compactJSON is line as a store keeps it.
func compactJSON(t *testing.T, line string) json.RawMessage {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(line)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var transcriptTests = map[string]func(*testing.T, Factory){
	"AppendRead": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		tr := newTeam(t, s, "alice", "bob").Transcripts()
		lines := []string{`{"role": "user", "n": 1}`, `{"type":"spawn"}`, "[1, 2,\n 3]"}
		for _, l := range lines {
			if err := tr.Append(ctx, "alice", json.RawMessage(l)); err != nil {
				t.Fatalf("Append(%s): %v", l, err)
			}
		}
		if err := tr.Append(ctx, "bob", json.RawMessage(`"bob's"`)); err != nil {
			t.Fatal(err)
		}
		var want []json.RawMessage
		for _, l := range lines {
			want = append(want, compactJSON(t, l))
		}
		for _, c := range []store.Transcripts{tr, reopen(t, o, "t1").Transcripts()} {
			if diff := cmp.Diff(want, must[[]json.RawMessage](t)(c.Read(ctx, "alice"))); diff != "" {
				t.Errorf("alice's transcript (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]json.RawMessage{json.RawMessage(`"bob's"`)}, must[[]json.RawMessage](t)(c.Read(ctx, "bob"))); diff != "" {
				t.Errorf("bob's transcript (-want +got):\n%s", diff)
			}
			if got := must[[]json.RawMessage](t)(c.Read(ctx, "carol")); len(got) != 0 {
				t.Errorf("transcript of a member without one = %s", got)
			}
		}
	},
	"Refused": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		tr := newTeam(t, s, "alice").Transcripts()
		for _, line := range []string{"", "not json", `{"a":1} {"b":2}`, `{"a":`} {
			if err := tr.Append(ctx, "alice", json.RawMessage(line)); err == nil {
				t.Errorf("Append(%q) accepted", line)
			}
		}
		wantErr(t, tr.Append(ctx, "../x", json.RawMessage(`{}`)), store.ErrInvalidName)
		_, err := tr.Read(ctx, "../x")
		wantErr(t, err, store.ErrInvalidName)
		if got := must[[]json.RawMessage](t)(tr.Read(ctx, "alice")); len(got) != 0 {
			t.Errorf("refused lines were kept: %s", got)
		}
	},
	"ConcurrentAppendsNoneLost": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		clients := []store.Transcripts{newTeam(t, s, "alice").Transcripts(), reopen(t, o, "t1").Transcripts()}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 20 {
					line := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
					if err := clients[w%2].Append(ctx, "alice", json.RawMessage(line)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		last := map[int]int{0: -1, 1: -1, 2: -1, 3: -1}
		got := must[[]json.RawMessage](t)(clients[0].Read(ctx, "alice"))
		for _, raw := range got {
			var l struct{ W, I int }
			if err := json.Unmarshal(raw, &l); err != nil {
				t.Fatalf("line %s: %v", raw, err)
			}
			if l.I != last[l.W]+1 {
				t.Errorf("writer %d: line %d after %d", l.W, l.I, last[l.W])
			}
			last[l.W] = l.I
		}
		if len(got) != 80 {
			t.Errorf("%d lines, want 80", len(got))
		}
	},
}

var journalCursorTests = map[string]func(*testing.T, Factory){
	"ReadAfterResumes": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		j := newTeam(t, s).Journal()
		appendN := func(j store.Journal, from, n int) {
			t.Helper()
			for i := from; i < from+n; i++ {
				if err := j.Append(ctx, store.Event{Type: "step", Agent: "a", Fields: map[string]any{"n": i}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		nums := func(evs []store.Event) []string {
			out := []string{}
			for _, e := range evs {
				out = append(out, e.Field("n"))
			}
			return out
		}
		evs, c0, err := j.ReadAfter(ctx, "")
		if err != nil || len(evs) != 0 {
			t.Fatalf("ReadAfter of an empty journal = %v, %v", evs, err)
		}
		appendN(j, 0, 3)
		evs, c1 := must2(t)(j.ReadAfter(ctx, c0))
		if diff := cmp.Diff([]string{"0", "1", "2"}, nums(evs)); diff != "" {
			t.Fatalf("first read (-want +got):\n%s", diff)
		}
		if evs, _ := must2(t)(j.ReadAfter(ctx, c1)); len(evs) != 0 {
			t.Errorf("read at the end = %v, want nothing", nums(evs))
		}
		appendN(reopen(t, o, "t1").Journal(), 3, 2)
		evs, c2 := must2(t)(j.ReadAfter(ctx, c1))
		if diff := cmp.Diff([]string{"3", "4"}, nums(evs)); diff != "" {
			t.Fatalf("read after another client appended (-want +got):\n%s", diff)
		}
		// A cursor outlives its client: a new one resumes from it.
		j2 := reopen(t, o, "t1").Journal()
		evs, _ = must2(t)(j2.ReadAfter(ctx, c1))
		if diff := cmp.Diff([]string{"3", "4"}, nums(evs)); diff != "" {
			t.Errorf("resumed from a saved cursor after reopen (-want +got):\n%s", diff)
		}
		if evs, _ := must2(t)(j2.ReadAfter(ctx, c2)); len(evs) != 0 {
			t.Errorf("resumed at the end = %v, want nothing", nums(evs))
		}
		all := must[[]store.Event](t)(j2.Read(ctx))
		evs, _ = must2(t)(j2.ReadAfter(ctx, ""))
		if diff := cmp.Diff(all, evs); diff != "" {
			t.Errorf("ReadAfter from the start differs from Read (-read +after):\n%s", diff)
		}
		_, _, err = j.ReadAfter(ctx, "not a cursor!")
		wantErr(t, err, store.ErrInvalidCursor)
	},
	"FollowWhileAppending": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		j := newTeam(t, s).Journal()
		ch := must[<-chan struct{}](t)(j.Watch(ctx))
		const n = 60
		w := reopen(t, o, "t1").Journal()
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range n {
				if err := w.Append(ctx, store.Event{Type: "step", Fields: map[string]any{"n": i}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		var got []string
		var c store.Cursor
		for len(got) < n {
			evs, next, err := j.ReadAfter(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			c = next
			for _, e := range evs {
				got = append(got, e.Field("n"))
			}
			if len(got) < n {
				waitWake(t, ch, fmt.Sprintf("event %d appended", len(got)))
			}
		}
		wg.Wait()
		want := make([]string, n)
		for i := range want {
			want[i] = fmt.Sprint(i)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("followed events (-want +got):\n%s", diff)
		}
	},
	"WatchWakes": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		j := newTeam(t, s).Journal()
		ctx, cancel := context.WithCancel(ctxFor(t))
		ch := must[<-chan struct{}](t)(j.Watch(ctx))
		must[struct{}](t)(struct{}{}, j.Append(ctxFor(t), store.Event{Type: "same client"}))
		waitWake(t, ch, "append by the same client")
		drain(ch)
		must[struct{}](t)(struct{}{}, reopen(t, o, "t1").Journal().Append(ctxFor(t), store.Event{Type: "other client"}))
		waitWake(t, ch, "append by another client")
		cancel()
		for range ch {
		} // closed when ctx ends
	},
}

func must2(t *testing.T) func([]store.Event, store.Cursor, error) ([]store.Event, store.Cursor) {
	return func(evs []store.Event, c store.Cursor, err error) ([]store.Event, store.Cursor) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return evs, c
	}
}

var archiveTests = map[string]func(*testing.T, Factory){
	"KeepsStateAndFreesName": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		tm := newTeam(t, s, "alice")
		must[struct{}](t)(struct{}{}, tm.Journal().Append(ctx, store.Event{Type: "before"}))
		must[struct{}](t)(struct{}{}, tm.Transcripts().Append(ctx, "alice", json.RawMessage(`{"said":"hi"}`)))
		must[store.Task](t)(tm.Tasks().Create(ctx, store.Task{Subject: "kept"}))
		a := must[store.Archive](t)(s.ArchiveTeam(ctx, "T1"))
		if a.ID == "" || a.Team != "t1" || a.ArchivedAt.IsZero() {
			t.Errorf("archive = %+v", a)
		}
		_, err := s.Team(ctx, "t1")
		wantErr(t, err, store.ErrTeamNotFound)
		if rs := must[[]store.Roster](t)(s.ListTeams(ctx)); len(rs) != 0 {
			t.Errorf("archived team still listed: %+v", rs)
		}
		fresh := newTeam(t, s) // the name is free again, and the new team starts empty
		if got := must[[]store.Task](t)(fresh.Tasks().List(ctx)); len(got) != 0 {
			t.Errorf("new team under the archived name has tasks %v", ids(got))
		}
		for _, c := range []store.Store{s, o()} {
			as := must[[]store.Archive](t)(c.Archives(ctx, "t1"))
			if len(as) != 1 || as[0].ID != a.ID || as[0].Team != "t1" || !as[0].ArchivedAt.Equal(a.ArchivedAt) {
				t.Fatalf("Archives(t1) = %+v, want [%+v]", as, a)
			}
			old := must[store.Team](t)(c.OpenArchive(ctx, a.ID))
			if old.Name() != "t1" {
				t.Errorf("archived team's name = %q", old.Name())
			}
			r := must[store.Roster](t)(old.ReadRoster(ctx))
			if _, ok := r.Member("alice"); !ok {
				t.Errorf("archived roster = %+v", r)
			}
			evs := must[[]store.Event](t)(old.Journal().Read(ctx))
			if len(evs) != 1 || evs[0].Type != "before" {
				t.Errorf("archived journal = %+v", evs)
			}
			if diff := cmp.Diff([]json.RawMessage{json.RawMessage(`{"said":"hi"}`)}, must[[]json.RawMessage](t)(old.Transcripts().Read(ctx, "alice"))); diff != "" {
				t.Errorf("archived transcript (-want +got):\n%s", diff)
			}
			if got := must[[]store.Task](t)(old.Tasks().List(ctx)); differ(ids(got), []string{"1"}) {
				t.Errorf("archived board = %v", ids(got))
			}
		}
		// The live team of the same name and its archive do not mix.
		must[struct{}](t)(struct{}{}, fresh.Journal().Append(ctx, store.Event{Type: "after"}))
		old := must[store.Team](t)(s.OpenArchive(ctx, a.ID))
		if evs := must[[]store.Event](t)(old.Journal().Read(ctx)); len(evs) != 1 {
			t.Errorf("archived journal after the new team wrote = %+v", evs)
		}
		// A second archive of the name comes after the first.
		b := must[store.Archive](t)(s.ArchiveTeam(ctx, "t1"))
		as := must[[]store.Archive](t)(s.Archives(ctx, "t1"))
		if got := []string{as[0].ID, as[len(as)-1].ID}; len(as) != 2 || got[0] != a.ID || got[1] != b.ID {
			t.Errorf("Archives(t1) = %+v, want %s then %s", as, a.ID, b.ID)
		}
	},
	"WatchesTheTeamMadeAgain": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		newTeam(t, s)
		other := o()
		wctx, cancel := context.WithCancel(ctx)
		must[<-chan struct{}](t)(must[store.Team](t)(other.Team(ctx, "t1")).Tasks().Watch(wctx))
		cancel()
		must[store.Archive](t)(s.ArchiveTeam(ctx, "t1"))
		again := newTeam(t, s)
		// The other client watches the new team, not the archived one.
		tm := must[store.Team](t)(other.Team(ctx, "t1"))
		board := must[<-chan struct{}](t)(tm.Tasks().Watch(ctx))
		journal := must[<-chan struct{}](t)(tm.Journal().Watch(ctx))
		must[store.Task](t)(again.Tasks().Create(ctx, store.Task{Subject: "new"}))
		waitWake(t, board, "task created in the team made again")
		must[struct{}](t)(struct{}{}, again.Journal().Append(ctx, store.Event{Type: "new"}))
		waitWake(t, journal, "event appended in the team made again")
	},
	"Errors": func(t *testing.T, f Factory) {
		_, s := open(t, f)
		ctx := ctxFor(t)
		_, err := s.ArchiveTeam(ctx, "nope")
		wantErr(t, err, store.ErrTeamNotFound)
		_, err = s.ArchiveTeam(ctx, "../x")
		wantErr(t, err, store.ErrInvalidName)
		for _, id := range []string{"", "nope", "../../etc", "t1-20260101T000000.000000000Z"} {
			_, err = s.OpenArchive(ctx, id)
			wantErr(t, err, store.ErrArchiveNotFound)
		}
		if as := must[[]store.Archive](t)(s.Archives(ctx, "nope")); len(as) != 0 {
			t.Errorf("Archives of a team never archived = %+v", as)
		}
		// Names that extend another's are not its archives.
		must[store.Team](t)(s.CreateTeam(ctx, store.Roster{Name: "t1-b"}))
		must[store.Archive](t)(s.ArchiveTeam(ctx, "t1-b"))
		if as := must[[]store.Archive](t)(s.Archives(ctx, "t1")); len(as) != 0 {
			t.Errorf("Archives(t1) lists t1-b's: %+v", as)
		}
	},
}

func differ(a, b []string) bool { return !slices.Equal(a, b) }

// claimUntilNone runs six workers at once, each claiming with the claim
// worker(w) returns until it answers ErrNoTask, and returns the owners
// that won each task. A claim must be won by the worker that asked
// (owner w<n>), in progress.
func claimUntilNone(t *testing.T, worker func(w int) func() (store.Task, error)) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	won := map[string][]string{}
	var wg sync.WaitGroup
	for w := range 6 {
		claim := worker(w)
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				got, err := claim()
				if errors.Is(err, store.ErrNoTask) {
					return
				}
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if got.Owner != owner || got.Status != store.TaskInProgress {
					t.Errorf("%s claimed %+v", owner, got)
				}
				mu.Lock()
				won[got.ID] = append(won[got.ID], owner)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return won
}

var boardConcurrencyTests = map[string]func(*testing.T, Factory){
	"ClaimNextLowestAndExactlyOnce": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		const n = 30
		createN(t, tasks, n)
		// Every even task waits on task 1, which nobody completes: they are
		// never claimable, while 1 and the odd ones are.
		for i := 2; i <= n; i += 2 {
			must[store.Task](t)(tasks.Update(ctx, fmt.Sprint(i), setDeps("1")))
		}
		clients := []store.Tasks{tasks, reopen(t, o, "t1").Tasks()}
		won := claimUntilNone(t, func(w int) func() (store.Task, error) {
			owner, last := fmt.Sprintf("w%d", w), uint64(0)
			return func() (store.Task, error) {
				got, err := clients[w%2].ClaimNext(ctx, owner)
				// Claims by one worker come in increasing id order: each
				// took the lowest claimable task.
				if num := store.TaskNum(got.ID); err == nil && num <= last {
					t.Errorf("%s claimed %s after %d", owner, got.ID, last)
				} else if err == nil {
					last = num
				}
				return got, err
			}
		})
		for _, tk := range must[[]store.Task](t)(tasks.List(ctx)) {
			num := store.TaskNum(tk.ID)
			w := won[tk.ID]
			switch {
			case num%2 == 0 && num != 0 && len(w) != 0:
				t.Errorf("blocked task %s claimed by %v", tk.ID, w)
			case num%2 == 1 && (len(w) != 1 || w[0] != tk.Owner):
				t.Errorf("task %s: winners %v, owner %q", tk.ID, w, tk.Owner)
			}
		}
	},
	"ClaimFirstExactlyOnce": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		tasks := newTeam(t, s).Tasks()
		const n = 30
		createN(t, tasks, n)
		clients := []store.Tasks{tasks, reopen(t, o, "t1").Tasks()}
		won := claimUntilNone(t, func(w int) func() (store.Task, error) {
			// Each worker asks in an order of its own, overlapping the
			// others'.
			ids := make([]string, n)
			for i := range n {
				ids[i] = fmt.Sprint((i+w*5)%n + 1)
			}
			owner := fmt.Sprintf("w%d", w)
			return func() (store.Task, error) { return clients[w%2].ClaimFirst(ctx, owner, ids) }
		})
		for _, tk := range must[[]store.Task](t)(tasks.List(ctx)) {
			if w := won[tk.ID]; len(w) != 1 || w[0] != tk.Owner {
				t.Errorf("task %s: winners %v, owner %q", tk.ID, w, tk.Owner)
			}
		}
		if len(won) != n {
			t.Errorf("%d tasks won, want %d", len(won), n)
		}
	},
	"CrossedDependenciesOneWins": func(t *testing.T, f Factory) {
		o, s := open(t, f)
		ctx := ctxFor(t)
		a := newTeam(t, s).Tasks()
		b := reopen(t, o, "t1").Tasks()
		for round := range 8 {
			x, y := fmt.Sprint(2*round+1), fmt.Sprint(2*round+2)
			createN(t, a, 2)
			var errs [2]error
			var wg sync.WaitGroup
			wg.Go(func() { _, errs[0] = a.Update(ctx, x, setDeps(y)) })
			wg.Go(func() { _, errs[1] = b.Update(ctx, y, setDeps(x)) })
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, store.ErrCycle):
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if ok != 1 {
				t.Fatalf("round %d: %d of two crossed dependencies applied (%v)", round, ok, errs)
			}
			tx, ty := must[store.Task](t)(a.Get(ctx, x)), must[store.Task](t)(a.Get(ctx, y))
			if len(tx.BlockedBy)+len(ty.BlockedBy) != 1 || len(tx.Blocks)+len(ty.Blocks) != 1 {
				t.Fatalf("round %d: links %s=%v/%v %s=%v/%v", round, x, tx.BlockedBy, tx.Blocks, y, ty.BlockedBy, ty.Blocks)
			}
		}
	},
}
