package teamview

import (
	"encoding/json"
	"testing"

	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/teamevent"
)

// FuzzJournal feeds journal lines as a file could hold them: the view never
// panics and its snapshots stay readable.
func FuzzJournal(f *testing.F) {
	for _, seed := range []struct{ typ, fields string }{
		{"task_create", `{"task":"1","subject":"a","blocked_by":["2"]}`},
		{"task_update", `{"task":"1","status":"deleted","owner":"","add_blocks":["1"]}`},
		{"dead", `{"member":"a","freed_tasks":["1","9"]}`},
		{"protocol", `{"kind":"permission_request","request_id":"r","member":"a","approve":true}`},
		{"usage", `{"agent_name":"","input_tokens":-5}`},
		{"send", `{"msg_type":"message","to":"team-lead","content":"x"}`},
		{"nope", `{}`},
	} {
		f.Add(seed.typ, seed.fields)
	}
	f.Fuzz(func(t *testing.T, typ, fields string) {
		var fm map[string]any
		if json.Unmarshal([]byte(fields), &fm) != nil {
			return
		}
		v := New(Options{Driverless: true, MaxTimeline: 3, MaxTranscript: 2, MaxUsage: 2})
		for range 3 {
			env, err := teamevent.Decode(store.Event{Type: typ, Agent: "a", Team: "t", Fields: fm})
			if err != nil {
				return
			}
			v.Apply(t0, env)
		}
		_, _, _, _ = v.Roster(), v.Board(), v.Timeline(Filter{Member: "a"}), v.Transcript(store.LeadName)
		if n := len(v.Timeline(Filter{})); n > 3 {
			t.Errorf("timeline holds %d entries past its bound", n)
		}
	})
}
