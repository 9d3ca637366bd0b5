package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/troupe-dev/troupe/internal/store"
)

// rosterCache keeps the last parsed config.json of a team, valid while the
// file is the same inode with the same size and mtime (every write is a
// rename of a new file, so a change always shows).
type rosterCache struct {
	fi fs.FileInfo
	r  store.Roster
}

// ReadRoster returns the team's roster.
func (t *Team) ReadRoster(ctx context.Context) (store.Roster, error) {
	path := t.path("config.json")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return store.Roster{}, fmt.Errorf("team %s: %w", t.name, store.ErrTeamNotFound)
	}
	if err != nil {
		return store.Roster{}, err
	}
	t.s.mu.Lock()
	c := t.s.rosters[t.key]
	t.s.mu.Unlock()
	if c != nil && os.SameFile(c.fi, fi) && c.fi.Size() == fi.Size() && c.fi.ModTime().Equal(fi.ModTime()) {
		return cloneRoster(c.r), nil
	}
	r, fi, err := t.readRosterFile()
	if err != nil {
		return store.Roster{}, err
	}
	t.s.mu.Lock()
	t.s.rosters[t.key] = &rosterCache{fi: fi, r: r}
	t.s.mu.Unlock()
	return cloneRoster(r), nil
}

func (t *Team) readRosterFile() (store.Roster, fs.FileInfo, error) {
	f, err := os.Open(t.path("config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return store.Roster{}, nil, fmt.Errorf("team %s: %w", t.name, store.ErrTeamNotFound)
	}
	if err != nil {
		return store.Roster{}, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return store.Roster{}, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return store.Roster{}, nil, fmt.Errorf("read roster of team %s: %w", t.name, err)
	}
	var r store.Roster
	if err := json.Unmarshal(data, &r); err != nil {
		return store.Roster{}, nil, fmt.Errorf("read roster of team %s: %w", t.name, err)
	}
	if err := validateRoster(&r); err != nil {
		return store.Roster{}, nil, fmt.Errorf("read roster of team %s: %w", t.name, err)
	}
	if r.Members == nil {
		r.Members = []store.Member{}
	}
	return r, fi, nil
}

// UpdateRoster applies fn to the roster under the roster lock and writes it
// back atomically.
func (t *Team) UpdateRoster(ctx context.Context, fn func(*store.Roster) error) (store.Roster, error) {
	var out store.Roster
	err := t.s.locks.withLock(ctx, t.path("config.lock"), func() error {
		cur, _, err := t.readRosterFile()
		if err != nil {
			return err
		}
		next := cloneRoster(cur)
		if err := fn(&next); err != nil {
			return err
		}
		next.Name, next.Lead, next.CreatedAt = cur.Name, cur.Lead, cur.CreatedAt
		if err := validateRoster(&next); err != nil {
			return fmt.Errorf("update roster of team %s: %w", t.name, err)
		}
		data, err := marshalRoster(&next)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(t.path("config.json"), data); err != nil {
			return fmt.Errorf("update roster of team %s: %w", t.name, err)
		}
		out = next
		return nil
	})
	if err != nil {
		return store.Roster{}, err
	}
	return cloneRoster(out), nil
}

// validateRoster normalises member names in place and refuses duplicates
// and reserved names.
func validateRoster(r *store.Roster) error {
	seen := make(map[string]bool, len(r.Members))
	for i := range r.Members {
		m := &r.Members[i]
		n, err := store.NormalizeMemberName(m.Name)
		if err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("%w: %s", store.ErrMemberExists, n)
		}
		seen[n] = true
		m.Name = n
	}
	return nil
}

func cloneRoster(r store.Roster) store.Roster {
	r.Members = slices.Clone(r.Members)
	if r.Members == nil {
		r.Members = []store.Member{}
	}
	return r
}
