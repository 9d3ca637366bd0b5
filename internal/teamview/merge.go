package teamview

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// MergeEntry is one task in the merge queue of teammates who work in
// their own git worktrees, as the task's metadata "merge" records it (the
// team runtime writes it; MergeQueue reads it the same way).
type MergeEntry struct {
	Task    string
	Subject string
	Owner   string
	Branch  string
	// Status is "queued", "merged", "conflict", "no changes" or "failed".
	Status string
	// How is "fast-forward", "merge commit" or "up to date".
	How    string
	Commit string
	// Files are the files that conflicted.
	Files []string
	Error string
	// At is when the task was completed: its place in the queue.
	At time.Time
}

// mergeRecord is the metadata's shape.
type mergeRecord struct {
	Owner     string `json:"owner"`
	Branch    string `json:"branch"`
	Status    string `json:"status"`
	How       string `json:"how"`
	Commit    string `json:"commit"`
	Error     string `json:"error"`
	Conflicts []struct {
		File string `json:"file"`
	} `json:"conflicts"`
	At time.Time `json:"at"`
}

// MergeQueue returns the tasks the merge queue has seen, in completion
// order: queued, merged, conflicting, failed. A record that cannot be
// read is left out.
func (v *View) MergeQueue() []MergeEntry {
	var out []MergeEntry
	for _, t := range v.tasks {
		raw, ok := t.Metadata["merge"]
		if !ok {
			continue
		}
		b, err := json.Marshal(raw)
		if err != nil {
			continue
		}
		var r mergeRecord
		if json.Unmarshal(b, &r) != nil || r.Status == "" {
			continue
		}
		e := MergeEntry{Task: t.ID, Subject: t.Subject, Owner: r.Owner, Branch: r.Branch, Status: r.Status,
			How: r.How, Commit: r.Commit, Error: r.Error, At: r.At}
		for _, c := range r.Conflicts {
			e.Files = append(e.Files, c.File)
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return store.TaskNum(out[i].Task) < store.TaskNum(out[j].Task)
	})
	return out
}
