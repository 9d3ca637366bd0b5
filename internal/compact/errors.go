package compact

import "errors"

// Errors of a compaction; match them with errors.Is.
var (
	// ErrNothingToCompact means the conversation holds nothing the model
	// has answered yet, so there is nothing to summarise.
	ErrNothingToCompact = errors.New("nothing to compact")
	// ErrEmptySummary means the summary call answered without text.
	ErrEmptySummary = errors.New("the model wrote no summary")
)
