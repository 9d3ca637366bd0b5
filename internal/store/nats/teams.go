package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/store"
)

// teamRec is the value of key team.<name>: the roster, and the generation
// that names every subject and key of this incarnation of the team, so that
// a team made again under an archived or deleted name starts empty while
// the old one's state stays readable.
type teamRec struct {
	Gen    string       `json:"gen"`
	Roster store.Roster `json:"roster"`
}

// archiveRec is the value of key archive.<id>.
type archiveRec struct {
	Archive store.Archive `json:"archive"`
	Gen     string        `json:"gen"`
	Roster  store.Roster  `json:"roster"`
}

// Team is one team of the store.
type Team struct {
	s    *Store
	name string
	gen  string
	// archived is set on a team opened from an archive: read only.
	archived *archiveRec
}

var _ store.Team = (*Team)(nil)

func (t *Team) Name() string { return t.name }

// Gen is the generation of this incarnation of the team.
func (t *Team) Gen() string { return t.gen }

func (t *Team) Tasks() store.Tasks             { return &board{t: t} }
func (t *Team) Mailbox() store.Mailbox         { return &mailbox{t: t} }
func (t *Team) Journal() store.Journal         { return &journal{t: t} }
func (t *Team) Transcripts() store.Transcripts { return transcripts{t: t} }

func (s *Store) now() time.Time { return s.opts.Now().UTC() }

// readTeam returns the record of team name and its revision (ok false if
// there is no such team; seq is then what a create expects).
func (s *Store) readTeam(ctx context.Context, name string) (rec teamRec, seq uint64, ok bool, err error) {
	m, found, err := s.lastFor(ctx, teamsBucket, kvKeyTeam(name))
	if err != nil {
		return rec, 0, false, fmt.Errorf("read team %s: %w", name, err)
	}
	if !found {
		return rec, 0, false, nil
	}
	if m.deleted() {
		return rec, m.Seq, false, nil
	}
	if err := json.Unmarshal(m.Data, &rec); err != nil || rec.Gen == "" || rec.Roster.Name != name {
		if err == nil {
			err = errors.New("no generation or a roster of another team")
		}
		return rec, m.Seq, true, fmt.Errorf("roster of team %s cannot be read: %w", name, err)
	}
	if rec.Roster.Members == nil {
		rec.Roster.Members = []store.Member{}
	}
	return rec, m.Seq, true, nil
}

// CreateTeam creates a team.
func (s *Store) CreateTeam(ctx context.Context, r store.Roster) (store.Team, error) {
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	name, err := store.NormalizeName(r.Name)
	if err != nil {
		return nil, fmt.Errorf("create team: %w", err)
	}
	r.Name, r.Lead = name, store.LeadName
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	if r.Members == nil {
		r.Members = []store.Member{}
	}
	if err := r.NormalizeMembers(); err != nil {
		return nil, fmt.Errorf("create team %s: %w", name, err)
	}
	_, seq, ok, err := s.readTeam(ctx, name)
	if ok {
		return nil, fmt.Errorf("create team %s: %w", name, store.ErrTeamExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create team %s: %w", name, err)
	}
	rec := teamRec{Gen: s.opts.NewID(), Roster: r}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if _, err := s.commit(ctx, []write{{subject: kvSubject(teamsBucket, kvKeyTeam(name)), data: data, expect: seq}}); err != nil {
		if errors.Is(err, errConflict) {
			return nil, fmt.Errorf("create team %s: %w", name, store.ErrTeamExists)
		}
		return nil, fmt.Errorf("create team %s: %w", name, err)
	}
	return &Team{s: s, name: name, gen: rec.Gen}, nil
}

// Team opens an existing team.
func (s *Store) Team(ctx context.Context, name string) (store.Team, error) {
	return s.OpenTeam(ctx, name)
}

// OpenTeam is Team returning the concrete type.
func (s *Store) OpenTeam(ctx context.Context, name string) (*Team, error) {
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	n, err := store.NormalizeName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrTeamNotFound, err)
	}
	rec, _, ok, err := s.readTeam(ctx, n)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", store.ErrTeamNotFound, n)
	}
	return &Team{s: s, name: n, gen: rec.Gen}, nil
}

// Teams returns every team, readable or not.
func (s *Store) Teams(ctx context.Context) (store.TeamList, error) {
	if err := s.closedErr(); err != nil {
		return store.TeamList{}, err
	}
	msgs, err := s.lastOf(ctx, teamsBucket, "team.>")
	if err != nil {
		return store.TeamList{}, fmt.Errorf("list teams: %w", err)
	}
	l := store.TeamList{Rosters: []store.Roster{}}
	for _, m := range msgs {
		if m.deleted() {
			continue
		}
		name := strings.TrimPrefix(keyOf(teamsBucket, m.Subject), "team.")
		var rec teamRec
		if err := json.Unmarshal(m.Data, &rec); err != nil || rec.Gen == "" || rec.Roster.Name != name {
			why := "no generation or a roster of another team"
			if err != nil {
				why = err.Error()
			}
			l.Corrupt = append(l.Corrupt, store.Corrupt{ID: name, Err: why})
			continue
		}
		if rec.Roster.Members == nil {
			rec.Roster.Members = []store.Member{}
		}
		l.Rosters = append(l.Rosters, rec.Roster)
	}
	slices.SortFunc(l.Rosters, func(a, b store.Roster) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(l.Corrupt, func(a, b store.Corrupt) int { return strings.Compare(a.ID, b.ID) })
	return l, nil
}

// ListTeams returns every roster; a roster that cannot be read fails it.
func (s *Store) ListTeams(ctx context.Context) ([]store.Roster, error) {
	l, err := s.Teams(ctx)
	if err != nil {
		return nil, err
	}
	if len(l.Corrupt) > 0 {
		return nil, fmt.Errorf("list teams: roster of team %s", l.Corrupt[0])
	}
	return l.Rosters, nil
}

// DeleteTeam removes a team and its state.
func (s *Store) DeleteTeam(ctx context.Context, name string) error {
	if err := s.closedErr(); err != nil {
		return err
	}
	n, err := store.NormalizeName(name)
	if err != nil {
		return fmt.Errorf("delete team: %w", err)
	}
	for {
		rec, seq, ok, rerr := s.readTeam(ctx, n)
		if !ok {
			if rerr != nil {
				return fmt.Errorf("delete team %s: %w", n, rerr)
			}
			return fmt.Errorf("delete team %s: %w", n, store.ErrTeamNotFound)
		}
		_, err := s.commit(ctx, []write{{subject: kvSubject(teamsBucket, kvKeyTeam(n)), del: true, expect: seq}})
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete team %s: %w", n, err)
		}
		if rec.Gen != "" {
			s.purgeGen(ctx, rec.Gen, true)
		}
		return nil
	}
}

// purgeGen drops the state of one incarnation of a team: its inboxes and
// their consumers always, its board, journal and transcripts unless they
// are kept as an archive. Failures are logged: the team is already gone
// and nothing reads this state any more.
func (s *Store) purgeGen(ctx context.Context, gen string, all bool) {
	// Best effort, and never held up longer than a few requests' time.
	ctx, cancel := context.WithTimeout(ctx, 4*requestTimeout)
	defer cancel()
	warn := func(what string, err error) {
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			s.opts.Logger.Warn("nats store: purge of a removed team", "what", what, "gen", gen, "err", err)
		}
	}
	warn("inboxes", s.inbox.Purge(ctx, jetstream.WithPurgeSubject(inboxPrefix+gen+".>")))
	for name := range s.inbox.ConsumerNames(ctx).Name() {
		if strings.HasPrefix(name, "in_"+gen+"_") {
			warn("consumer "+name, s.inbox.DeleteConsumer(ctx, name))
		}
	}
	if !all {
		return
	}
	tasks, err := s.js.Stream(ctx, "KV_"+tasksBucket)
	if err == nil {
		err = tasks.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(tasksBucket, gen+".>")))
	}
	warn("board", err)
	warn("journal", s.log.Purge(ctx, jetstream.WithPurgeSubject(journalPrefix+gen)))
	warn("transcripts", s.log.Purge(ctx, jetstream.WithPurgeSubject(transcriptPrefix+gen+".>")))
}

// archiveTime is the time part of an archive id.
const archiveTime = "20060102T150405.000000000Z"

// ArchiveTeam ends team name and keeps its state: the roster moves to an
// archive key in the same atomic batch that removes the team, and the
// board, journal and transcripts stay under the team's generation, which a
// team made again under the name never uses.
func (s *Store) ArchiveTeam(ctx context.Context, name string) (store.Archive, error) {
	if err := s.closedErr(); err != nil {
		return store.Archive{}, err
	}
	n, err := store.NormalizeName(name)
	if err != nil {
		return store.Archive{}, fmt.Errorf("archive team: %w", err)
	}
	for {
		rec, seq, ok, rerr := s.readTeam(ctx, n)
		if !ok {
			if rerr != nil {
				return store.Archive{}, fmt.Errorf("archive team %s: %w", n, rerr)
			}
			return store.Archive{}, fmt.Errorf("archive team %s: %w", n, store.ErrTeamNotFound)
		}
		if rerr != nil {
			return store.Archive{}, fmt.Errorf("archive team %s: %w", n, rerr)
		}
		at := s.now()
		a := store.Archive{ID: n + "-" + at.Format(archiveTime), Team: n, ArchivedAt: at}
		data, err := json.Marshal(archiveRec{Archive: a, Gen: rec.Gen, Roster: rec.Roster})
		if err != nil {
			return store.Archive{}, err
		}
		_, err = s.commit(ctx, []write{
			{subject: kvSubject(teamsBucket, kvKeyArchive(a.ID)), data: data},
			{subject: kvSubject(teamsBucket, kvKeyTeam(n)), del: true, expect: seq},
		})
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return store.Archive{}, fmt.Errorf("archive team %s: %w", n, err)
		}
		s.purgeGen(ctx, rec.Gen, false)
		return a, nil
	}
}

// Archives returns the archives of team name, oldest first.
func (s *Store) Archives(ctx context.Context, name string) ([]store.Archive, error) {
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	n, err := store.NormalizeName(name)
	if err != nil {
		return nil, fmt.Errorf("archives: %w", err)
	}
	msgs, err := s.lastOf(ctx, teamsBucket, "archive.>")
	if err != nil {
		return nil, fmt.Errorf("archives of %s: %w", n, err)
	}
	out := []store.Archive{}
	for _, m := range msgs {
		var rec archiveRec
		if m.deleted() || json.Unmarshal(m.Data, &rec) != nil || rec.Archive.Team != n {
			continue
		}
		out = append(out, rec.Archive)
	}
	slices.SortFunc(out, func(a, b store.Archive) int {
		if c := a.ArchivedAt.Compare(b.ArchivedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

var archiveIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// OpenArchive opens an archive, to read.
func (s *Store) OpenArchive(ctx context.Context, id string) (store.Team, error) {
	if err := s.closedErr(); err != nil {
		return nil, err
	}
	if !archiveIDPattern.MatchString(strings.ToLower(id)) || strings.Contains(id, "..") || strings.HasSuffix(id, ".") {
		return nil, fmt.Errorf("%w: %q", store.ErrArchiveNotFound, id)
	}
	m, ok, err := s.lastFor(ctx, teamsBucket, kvKeyArchive(id))
	if err != nil {
		return nil, fmt.Errorf("open archive %s: %w", id, err)
	}
	if !ok || m.deleted() {
		return nil, fmt.Errorf("%w: %s", store.ErrArchiveNotFound, id)
	}
	var rec archiveRec
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		return nil, fmt.Errorf("open archive %s: cannot be read: %w", id, err)
	}
	return &Team{s: s, name: rec.Archive.Team, gen: rec.Gen, archived: &rec}, nil
}

var errArchived = errors.New("an archived team is read only")

// ReadRoster returns the current roster, heartbeats included.
func (t *Team) ReadRoster(ctx context.Context) (store.Roster, error) {
	r, err := t.rosterOnly(ctx)
	if err != nil || t.archived != nil {
		return r, err
	}
	beats, err := t.readBeats(ctx)
	if err != nil {
		return store.Roster{}, err
	}
	store.WithHeartbeats(&r, beats)
	return r, nil
}

// rosterOnly is the roster as stored, without the heartbeat keys: one
// round trip, for the mailbox, which needs names and statuses, never
// heartbeats.
func (t *Team) rosterOnly(ctx context.Context) (store.Roster, error) {
	if err := t.s.closedErr(); err != nil {
		return store.Roster{}, err
	}
	if t.archived != nil {
		return t.archived.Roster.Clone(), nil
	}
	rec, _, ok, err := t.s.readTeam(ctx, t.name)
	if err != nil {
		return store.Roster{}, err
	}
	if !ok || rec.Gen != t.gen {
		return store.Roster{}, fmt.Errorf("%w: %s", store.ErrTeamNotFound, t.name)
	}
	return rec.Roster, nil
}

// ReadMember reads one member's entry through ReadRoster: a roster on
// NATS is one key, read whole either way.
func (t *Team) ReadMember(ctx context.Context, name string) (store.Member, bool, error) {
	return store.ReadMemberVia(ctx, t, name)
}

// UpdateMember changes one member's entry through UpdateRoster: a roster
// on NATS is one key, written whole either way.
func (t *Team) UpdateMember(ctx context.Context, name string, fn func(*store.Member) error) (store.Member, bool, error) {
	return store.UpdateMemberVia(ctx, t, name, fn)
}

// UpdateRoster is a read-modify-write with a compare-and-set, run again
// when another client wrote first (fn may then run more than once). A
// change of heartbeats alone writes the members' heartbeat keys instead
// (see liveness.go).
func (t *Team) UpdateRoster(ctx context.Context, fn func(*store.Roster) error) (store.Roster, error) {
	if err := t.s.closedErr(); err != nil {
		return store.Roster{}, err
	}
	if t.archived != nil {
		return store.Roster{}, fmt.Errorf("update roster of %s: %w", t.name, errArchived)
	}
	for {
		rec, seq, ok, err := t.s.readTeam(ctx, t.name)
		if err != nil {
			return store.Roster{}, err
		}
		if !ok || rec.Gen != t.gen {
			return store.Roster{}, fmt.Errorf("%w: %s", store.ErrTeamNotFound, t.name)
		}
		beats, err := t.readBeats(ctx)
		if err != nil {
			return store.Roster{}, err
		}
		store.WithHeartbeats(&rec.Roster, beats)
		cur := rec.Roster
		next := cur.Clone()
		if err := fn(&next); err != nil {
			return store.Roster{}, err
		}
		next.Name, next.Lead, next.CreatedAt = cur.Name, cur.Lead, cur.CreatedAt
		if next.Members == nil {
			next.Members = []store.Member{}
		}
		if err := next.NormalizeMembers(); err != nil {
			return store.Roster{}, fmt.Errorf("update roster of team %s: %w", t.name, err)
		}
		if fwd, ok := store.HeartbeatsForward(&cur, &next); ok {
			if err := t.beat(ctx, fwd); err != nil {
				return store.Roster{}, err
			}
			return next.Clone(), nil
		}
		data, err := json.Marshal(teamRec{Gen: t.gen, Roster: next})
		if err != nil {
			return store.Roster{}, err
		}
		_, err = t.s.commit(ctx, []write{{subject: kvSubject(teamsBucket, kvKeyTeam(t.name)), data: data, expect: seq}})
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return store.Roster{}, fmt.Errorf("update roster of team %s: %w", t.name, err)
		}
		t.forgetBeats(ctx, cur, next)
		return next.Clone(), nil
	}
}
