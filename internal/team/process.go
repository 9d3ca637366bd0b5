package team

import "context"

// RunMember runs one teammate until it is shut down or ctx ends: the body of
// `troupe agent --team T --name N` in process mode. It shares nothing with
// the lead's process but the state directory.
func RunMember(ctx context.Context, cfg MemberConfig) error {
	m, err := NewMember(cfg)
	if err != nil {
		return err
	}
	return m.Run(ctx)
}
