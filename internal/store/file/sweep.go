package file

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// staleTemp is how old a temporary file must be before it is removed when
// no lock tells whether its writer is alive. Writers keep a temporary file
// for the time of one write, fsync and rename: milliseconds.
const staleTemp = time.Minute

// sweepTemps removes the temporary files that writers killed between
// creating and renaming them (kill -9, power loss) left in a team's
// directories. It runs once per team and Store, when the team is opened.
//
// A live writer in another process must not lose its temporary file (its
// rename would fail), so a file is removed only when that cannot happen:
// every temporary file of the store is written under a lock (config.lock for
// config.json, tasks/.lock for the board, inbox/<member>.lock for an inbox
// and its cursor), so holding that lock, taken without waiting, proves that
// no writer owns the file. A temporary file that no known lock covers is
// removed only once it is older than staleTemp. If the lock is busy, or the
// directory cannot be written (a read-only .troupe), nothing is removed and
// nothing is reported: the next open tries again.
func (s *Store) sweepTemps(t *Team) {
	s.mu.Lock()
	if s.swept == nil {
		s.swept = make(map[string]bool)
	}
	done := s.swept[t.key]
	s.swept[t.key] = true
	s.mu.Unlock()
	if done {
		return
	}
	for _, dir := range []string{t.dir, t.path("tasks"), t.path("inbox")} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() || !isTemp(e.Name()) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			lock := s.tempLock(t, dir, e.Name())
			if lock == "" {
				if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
					s.removeTemp(t, path)
				}
				continue
			}
			l := s.locks.get(lock)
			ok, err := l.tryLock()
			if err != nil || !ok {
				continue
			}
			s.removeTemp(t, path)
			l.unlock()
		}
	}
}

// isTemp reports whether name is a temporary file of writeFileAtomic
// (".<target>.tmp<random>").
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp")
}

// tempLock returns the lock under which the temporary file name in dir is
// written, or "" if it is not one the store knows.
func (s *Store) tempLock(t *Team, dir, name string) string {
	target, _, _ := strings.Cut(strings.TrimPrefix(name, "."), ".tmp")
	switch dir {
	case t.dir:
		if target == "config.json" || target == "roster.jsonl" {
			return t.path("config.lock")
		}
	case t.path("tasks"):
		return t.path("tasks", ".lock")
	case t.path("inbox"):
		for _, ext := range []string{".jsonl", ".cursor"} {
			if member, ok := strings.CutSuffix(target, ext); ok && member != "" {
				return inboxLock(t, member)
			}
		}
	}
	return ""
}

func (s *Store) removeTemp(t *Team, path string) {
	err := os.Remove(path)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			s.opts.Logger.Info("removed a temporary file left by an interrupted write", "team", t.name, "file", path)
		}
		return
	}
	s.opts.Logger.Debug("could not remove a stale temporary file", "team", t.name, "file", path, "err", err)
}
