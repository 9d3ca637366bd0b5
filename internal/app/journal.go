package app

import (
	"context"
	"errors"

	"github.com/troupe-dev/troupe/internal/store"
)

// TeamEvents reads team name's journal from st, or, when the team is gone,
// the journal of its latest archive.
func TeamEvents(ctx context.Context, st store.Store, name string) ([]store.Event, error) {
	t, err := st.Team(ctx, name)
	if err == nil {
		return t.Journal().Read(ctx)
	}
	if !errors.Is(err, store.ErrTeamNotFound) {
		return nil, err
	}
	archives, aerr := st.Archives(ctx, name)
	if aerr != nil || len(archives) == 0 {
		return nil, err
	}
	at, aerr := st.OpenArchive(ctx, archives[len(archives)-1].ID)
	if aerr != nil {
		return nil, aerr
	}
	return at.Journal().Read(ctx)
}
