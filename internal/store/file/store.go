// Package file is troupe's default store: plain files under the workspace's
// .troupe directory, readable with cat, jq and grep, safe under concurrent
// use by any number of goroutines and processes.
//
// Layout (DESIGN §3), under <stateDir>/teams/<team>/:
//
//	config.json                 roster, replaced whole (temp + fsync + rename) under config.lock
//	roster.jsonl                member records changed since config.json was written, one per line (roster.go)
//	inbox/<member>.jsonl        one message per line, appended under the lock of inbox/<member>.cursor
//	inbox/<member>.cursor       bytes durably consumed, in two slots (cursorfile.go); the inbox's lock file
//	inbox/<member>.bad          malformed lines set aside by the reader
//	tasks/<id>.json             one task per file; tasks/.highwatermark; tasks/.lock
//	tasks/.spare.<n>            a pool of spares that task files are swapped with (spare.go)
//	tasks/.version              the board's change log: the ids each change touched (boardcache.go)
//	transcripts/<member>.jsonl  an agent's conversation, appended under its own lock
//	events.jsonl                the team journal, appended under events.lock
//
// Writers of one process that arrive together share one hold of a lock and
// one fsync (group commit: the journal and transcripts, the board's
// single-file changes, roster updates); each still returns only once its
// own change is durable.
//
// Every append is one write of one line, fsynced, under the file's lock; a
// write or fsync that fails (disk full) cuts the file back to where it was,
// so files end in whole lines. Waiters are woken by channels in this
// process, by fsnotify across processes, and by a poll
// (Options.PollInterval) when nothing else works.
//
// Broken state is reported, never hidden: a task file that does not parse
// is on Tasks.Board as corrupt, a roster that does not parse is in
// Store.Teams as corrupt, and a line that reuses a delivered message's id
// goes to <member>.bad. Temporary files of writers killed before their
// rename are removed when a team is opened (see sweepTemps). Reading needs
// no write access: when a lock file cannot be created or opened (a
// read-only .troupe), the board and inboxes are read without the lock.
//
// It must never depend on agents, teams' behaviour, models or tools.
package file

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/store"
)

// Options tune a Store. The zero value is the production default.
type Options struct {
	// MaxInboxBytes is the unread backlog (bytes past a reader's cursor)
	// beyond which a send is refused with store.ErrInboxFull. Default 8 MiB.
	MaxInboxBytes int64
	// PollInterval is how often a blocked Receive or Watch looks again when
	// no event woke it. Default 1 s.
	PollInterval time.Duration
	// DisableWatch turns fsnotify off, leaving in-process wake-ups and the
	// poll (for tests of the fallback).
	DisableWatch bool
	// Logger receives warnings (malformed lines). Default slog.Default().
	Logger *slog.Logger
	// Now and NewID are seams for tests. Defaults: time.Now, store.NewID.
	Now   func() time.Time
	NewID func() string
}

// Store is the file store rooted at a state directory (.troupe).
type Store struct {
	dir      string
	teamsDir string
	opts     Options

	locks         locks
	appends       perKey[appendGroup]           // group commits of the journal and transcripts
	batches       perKey[batcher[*boardReq]]    // group commits of the boards
	logs          perKey[logState]              // the boards' logs as this process last left them
	rosterBatches perKey[batcher[*rosterReq]]   // group commits of the rosters
	sends         perKey[batcher[*pendingSend]] // group commits of the inboxes
	hub           hub
	watcher       watcher

	mu      sync.Mutex
	readers map[string]*reader // key inboxKey(team, member)
	rosters map[string]*rosterCache
	boards  map[string]*boardSnap // key: team key
	// compacting holds the pending folds of roster logs (roster.go).
	compacting map[string]*time.Timer
	compactWG  sync.WaitGroup
	parsed     taskCache
	swept      map[string]bool // teams whose stray temporary files were removed
	closed     bool
	done       chan struct{}

	beatMu sync.Mutex
	beats  map[string]*beatCache // key: team key (beats.go)
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the file store in stateDir.
func Open(stateDir string, opts Options) (*Store, error) {
	if opts.MaxInboxBytes <= 0 {
		opts.MaxInboxBytes = 8 << 20
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		now := opts.Now
		opts.NewID = func() string { return store.NewID(now()) }
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	teams := filepath.Join(abs, "teams")
	if err := os.MkdirAll(teams, 0o755); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	writeGitignore(abs, opts.Logger)
	s := &Store{
		dir:        abs,
		teamsDir:   teams,
		opts:       opts,
		readers:    make(map[string]*reader),
		rosters:    make(map[string]*rosterCache),
		beats:      make(map[string]*beatCache),
		boards:     make(map[string]*boardSnap),
		compacting: make(map[string]*time.Timer),
		done:       make(chan struct{}),
	}
	s.watcher = watcher{teamsDir: teams, hub: &s.hub, poll: opts.PollInterval, disabled: opts.DisableWatch}
	return s, nil
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

// Close folds the roster logs into config.json and stops the watcher;
// blocked calls return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.syncUnsynced("")
	s.checkpointLogs()
	// Roster logs waiting to be folded are folded now, so that config.json
	// is the whole roster once no process of the team runs.
	s.compactAll()
	close(s.done)
	s.watcher.close()
	return nil
}

func (s *Store) teamDir(name string) string { return filepath.Join(s.teamsDir, name) }

// CreateTeam creates the team's directories and its config.json.
func (s *Store) CreateTeam(ctx context.Context, r store.Roster) (store.Team, error) {
	name, err := store.NormalizeName(r.Name)
	if err != nil {
		return nil, fmt.Errorf("create team: %w", err)
	}
	r.Name = name
	r.Lead = store.LeadName
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.opts.Now().UTC()
	}
	if r.Members == nil {
		r.Members = []store.Member{}
	}
	if err := r.NormalizeMembers(); err != nil {
		return nil, fmt.Errorf("create team %s: %w", name, err)
	}
	dir := s.teamDir(name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create team %s: %w", name, store.ErrTeamExists)
		}
		return nil, fmt.Errorf("create team %s: %w", name, err)
	}
	for _, sub := range []string{"inbox", "tasks", "transcripts"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create team %s: %w", name, err)
		}
	}
	data, err := marshalRoster(&r)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, "config.json"), data); err != nil {
		return nil, fmt.Errorf("create team %s: %w", name, err)
	}
	if err := syncDir(s.teamsDir); err != nil {
		return nil, err
	}
	return s.team(name), nil
}

// Team opens an existing team.
func (s *Store) Team(ctx context.Context, name string) (store.Team, error) {
	t, err := s.OpenTeam(name)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// OpenTeam is Team returning the concrete type, which adds transcripts.
func (s *Store) OpenTeam(name string) (*Team, error) {
	n, err := store.NormalizeName(name)
	if err != nil {
		return nil, fmt.Errorf("team: %w", err)
	}
	ok, err := exists(filepath.Join(s.teamDir(n), "config.json"))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("team %s: %w", n, store.ErrTeamNotFound)
	}
	t := s.team(n)
	s.sweepTemps(t)
	return t, nil
}

func (s *Store) team(name string) *Team { return s.teamAt(name, s.teamDir(name), name) }

// teamAt is a team whose state is in dir; key names it in this process's
// caches and wake-ups (the name for a live team, something no team name can
// be for an archive).
func (s *Store) teamAt(name, dir, key string) *Team {
	t := &Team{s: s, name: name, dir: dir, key: key}
	t.tasks = &tasks{t: t}
	t.mailbox = &mailbox{t: t}
	t.journal = &journal{t: t}
	return t
}

// ListTeams returns every team's roster, sorted by name. A team whose
// config.json cannot be read is reported as an error.
func (s *Store) ListTeams(ctx context.Context) ([]store.Roster, error) {
	l, err := s.Teams(ctx)
	if err != nil {
		return nil, err
	}
	if len(l.Corrupt) > 0 {
		c := l.Corrupt[0]
		return nil, fmt.Errorf("list teams: team %s: %s", c.ID, c.Err)
	}
	return l.Rosters, nil
}

// Teams returns every team's roster, sorted by name, and the teams whose
// config.json cannot be read.
func (s *Store) Teams(ctx context.Context) (store.TeamList, error) {
	ents, err := os.ReadDir(s.teamsDir)
	if err != nil {
		return store.TeamList{}, fmt.Errorf("list teams: %w", err)
	}
	out := store.TeamList{Rosters: []store.Roster{}}
	for _, e := range ents {
		if !e.IsDir() || !store.NamePattern.MatchString(e.Name()) {
			continue
		}
		t := s.team(e.Name())
		r, err := t.ReadRoster(ctx)
		if errors.Is(err, store.ErrTeamNotFound) {
			continue // being created or deleted
		}
		if err != nil {
			path := t.path("config.json")
			msg := err.Error()
			if rest, ok := strings.CutPrefix(msg, "read roster of team "+t.name+": "); ok {
				msg = rest
			}
			out.Corrupt = append(out.Corrupt, store.Corrupt{ID: e.Name(), Path: path, Err: msg})
			continue
		}
		out.Rosters = append(out.Rosters, r)
	}
	slices.SortFunc(out.Rosters, func(a, b store.Roster) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteTeam removes a team's directory. The config.json goes first so that
// the team stops existing at once even if removing the rest fails.
func (s *Store) DeleteTeam(ctx context.Context, name string) error {
	n, err := store.NormalizeName(name)
	if err != nil {
		return fmt.Errorf("delete team: %w", err)
	}
	dir := s.teamDir(n)
	if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete team %s: %w", n, store.ErrTeamNotFound)
		}
		return fmt.Errorf("delete team %s: %w", n, err)
	}
	s.forgetTeam(n, dir)
	if err := removeTeamDir(dir); err != nil {
		return fmt.Errorf("delete team %s: %w", n, err)
	}
	return syncDir(s.teamsDir)
}

// forgetTeam drops what this Store keeps of team n, in dir, which is being
// deleted or archived: its readers, caches and pending roster fold, and
// its watch (a team made again under the name is watched anew).
func (s *Store) forgetTeam(n, dir string) {
	s.mu.Lock()
	for k := range s.readers {
		if len(k) > len(n) && k[:len(n)+1] == n+"/" {
			delete(s.readers, k)
		}
	}
	delete(s.rosters, n)
	s.forgetBeats(n)
	delete(s.boards, n)
	s.dropFold(n)
	s.mu.Unlock()
	s.parsed.forgetTeam(n)
	s.watcher.forget(dir)
}

// archiveStamp is the time in an archive's directory name; it has no "-",
// so the last "-" of the name ends the team's name.
const archiveStamp = "20060102T150405.000000000Z"

func (s *Store) archiveDir() string { return filepath.Join(s.dir, "archive") }

// ArchiveTeam ends a team like DeleteTeam but keeps its state: the team's
// directory moves to archive/<name>-<time>/ under the state directory, so
// its journal (usage, decisions) and transcripts stay readable after the
// team is gone.
func (s *Store) ArchiveTeam(ctx context.Context, name string) (store.Archive, error) {
	n, err := store.NormalizeName(name)
	if err != nil {
		return store.Archive{}, fmt.Errorf("archive team: %w", err)
	}
	dir := s.teamDir(n)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return store.Archive{}, fmt.Errorf("archive team %s: %w", n, store.ErrTeamNotFound)
		}
		return store.Archive{}, fmt.Errorf("archive team %s: %w", n, err)
	}
	archive := s.archiveDir()
	if err := os.MkdirAll(archive, 0o755); err != nil {
		return store.Archive{}, fmt.Errorf("archive team %s: %w", n, err)
	}
	at := s.opts.Now().UTC()
	id := n + "-" + at.Format(archiveStamp)
	dst := filepath.Join(archive, id)
	s.forgetTeam(n, dir)
	s.syncUnsynced(dir) // an archive keeps the transcripts whole
	if err := os.Rename(dir, dst); err != nil {
		return store.Archive{}, fmt.Errorf("archive team %s: %w", n, err)
	}
	if err := syncDir(s.teamsDir); err != nil {
		return store.Archive{}, err
	}
	at, _ = time.Parse(archiveStamp, at.Format(archiveStamp)) // as Archives reads it back
	return store.Archive{ID: id, Team: n, ArchivedAt: at, Path: dst}, syncDir(archive)
}

// removeTeamDir removes a team's directory. A file made in it meanwhile (a
// roster fold already running, a writer in another process that opened
// the team before it was deleted) fails the removal with ENOTEMPTY; it is
// tried again a few times.
func removeTeamDir(dir string) error {
	var err error
	for range 5 {
		if err = os.RemoveAll(dir); !errors.Is(err, syscall.ENOTEMPTY) {
			return err
		}
	}
	return err
}

// parseArchiveID splits an archive's id into the team's name and the time.
func parseArchiveID(id string) (string, time.Time, bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || !store.NamePattern.MatchString(id[:i]) {
		return "", time.Time{}, false
	}
	at, err := time.Parse(archiveStamp, id[i+1:])
	if err != nil || at.Format(archiveStamp) != id[i+1:] {
		return "", time.Time{}, false
	}
	return id[:i], at, true
}

// Archives returns the archives of team name, oldest first.
func (s *Store) Archives(ctx context.Context, name string) ([]store.Archive, error) {
	n, err := store.NormalizeName(name)
	if err != nil {
		return nil, fmt.Errorf("archives: %w", err)
	}
	ents, err := os.ReadDir(s.archiveDir())
	if errors.Is(err, fs.ErrNotExist) {
		return []store.Archive{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("archives of team %s: %w", n, err)
	}
	out := []store.Archive{}
	for _, e := range ents {
		team, at, ok := parseArchiveID(e.Name())
		if !ok || team != n || !e.IsDir() {
			continue
		}
		out = append(out, store.Archive{ID: e.Name(), Team: team, ArchivedAt: at, Path: filepath.Join(s.archiveDir(), e.Name())})
	}
	slices.SortFunc(out, func(a, b store.Archive) int { return a.ArchivedAt.Compare(b.ArchivedAt) })
	return out, nil
}

// OpenArchive opens an archived team, to read.
func (s *Store) OpenArchive(ctx context.Context, id string) (store.Team, error) {
	name, _, ok := parseArchiveID(id)
	if !ok {
		return nil, fmt.Errorf("archive %q: %w", id, store.ErrArchiveNotFound)
	}
	dir := filepath.Join(s.archiveDir(), id)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("archive %s: %w", id, store.ErrArchiveNotFound)
	}
	return s.teamAt(name, dir, "@archive/"+id), nil
}

// Team is one team of a file store.
type Team struct {
	s       *Store
	name    string
	dir     string
	key     string // in caches and wake-ups: the name, or an archive's
	tasks   *tasks
	mailbox *mailbox
	journal *journal
}

var _ store.Team = (*Team)(nil)

func (t *Team) Name() string           { return t.name }
func (t *Team) Tasks() store.Tasks     { return t.tasks }
func (t *Team) Mailbox() store.Mailbox { return t.mailbox }
func (t *Team) Journal() store.Journal { return t.journal }
func (t *Team) Transcripts() store.Transcripts {
	return transcripts{t}
}
func (t *Team) path(p ...string) string { return filepath.Join(append([]string{t.dir}, p...)...) }

// closedErr reports whether the store was closed.
func (s *Store) closedErr() error {
	select {
	case <-s.done:
		return store.ErrClosed
	default:
		return nil
	}
}

func marshalRoster(r *store.Roster) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
