package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/troupe-dev/troupe/internal/secret"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/llm"
	"github.com/troupe-dev/troupe/internal/store"
	"github.com/troupe-dev/troupe/internal/team"
)

// sessionRecord is what `troupe -p` keeps of a run so that --continue and
// --resume can carry on from it: the lead's conversation, and the team it
// led when it ended (a team still on disk resumes whole).
type sessionRecord struct {
	SessionID string        `json:"session_id"`
	Team      string        `json:"team,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
	Messages  []llm.Message `json:"messages"`
}

// sessionIDPattern is the form of session ids troupe makes (UUIDs); any
// other --resume argument is taken for a team name.
var sessionIDPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
})

func sessionsDir(stateDir string) string { return filepath.Join(stateDir, "sessions") }

func sessionPath(stateDir, id string) string {
	return filepath.Join(sessionsDir(stateDir), id+".json")
}

// saveSession writes rec whole (temp file, fsync, rename).
func saveSession(stateDir string, rec *sessionRecord) error {
	if !sessionIDPattern().MatchString(rec.SessionID) {
		return fmt.Errorf("session id %q is malformed", rec.SessionID)
	}
	if err := os.MkdirAll(sessionsDir(stateDir), 0o755); err != nil {
		return err
	}
	rec.UpdatedAt = time.Now().UTC()
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// It holds the lead's conversation: no secret is written to disk.
	data = secret.RedactBytes(data)
	tmp, err := os.CreateTemp(sessionsDir(stateDir), ".session-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), sessionPath(stateDir, rec.SessionID))
}

func loadSession(stateDir, id string) (*sessionRecord, error) {
	data, err := os.ReadFile(sessionPath(stateDir, id))
	if err != nil {
		return nil, err
	}
	var rec sessionRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &rec, nil
}

// latestSession is the session of the workspace updated last, or nil.
func latestSession(stateDir string) (*sessionRecord, error) {
	ents, err := os.ReadDir(sessionsDir(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var best *sessionRecord
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !sessionIDPattern().MatchString(id) {
			continue
		}
		rec, err := loadSession(stateDir, id)
		if err != nil {
			continue // a record being written, or damaged: not the one to continue
		}
		if best == nil || rec.UpdatedAt.After(best.UpdatedAt) {
			best = rec
		}
	}
	return best, nil
}

// resumeTarget is what --continue or --resume names: a session record, or
// a team still on disk (which comes back whole with every teammate).
type resumeTarget struct {
	rec  *sessionRecord
	team string
}

// findResume resolves --continue and --resume ID. ID is a session id, or
// the name of a team of the workspace.
func (a *app) findResume(ctx context.Context, e *env, cont bool, id string) (*resumeTarget, error) {
	if !cont && id == "" {
		return nil, nil
	}
	if cont && id != "" {
		return nil, withCode(ExitUsage, errors.New("--continue and --resume cannot be used together"))
	}
	var rec *sessionRecord
	var err error
	switch {
	case cont:
		if rec, err = latestSession(e.StateDir); err != nil {
			return nil, withCode(ExitError, err)
		}
		if rec == nil {
			return nil, withCode(ExitError, errors.New("--continue: no earlier session in this workspace"))
		}
	case sessionIDPattern().MatchString(id):
		if rec, err = loadSession(e.StateDir, id); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, withCode(ExitUsage, fmt.Errorf("--resume: no session %s in this workspace", id))
			}
			return nil, withCode(ExitError, err)
		}
	default:
		if _, err := e.Store.Team(ctx, id); err != nil {
			return nil, withCode(ExitUsage, fmt.Errorf("--resume %s: neither a session id nor a team of this workspace (%v)", id, err))
		}
		return &resumeTarget{team: id}, nil
	}
	t := &resumeTarget{rec: rec}
	if rec.Team != "" {
		if _, err := e.Store.Team(ctx, rec.Team); err == nil {
			t.team = rec.Team
		}
	}
	return t, nil
}

// run carries the session on with prompt: a team comes back whole and the
// prompt reaches its lead as a message from the human; a lone lead gets its
// conversation back and the prompt as its next turn.
func (rt *resumeTarget) run(ctx context.Context, e *env, sess *team.Session, prompt string) (*team.Result, error) {
	if rt.team != "" {
		t, err := e.Store.Team(ctx, rt.team)
		if err != nil {
			return &team.Result{}, err
		}
		if _, err := t.Mailbox().Send(ctx, store.Message{Type: store.TypeMessage, From: store.HumanName, To: store.LeadName, Content: prompt}); err != nil {
			return &team.Result{}, fmt.Errorf("resume %s: %w", rt.team, err)
		}
		return sess.Resume(ctx, rt.team)
	}
	sess.Lead().SetMessages(rt.rec.Messages)
	return sess.RunHeadless(ctx, prompt)
}
