package app

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/store"
)

// archiver is what the file store adds for deleted teams: the folders of
// their archived copies. It leaves this package when archives join the
// store's contract.
type archiver interface {
	Archived(name string) ([]string, error)
}

// TeamEvents reads team name's journal from st, or, when the team is gone,
// the journal of its latest archived copy.
func TeamEvents(ctx context.Context, st store.Store, name string) ([]store.Event, error) {
	t, err := st.Team(ctx, name)
	if err == nil {
		return t.Journal().Read(ctx)
	}
	if !errors.Is(err, store.ErrTeamNotFound) {
		return nil, err
	}
	ar, ok := st.(archiver)
	if !ok {
		return nil, err
	}
	dirs, aerr := ar.Archived(name)
	if aerr != nil || len(dirs) == 0 {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dirs[len(dirs)-1], "events.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []store.Event
	for _, line := range splitLines(data) {
		var e store.Event
		if json.Unmarshal(line, &e) == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

func splitLines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, data[:i])
		}
		if i == len(data) {
			break
		}
		data = data[i+1:]
	}
	return out
}
